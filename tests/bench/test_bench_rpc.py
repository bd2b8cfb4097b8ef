"""The bench's "rpc" section without running it: its runs, its per-repeat ratios, its report."""

from __future__ import annotations

from pathlib import Path

from bench import report, rpc, runner


def _setup() -> rpc.Setup:
    models = {"test": Path("t.gguf"), "gemma": Path("g.gguf")}
    return rpc.Setup(Path("repo"), Path("bindings"), Path("lib"), models, 8, 1)


def test_each_model_and_mode_runs_local_and_split() -> None:
    runs = rpc.configurations(_setup(), ["127.0.0.1:1", "127.0.0.1:2"])
    names = [r["name"] for r in runs]
    assert names == [
        "test plain local", "test plain split", "test draft-mtp local", "test draft-mtp split",
        "gemma plain local", "gemma plain split",
    ]  # fmt: skip
    assert all(bool(r["servers"]) == r["name"].endswith("split") for r in runs)


def test_ratios_are_per_repeat_and_tokens_are_compared() -> None:
    figs = {
        "test plain local": [
            {"tokens_per_second": 100.0, "load_s": 0.25, "tokens": [1, 2]},
            {"tokens_per_second": 80.0, "load_s": 0.2, "tokens": [1, 2]},
        ],
        "test plain split": [
            {"tokens_per_second": 50.0, "load_s": 0.75, "tokens": [1, 2]},
            {"tokens_per_second": 60.0, "load_s": 0.4, "tokens": [1, 3]},
        ],
    }
    summary = rpc.summarise(figs)["test plain"]
    assert summary["tps_split_over_local"]["values"] == [0.5, 0.75]
    assert summary["load_split_over_local"]["values"] == [3.0, 2.0]
    assert summary["same_tokens"] is False


def test_the_report_has_a_row_per_model_and_mode() -> None:
    figs = {
        f"test plain {where}": [{"tokens_per_second": 10.0, "load_s": 1.0, "tokens": [5]}]
        for where in ("local", "split")
    }
    section = {"method": "how", "repeats": 1, "n": 8, "runs": rpc.summarise(figs)}
    lines = report._rpc_lines(section)
    row = next(line for line in lines if line.startswith("| test plain |"))
    assert row.endswith("| yes |") and "1.000" in row


def test_the_section_is_named_but_not_a_default() -> None:
    assert "rpc" in runner.SECTIONS and "rpc" not in runner.DEFAULT_SECTIONS
    assert runner.parse_args(["--sections", "rpc"]).rpc_tokens == 64
