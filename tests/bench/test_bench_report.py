"""The bench's statistics, upstream-log parsing and report, offline (no timing thresholds)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench import report
from bench.loops import parse_upstream
from bench.stats import Series, ratio_series, run_measured


def test_ratio_series_pairs_runs_in_order() -> None:
    ratios = ratio_series(Series("s", [2.0, 4.0, 9.0]), Series("s", [1.0, 8.0, 3.0]))
    assert ratios.values == [2.0, 0.5, 3.0]
    assert ratios.summary()["median"] == 2.0
    assert ratios.summary()["min"] == 0.5 and ratios.summary()["max"] == 3.0


def test_run_measured_reports_the_childs_own_peak_memory() -> None:
    small = run_measured([sys.executable, "-c", "print('x')"])
    # b"\x01" * n writes every page (a zeroed bytearray may stay unmapped and not count in RSS)
    big = run_measured([sys.executable, "-c", "b = b'\\x01' * 200_000_000; print(len(b))"])
    assert small.returncode == 0 and small.stdout.strip() == "x"
    assert big.peak_rss_mb - small.peak_rss_mb > 150


def test_parse_upstream_reads_speculative_simple_statistics() -> None:
    log = (
        "encoded    9 tokens in    0.020 seconds, speed:  450.000 t/s\n"
        "decoded   52 tokens in    0.520 seconds, speed:  100.000 t/s\n\n"
        "n_draft   = 3\nn_predict = 52\nn_drafted = 39\nn_accept  = 30\naccept    = 76.923%\n"
    )
    fig = parse_upstream(log)
    assert fig["generated_tokens"] == 52
    assert fig["tokens_per_second"] == pytest.approx(100.0)
    assert (fig["drafted_tokens"], fig["accepted_tokens"]) == (39, 30)
    with pytest.raises(RuntimeError, match="no statistics"):
        parse_upstream("decoded 3 tokens in 1.0 seconds, speed: 3.0 t/s\n")


_ENV = {
    "llama_cpp_tag": "b11312",
    "llama_cpp_commit": "0c1e57098bba43ac",
    "cpu_count": 2,
    "load_average": [1.0, 1.0, 1.0],
    "python": "3.11",
}


def _summary(values: list[float]) -> dict[str, object]:
    return Series("x", values).summary()


def test_markdown_report_shows_median_and_spread(tmp_path: Path) -> None:
    result = {
        "name": "t",
        "environment": {
            "llama_cpp_tag": "b11312", "llama_cpp_commit": "0c1e57098bba43ac",
            "cpu_count": 2, "load_average": [1.0, 1.0, 1.0], "python": "3.11",
        },
        "sections": {
            "loop": {
                "method": "m", "model": "x.gguf", "identical_tokens": True,
                "tokens_per_second": {
                    "c_driver": _summary([10.0, 12.0, 11.0]),
                    "python_runtime": _summary([9.0, 12.0, 10.5]),
                    "python_runtime_no_abort_callback": _summary([9.5, 12.0, 10.0]),
                },
                "peak_rss_mb": {
                    k: _summary([100.0])
                    for k in ("c_driver", "python_runtime", "python_runtime_no_abort_callback")
                },
                "ratio_python_over_c": _summary([0.9, 1.0, 0.95]),
                "ratio_python_no_abort_callback_over_c": _summary([0.95, 1.0, 0.9]),
            }
        },
    }  # fmt: skip
    text = report.markdown(json.loads(json.dumps(result)), "t.png")
    assert "| C driver | 11.0 (10.0..12.0, n=3) |" in text
    assert "**0.950 (0.900..1.000, n=3)**" in text
    assert "## 1." not in text  # sections that did not run are left out


def _import_report(section: dict[str, object]) -> str:
    result = {"name": "t", "environment": _ENV, "sections": {"import": section}}
    return report.markdown(json.loads(json.dumps(result)), "t.png")


def test_import_section_ratios_are_per_repeat_and_net_of_the_interpreter_start() -> None:
    from bench.importing import PEER, START, _summarise

    wall = {
        START: Series("s", [0.02, 0.03]),
        "ours_abi": Series("s", [0.06, 0.05]),
        PEER: Series("s", [0.22, 0.25]),
    }
    inside = {"ours_abi": {"import_s": Series("s", [0.004, 0.005])}}
    out = _summarise(wall, inside, {"ours_abi": {"ffi": "pre-parsed"}}, None)
    assert out["ratio_vs_llama_cpp_python"]["ours_abi"]["values"] == pytest.approx(
        [0.06 / 0.22, 0.05 / 0.25]
    )
    assert out["net_ratio_vs_llama_cpp_python"]["ours_abi"]["values"] == pytest.approx(
        [(0.06 - 0.02) / (0.22 - 0.02), (0.05 - 0.03) / (0.25 - 0.03)]
    )
    assert out["peer"] and out["peer_unavailable"] is None
    text = _import_report(out)
    assert (
        "| ours, ABI mode, declarations pre-parsed (`_ffi_abi.py`) | 0.055 (0.050..0.060, n=2) |"
        in text
    )
    assert "ABI mode **0.236 (0.200..0.273, n=2)**" in text


def test_import_section_without_the_peer_says_so() -> None:
    from bench.importing import START, _summarise

    wall = {START: Series("s", [0.02]), "ours_abi": Series("s", [0.06])}
    out = _summarise(wall, {}, {}, "llama-cpp-python does not import here: no numpy")
    assert out["ratio_vs_llama_cpp_python"] == {} and out["peer"] is None
    text = _import_report(out)
    assert (
        "llama-cpp-python unavailable, not measured:** llama-cpp-python does not import here"
        in text
    )
