"""``llama-bindgen smoke`` logic: the checks themselves, the host run and the aarch64 run."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest

from generator.build.native import BuildResult
from generator.smoke import check_results, run_smoke, skip_reason
from tests.mtp.conftest import BINDINGS_PARENT, build_or_fail


def _run(tokens: list[int], drafted: int, accepted: int) -> dict[str, Any]:
    rate = accepted / drafted if drafted else 0.0
    return {
        "tokens": tokens,
        "streamed_in_order": True,
        "finish_reason": "length",
        "metrics": {
            "generated_tokens": len(tokens), "drafted_tokens": drafted,
            "accepted_tokens": accepted, "acceptance_rate": rate, "steps": 3,
            "tokens_per_second": 1.0,
        },
    }  # fmt: skip


GOOD: dict[str, Any] = {
    "ok": True,
    "wrapper": True,
    "models": [
        {"name": "agree", "plain": _run([1, 2, 3], 0, 0), "mtp": _run([1, 2, 3], 3, 3)},
        {"name": "partial", "plain": _run([1, 2, 3], 0, 0), "mtp": _run([1, 2, 3], 4, 2)},
        {
            "name": "plain",
            "plain": _run([1, 2, 3], 0, 0),
            "mtp_error": {"error_type": "LlamaUnsupportedError", "reason": "no NextN"},
        },
    ],
}


def _failed(data: dict[str, Any]) -> list[str]:
    checks, _rows = check_results(data, strict_partial=True)
    return [c.name for c in checks if not c.ok]


def test_checks_pass_on_good_results() -> None:
    checks, rows = check_results(GOOD, strict_partial=True)
    assert all(c.ok for c in checks) and len(rows) == 5


def test_checks_catch_each_failure() -> None:
    differing = copy.deepcopy(GOOD)
    differing["models"][1]["mtp"]["tokens"] = [1, 2, 4]
    assert _failed(differing) == ["partial: MTP output identical to plain greedy"]
    full = copy.deepcopy(GOOD)
    full["models"][1]["mtp"] = _run([1, 2, 3], 4, 4)
    assert _failed(full) == ["partial: 0 < acceptance < 1"]
    nothing = copy.deepcopy(GOOD)
    nothing["models"][0]["mtp"] = _run([1, 2, 3], 0, 0)
    assert _failed(nothing) == ["agree: drafted > 0", "agree: accepted > 0"]
    untyped = copy.deepcopy(GOOD)
    untyped["models"][2]["mtp_error"] = {"error_type": "RuntimeError", "reason": "x"}
    assert _failed(untyped) == ["plain: MTP asked for raises LlamaUnsupportedError"]
    refused = copy.deepcopy(GOOD)
    del refused["models"][0]["mtp"]
    refused["models"][0]["mtp_unexpected_error"] = "the model has no NextN (MTP) layers"
    assert _failed(refused) == ["agree: MTP runs"]


@pytest.mark.slow
@pytest.mark.needs_tree
def test_smoke_linux_x86_64(host_build: BuildResult, tmp_path: Path) -> None:
    report = run_smoke("linux-x86_64", host_build.lib_dir, BINDINGS_PARENT, tmp_path)
    assert report.passed, report.table()
    assert {r.model for r in report.rows} == {"agree", "partial", "plain"}
    assert "acceptance" in report.table()


@pytest.mark.slow
@pytest.mark.needs_tree
def test_smoke_linux_aarch64_under_qemu(tree_b11312: Path, tmp_path: Path) -> None:
    """Fails (never skips) when qemu-aarch64 or the arm64 Python cannot be set up."""
    if shutil.which("qemu-aarch64") is None:
        pytest.fail("qemu-aarch64 is not installed (Debian package qemu-user)")
    build = build_or_fail(tree_b11312, "linux-aarch64")
    report = run_smoke("linux-aarch64", build.lib_dir, BINDINGS_PARENT, tmp_path, max_tokens=24)
    assert report.passed, report.table()
    assert "aarch64" in report.runner


def test_windows_smoke_says_why_it_is_skipped(tmp_path: Path) -> None:
    reason = skip_reason("windows-x86_64")
    assert reason is not None and "wine" in reason
    if shutil.which("wine") is None and shutil.which("/usr/lib/wine/wine64") is None:
        assert reason == "wine not installed"
    report = run_smoke("windows-x86_64", tmp_path, BINDINGS_PARENT, tmp_path)
    assert report.status == "skipped" and report.reason == reason
    assert "skipped (wine" in report.table()


@pytest.mark.slow
@pytest.mark.needs_tree
def test_cli_verb(
    host_build: BuildResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from generator.cli import main

    out = tmp_path / "reports.json"
    args = ["smoke", "--lib-dir", str(host_build.lib_dir), "--max-tokens", "12", "--json", str(out)]
    assert main(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "smoke: linux-x86_64 passed"
    assert '"status": "passed"' in out.read_text(encoding="utf-8")
    no_model = tmp_path / "missing.gguf"
    assert main([*args, "--model", str(no_model)]) == 2
