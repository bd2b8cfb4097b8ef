"""``llama-bindgen smoke`` logic: the checks themselves, the host run and the aarch64 run."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest

from generator.native.build import BuildResult
from generator.platforms import get_platform
from generator.smoke import (
    C_REFUSAL,
    MTP_MODE,
    STRATEGY_RUNS,
    SmokeReport,
    check_results,
    media_checks,
    not_run_reason,
    run_driver,
    run_smoke,
    strategy_checks,
    tree_image,
)
from generator.smoke.rpc_part import C_REFUSALS, PYTHON_REFUSALS
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
    assert _failed(untyped) == ["plain: MTP asked for is refused with LlamaUnsupportedError"]
    refused = copy.deepcopy(GOOD)
    del refused["models"][0]["mtp"]
    refused["models"][0]["mtp_unexpected_error"] = "the model has no NextN (MTP) layers"
    assert _failed(refused) == ["agree: MTP runs"]


@pytest.mark.slow
@pytest.mark.needs_tree
def test_smoke_linux_x86_64(host_build: BuildResult, tree_pin: Path, tmp_path: Path) -> None:
    image = tree_image(tree_pin)
    assert image is not None
    report = run_smoke("linux-x86_64", host_build.lib_dir, BINDINGS_PARENT, tmp_path, image=image)
    assert report.passed, report.table()
    repeating = "partial (repeating prompt)"
    media = "agree + image"
    assert {r.model for r in report.rows} == {"agree", "partial", "plain", repeating, media}
    assert [r.mode for r in report.rows if r.model == media] == ["off", MTP_MODE]
    assert any(c.name.startswith("media: MTP output identical") and c.ok for c in report.checks)
    assert [r.mode for r in report.rows if r.model == repeating] == [
        "off",
        *(name for name, _kinds, _draft in STRATEGY_RUNS),
    ]
    assert "acceptance" in report.table()
    _assert_rpc_part_ran(report, PYTHON_REFUSALS)


def _assert_rpc_part_ran(report: SmokeReport, refusals: dict[str, str]) -> None:
    """The RPC part's checks are in the (passed) report: it ran, not left out."""
    names = [c.name for c in report.checks]
    assert sum(n.startswith("rpc ") and n.endswith("equals local") for n in names) == 3, names
    assert all(f"rpc {name}: {expected}" in names for name, expected in refusals.items())
    assert any(n.startswith("rpc: a worker lost mid-generation") for n in names)


def _strategy_run(name: str, tokens: list[int], per: list[tuple[str, int, int]]) -> dict[str, Any]:
    drafted = sum(d for _k, d, _a in per)
    accepted = sum(a for _k, _d, a in per)
    metrics = {
        "generated_tokens": len(tokens), "drafted_tokens": drafted, "accepted_tokens": accepted,
        "acceptance_rate": accepted / drafted if drafted else 0.0, "steps": 1,
        "tokens_per_second": 1.0,
        "strategies": [
            {"kind": k, "drafted_tokens": d, "accepted_tokens": a} for k, d, a in per
        ],
    }  # fmt: skip
    return {"name": name, "tokens": tokens, "metrics": metrics}


def test_strategy_checks_fail_each_way() -> None:
    reference = _strategy_run("plain", [1, 2, 3], [])
    good = _strategy_run("mix", [1, 2, 3], [("ngram-mod", 4, 2), ("draft-mtp", 3, 1)])
    checks, rows = strategy_checks({"reference": reference, "runs": [good]})
    assert all(c.ok for c in checks) and [r.mode for r in rows] == ["off", "mix"]
    other = _strategy_run("mix", [1, 2, 4], [("ngram-mod", 4, 2), ("draft-mtp", 3, 1)])
    idle = _strategy_run("mix", [1, 2, 3], [("ngram-mod", 4, 2), ("draft-mtp", 0, 0)])
    refused = {"name": "mix", "unexpected_error": "no wrapper"}
    for run, failing in (
        (other, ["mix: output identical to plain greedy"]),
        (idle, ["mix: every strategy drafted and was accepted"]),
        (refused, ["mix: runs"]),
    ):
        checks, _rows = strategy_checks({"reference": reference, "runs": [run]})
        assert [c.name for c in checks if not c.ok] == failing


def test_a_strategy_is_left_out_only_when_the_release_lacks_it() -> None:
    """The drivers say whether the wrapper refused a strategy with
    LLAMA_MTP_STATUS_NOT_IN_RELEASE; any other refusal fails the smoke, whatever its words."""
    reference = _strategy_run("plain", [1, 2, 3], [])
    said = "ngram-cache is not in this llama.cpp release"
    lacked = {"name": "ngram-cache", "absent": said, "lacked_by_release": True}
    refused = {"name": "ngram-cache", "absent": said, "lacked_by_release": False}
    checks, _rows = strategy_checks({"reference": reference, "runs": [lacked]})
    assert [(c.name, c.ok) for c in checks] == [
        ("ngram-cache: refused as not in this release", True)
    ]
    checks, _rows = strategy_checks({"reference": reference, "runs": [refused]})
    assert [c.ok for c in checks] == [False]


