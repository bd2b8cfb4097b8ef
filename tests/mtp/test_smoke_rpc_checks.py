"""The smoke's RPC checks judge both drivers' results: each way a result can be wrong fails
its own check, and a client's end counts as llama.cpp's only the way the platform ends an
aborted process."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from generator.smoke.rpc_part import (
    C_REFUSALS,
    ENDED,
    PYTHON_REFUSALS,
    WINDOWS_ABORT_STATUS,
    Ended,
    lost_worker_check,
    rpc_checks,
)

SERVERS = ["127.0.0.1:5001", "127.0.0.1:5002"]
STDERR = (
    "load_tensors:   CPU_Mapped model buffer size =     0.25 MiB\n"
    "load_tensors: RPC0[127.0.0.1:5001] model buffer size =     0.16 MiB\n"
    "load_tensors: RPC0[127.0.0.1:5002] model buffer size =     0.06 MiB\n"
)
GOOD: dict[str, Any] = {
    "runs": {"plain": {"local": [1, 2, 3], "split": [1, 2, 3]}},
    "devices": [
        {"name": "CPU", "endpoint": "", "memory_total": 8},
        {"name": "RPC0", "endpoint": SERVERS[0], "memory_total": 8},
        {"name": "RPC1", "endpoint": SERVERS[1], "memory_total": 8},
    ],
    "refusals": {name: {"error_type": error, "reason": "x"} for name, error in C_REFUSALS.items()},
}


def _failed(part: dict[str, Any], stderr: str = STDERR) -> list[str]:
    return [c.name for c in rpc_checks(part, stderr, SERVERS, C_REFUSALS) if not c.ok]


def test_a_good_result_passes() -> None:
    assert _failed(GOOD) == []


def test_each_wrong_result_fails_its_check() -> None:
    differs = copy.deepcopy(GOOD)
    differs["runs"]["plain"]["split"] = [1, 2, 4]
    assert _failed(differs) == ["rpc plain: split over 2 workers equals local"]
    empty = copy.deepcopy(GOOD)
    empty["runs"]["plain"] = {"local": [], "split": []}
    assert _failed(empty) == ["rpc plain: split over 2 workers equals local"]
    one_worker = STDERR.replace("RPC0[127.0.0.1:5002]", "CPU")
    assert _failed(GOOD, one_worker) == ["rpc: weights on this CPU and on both workers"]
    unlisted = copy.deepcopy(GOOD)
    unlisted["devices"].pop()
    assert _failed(unlisted) == ["rpc: the workers' devices listed with memory"]
    survived = copy.deepcopy(GOOD)
    survived["refusals"]["nothing_listens"]["error_type"] = "not ended by llama.cpp"
    assert _failed(survived) == [f"rpc nothing_listens: {ENDED}"]


def test_the_python_driver_must_raise_the_typed_errors() -> None:
    checks = rpc_checks(GOOD, STDERR, SERVERS, PYTHON_REFUSALS)
    failed = [c.name for c in checks if not c.ok]
    assert failed == [f"rpc {name}: {error}" for name, error in PYTHON_REFUSALS.items()]


def test_an_absent_backend_fails() -> None:
    checks = rpc_checks({"absent": "no libggml-rpc"}, "", [], C_REFUSALS)
    assert [(c.name, c.ok) for c in checks] == [("RPC backend present", False)]


@pytest.mark.parametrize(
    ("returncode", "windows", "by_llama"),
    [
        (-6, False, True),  # SIGABRT
        (-13, False, True),  # SIGPIPE on a lost connection
        (1, False, False),  # the driver's own failure
        (WINDOWS_ABORT_STATUS, True, True),
        (1, True, False),
        (-6, True, False),
    ],
)
def test_an_end_is_llamas_only_as_the_platform_aborts(
    returncode: int, windows: bool, by_llama: bool
) -> None:
    ended = Ended(returncode, "", "ggml-rpc.cpp:654: Remote RPC server crashed", windows)
    assert ended.by_llama is by_llama
    assert lost_worker_check(ended).ok is by_llama


def test_a_client_that_outlives_the_worker_or_hangs_fails() -> None:
    assert not lost_worker_check(Ended(-6, '{"survived": true}', "")).ok
    assert not lost_worker_check(None).ok