def test_the_smokes_strategies_and_statuses_are_the_generated_ones() -> None:
    """STRATEGY_RUNS names strategies by the header's rule: each is a generated SpeculativeMode;
    the C driver's refusal is llama_mtp_status_name's word for the generated status."""
    import sys

    if str(BINDINGS_PARENT) not in sys.path:
        sys.path.insert(0, str(BINDINGS_PARENT))
    from llama_bindings import constants

    modes = {m.value for m in constants.SpeculativeMode}
    for _name, kinds, _draft in STRATEGY_RUNS:
        assert set(kinds) <= modes, kinds
    assert constants.SpeculativeMode.DRAFT_MTP.value == MTP_MODE
    assert C_REFUSAL == "no_nextn_layers" and hasattr(constants, "LLAMA_MTP_STATUS_NO_NEXTN_LAYERS")


@pytest.mark.slow
@pytest.mark.needs_tree
def test_smoke_linux_aarch64_under_qemu(tree_pin: Path, tmp_path: Path) -> None:
    """Fails (never skips) when qemu-aarch64 or the arm64 Python cannot be set up."""
    if shutil.which("qemu-aarch64") is None:
        pytest.fail("qemu-aarch64 is not installed (Debian package qemu-user)")
    build = build_or_fail(tree_pin, "linux-aarch64")
    report = run_smoke("linux-aarch64", build.lib_dir, BINDINGS_PARENT, tmp_path, max_tokens=24)
    assert report.passed, report.table()
    assert "aarch64" in report.runner
    _assert_rpc_part_ran(report, PYTHON_REFUSALS)


def test_c_driver_refusal_is_checked_by_its_own_name() -> None:
    data = copy.deepcopy(GOOD)
    data["models"][2]["mtp_error"]["error_type"] = C_REFUSAL
    checks, _rows = check_results(data, strict_partial=True, refusal=C_REFUSAL)
    assert all(c.ok for c in checks)
    checks, _rows = check_results(GOOD, strict_partial=True, refusal=C_REFUSAL)
    assert [c.name for c in checks if not c.ok] == [
        f"plain: MTP asked for is refused with {C_REFUSAL}"
    ]


@pytest.mark.slow
@pytest.mark.needs_tree
def test_c_driver_generates_what_the_python_runtime_generates(
    host_build: BuildResult, tree_pin: Path, tmp_path: Path
) -> None:
    """mtp_smoke.c, run natively on linux-x86_64, gives the runtime's tokens and MTP counts on
    every test model and after an image (its media part): the Windows smoke under wine checks
    the same thing the Python one does."""
    import sys

    from generator.native.host import execution_here
    from generator.smoke import _media_plan, _models, write_test_models
    from generator.smoke.c_driver import run_c_driver

    plat = get_platform("linux-x86_64")
    written = write_test_models(tmp_path / "work" / "models", "test")
    models = _models(None, written)
    agree = str(written["agree"])
    media = _media_plan(tmp_path / "work", agree, written["projector"], tree_image(tree_pin))
    plan = {"lib_dir": str(host_build.lib_dir), "max_tokens": 32, "n_ctx": 512,
            "draft_token_max": 3, "models": models, "media": media}  # fmt: skip
    c_data, why = run_c_driver(plat, execution_here(plat), plan, tmp_path / "c")
    assert c_data is not None and c_data["ok"], why
    (tmp_path / "py").mkdir()
    py_data, why = run_driver([sys.executable], plan, BINDINGS_PARENT, tmp_path / "py")
    assert py_data is not None and py_data["ok"], why
    for c_model, py_model in zip(c_data["models"], py_data["models"], strict=True):
        assert c_model["name"] == py_model["name"]
        assert c_model["plain"]["tokens"] == py_model["plain"]["tokens"]
        if "mtp" in py_model:
            for key in ("drafted_tokens", "accepted_tokens", "steps", "generated_tokens"):
                assert c_model["mtp"]["metrics"][key] == py_model["mtp"]["metrics"][key], key
            assert c_model["mtp"]["tokens"] == py_model["mtp"]["tokens"]
        else:
            assert c_model["mtp_error"]["error_type"] == C_REFUSAL
            assert py_model["mtp_error"]["error_type"] == "LlamaUnsupportedError"
    c_media, py_media = c_data["media"], py_data["media"]
    assert c_media["embd_supported"] and py_media["embd_supported"]
    for mode in ("plain", "mtp"):
        assert c_media[mode]["tokens"] == py_media[mode]["tokens"], mode
        for key in ("image_rows", "image_positions"):
            assert c_media[mode][key] == py_media[mode][key] > 0, key
        for key in ("drafted_tokens", "accepted_tokens", "steps", "generated_tokens"):
            assert c_media[mode]["metrics"][key] == py_media[mode]["metrics"][key], (mode, key)
    assert c_media["mtp"]["metrics"]["accepted_tokens"] > 0


@pytest.mark.slow
@pytest.mark.needs_tree
def test_smoke_windows_x86_64_under_wine(tree_pin: Path, tmp_path: Path) -> None:
    """Fails (never skips) when wine is not installed (Debian package wine64)."""
    reason = not_run_reason("windows-x86_64")
    assert reason is None, reason
    build = build_or_fail(tree_pin, "windows-x86_64")
    report = run_smoke("windows-x86_64", build.lib_dir, BINDINGS_PARENT, tmp_path, max_tokens=24)
    assert report.passed, report.table()
    assert "under wine" in report.runner and "mtp_smoke.c" in report.runner
    _assert_rpc_part_ran(report, C_REFUSALS)
    partial = [r for r in report.rows if r.model == "partial" and r.mode == "draft-mtp"]
    assert partial and 0 < partial[0].acceptance < 1


def test_smoke_that_cannot_run_is_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """macOS programs cannot run here: not-run with the reason, and the CLI exits 3."""
    reason = not_run_reason("macos-arm64")
    assert reason is not None and "macOS" in reason
    report = run_smoke("macos-arm64", tmp_path, BINDINGS_PARENT, tmp_path)
    assert (report.status, report.reason) == ("not-run", reason)
    assert not report.passed
    assert f"smoke macos-arm64: not-run ({reason})" in report.table()
    from generator.cli import main

    code = main(["smoke", "--platform", "macos-arm64", "--lib-dir", str(tmp_path)])
    assert code == 3
    assert "macos-arm64 not-run" in capsys.readouterr().out


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


@pytest.mark.slow
@pytest.mark.needs_tree
def test_gates_of_a_platform_built_but_not_run_here(tree_pin: Path, tmp_path: Path) -> None:
    """macos-arm64 is built here by zig: build, symbols (Mach-O exports) and layout (read from
    the compiled probe) run and pass; the smoke cannot run, so it is not-run and `gates` exits 3:
    never a pass."""
    import json

    from generator.cli import main

    build_or_fail(tree_pin, "macos-arm64")
    record = tmp_path / "gates.json"
    code = main(["gates", "--tree", str(tree_pin), "--platform", "macos-arm64",
                 "--json", str(record)])  # fmt: skip
    data = json.loads(record.read_text(encoding="utf-8"))
    assert code == 3, data
    assert data["gates"] == {"build": "passed", "symbols": "passed", "layout": "passed",
                             "smoke": "not-run"}  # fmt: skip
    assert "macOS" in data["details"]["smoke"]
    assert "compiled object" in data["details"]["layout"]


def _media_part(**changes: Any) -> dict[str, Any]:
    run = {**_run([5, 6, 7], 0, 0), "image_rows": 12, "image_positions": 4}
    mtp = {**_run([5, 6, 7], 3, 3), "image_rows": 12, "image_positions": 4}
    return {"plain": run, "mtp": mtp, "embd_supported": True, **changes}


def test_media_checks_fail_each_way() -> None:
    def failed(part: dict[str, Any]) -> list[str]:
        checks, _rows, _notes = media_checks(part)
        return [c.name for c in checks if not c.ok]

    assert failed(_media_part()) == []
    other = {**_media_part()["mtp"], "tokens": [5, 6, 8]}
    assert failed(_media_part(mtp=other)) == ["media: MTP output identical to plain greedy"]
    idle = _media_part()["mtp"] | {"metrics": _run([5, 6, 7], 0, 0)["metrics"]}
    assert failed(_media_part(mtp=idle)) == ["media: MTP drafted and accepted"]
    no_rows = _media_part()["plain"] | {"image_rows": 0}
    assert failed(_media_part(plain=no_rows)) == [
        "media: the image became rows of the model's input"
    ]
    # MTP refused: right only where the wrapper says the release takes no media rows
    refused = {"refused": "takes token batches only"}
    assert failed(_media_part(mtp=refused, embd_supported=False)) == []
    assert failed(_media_part(mtp=refused)) == ["media: MTP refused as not in this release"]
    assert failed({"plain": {"refused": "x"}, "mtp": refused}) == [
        "media: plain generation after an image runs"
    ]
    # libmtmd missing where the bindings declare it fails; bindings without it leave a note
    assert failed({"absent": "no file", "expected": True}) == ["media: libmtmd present"]
    checks, _rows, notes = media_checks({"absent": "not bound", "expected": False})
    assert checks == [] and notes == ["media: not run (not bound)"]
