"""The strategies section's prompt text, upstream command and log parsing, summaries and report,
offline (no timing thresholds: a benchmark measures, it does not assert)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import report, strategies
from bench.loops import Runner
from bench.strategies import (
    CONFIGS,
    DRAFT_MODEL_KINDS,
    PLAIN,
    PROMPTS,
    Collected,
    Setup,
    draft_model,
    hash_test_vocab,
    hex_pieces,
    parse_upstream_strategies,
    strategy_options,
    summarise_prompt,
    targets,
    text_for_test_vocab,
    upstream_command,
)
from generator.testdrafts import STRATEGY_OF_KIND


def _tokenize(text: str, n_vocab: int) -> list[int]:
    """llama.cpp's "test" vocabulary: one id per 5-character chunk."""
    return [hash_test_vocab(text[i : i + 5], n_vocab) for i in range(0, len(text), 5)]


@pytest.mark.parametrize("n_vocab", [512, 16384])
def test_prompt_text_tokenizes_back_to_the_prompt_ids(n_vocab: int) -> None:
    for ids in PROMPTS.values():
        text = text_for_test_vocab(ids, n_vocab)
        assert text.isascii() and text.isalpha()
        assert _tokenize(text, n_vocab) == ids


def test_the_repetitive_prompt_repeats_and_the_other_does_not() -> None:
    rep, other = PROMPTS["repetitive"], PROMPTS["non_repetitive"]
    # the trunk predicts t -> t + 1: the continuation after the last id
    nxt = rep[-1] + 1
    assert nxt in rep[: -len(other)] and rep[-len(other) :] == other
    assert other[-1] + 1 not in other


def test_hex_pieces_is_what_a_test_vocabulary_prints() -> None:
    assert hex_pieces([10, 255, 4096]) == format(10, "x") + format(255, "x") + format(4096, "x")


def _setup(tmp_path: Path, upstream: bool = True) -> Setup:
    runner = Runner(tmp_path, tmp_path / "generated", tmp_path / "lib", 1, 1024)
    drafts = {kind: tmp_path / f"{kind}.gguf" for kind in DRAFT_MODEL_KINDS}
    return Setup(
        runner, tmp_path / "bin" if upstream else None, tmp_path / "t.gguf", drafts, 512, 96, 8,
    )  # fmt: skip


def test_both_sides_get_the_same_ngram_parameters(tmp_path: Path) -> None:
    for name, kinds in CONFIGS:
        ours, flags = strategy_options(kinds, 8)
        assert [o["kind"] for o in ours] == list(kinds)
        pairs = dict(zip(flags[::2], flags[1::2], strict=True))
        for o in ours:
            for field, value in o.items():
                if field == "kind":
                    continue
                flag = {
                    "size_n": f"--spec-{o['kind']}-size-n",
                    "size_m": f"--spec-{o['kind']}-size-m",
                    "mod_n_max": "--spec-ngram-mod-n-max",
                    "mod_n_min": "--spec-ngram-mod-n-min",
                }[field]
                assert pairs[flag] == str(value), (name, field)
        if not kinds:
            continue
        cmd = upstream_command(_setup(tmp_path), kinds, "text", 96)
        assert cmd[cmd.index("--spec-type") + 1] == ",".join(kinds)
        assert cmd[cmd.index("--spec-draft-n-max") + 1] == "8"
        drafting = [k for k in kinds if k in DRAFT_MODEL_KINDS]
        assert ("-md" in cmd) == bool(drafting), name
        if drafting:
            assert cmd[cmd.index("-md") + 1] == str(tmp_path / f"{drafting[0]}.gguf")


def test_every_draft_model_strategy_runs_alone_with_its_own_draft(tmp_path: Path) -> None:
    """draft-simple, -eagle3, -dflash and -dspark each have a configuration of their own, and
    both sides are given that strategy's draft model (upstream's -md, our draft_model)."""
    setup = _setup(tmp_path)
    alone = {kinds[0] for _, kinds in CONFIGS if len(kinds) == 1}
    assert set(DRAFT_MODEL_KINDS) <= alone
    for kind in DRAFT_MODEL_KINDS:
        assert draft_model(setup, (kind,)) == tmp_path / f"{kind}.gguf"
        ours, flags = strategy_options((kind,), 8)
        assert ours == [{"kind": kind}] and flags == []  # only the draft max limits them
    assert draft_model(setup, ("ngram-mod", "draft-mtp")) is None
    assert draft_model(setup, ("ngram-simple", "draft-eagle3")) == tmp_path / "draft-eagle3.gguf"
    # draft-simple's plain model, and a test draft for each of the others
    assert set(DRAFT_MODEL_KINDS) == {"draft-simple", *STRATEGY_OF_KIND.values()}


def test_parse_upstream_strategies_reads_each_strategys_statistics() -> None:
    line = (
        "0.00.088.596 I spec common_specu: statistics {kind:>16}: #calls(b,g,a) =    1      6"
        "      6, #gen drafts = {d:6}, #acc drafts = {a:5}, #gen tokens = {g:6}, #acc tokens = "
        "{t:5}, #mean acc len = 8.17, dur(b,g,a) = 0.003, 6.583, 0.003 ms\n"
    )
    log = line.format(kind="ngram-mod", d=4, a=3, g=27, t=20) + line.format(
        kind="draft-mtp", d=2, a=2, g=16, t=16
    )
    got = parse_upstream_strategies(log)
    assert list(got) == ["ngram-mod", "draft-mtp"]
    assert got["ngram-mod"] == {
        "draft_calls": 6, "drafts": 4, "accepted_drafts": 3, "drafted_tokens": 27,
        "accepted_tokens": 20,
    }  # fmt: skip
    assert parse_upstream_strategies("decoded 3 tokens in 1.0 seconds\n") == {}


def test_parse_upstream_strategies_reads_b11549s_line_with_acceptance_per_position() -> None:
    """b11549 adds the acceptance per draft position before the durations (draft-dspark's)."""
    log = (
        "0.01.497.786 I spec common_specu: statistics     draft-dspark: #calls(b,g,a) =    1     "
        "20     20, #gen drafts =     20, #acc drafts =    20, #gen tokens =     80, #acc tokens "
        "=    80, #mean acc len = 5.00, #acc rate/pos = (1.000, 1.000, 1.000, 1.000), "
        "dur(b,g,a) = 0.002, 662.361, 0.013 ms\n"
    )
    assert parse_upstream_strategies(log) == {
        "draft-dspark": {
            "draft_calls": 20, "drafts": 20, "accepted_drafts": 20, "drafted_tokens": 80,
            "accepted_tokens": 80,
        }
    }  # fmt: skip


def _fig(tps: float, drafted: int = 0, accepted: int = 0, **per: tuple[int, int]) -> dict[str, Any]:
    return {
        "tokens_per_second": tps, "drafted_tokens": drafted, "accepted_tokens": accepted,
        "generated_tokens": 97, "peak_rss_mb": 500.0, "same_as_plain": True, "echo_ok": True,
        "steps": 12,
        "per_strategy": {
            k.replace("_", "-"): {"drafted_tokens": d, "accepted_tokens": a}
            for k, (d, a) in per.items()
        },
    }  # fmt: skip


def _collected(upstream_mtp: list[float], ours_mix: list[float]) -> Collected:
    c = Collected()
    for i in range(len(upstream_mtp)):
        c.add(f"ours_{PLAIN}", _fig(100.0))
        c.add("upstream_draft-mtp", _fig(upstream_mtp[i], 10, 9, draft_mtp=(10, 9)))
        c.add("ours_draft-mtp", _fig(upstream_mtp[i] * 1.1, 10, 9, draft_mtp=(10, 9)))
        c.add("upstream_ngram-mod+draft-mtp", _fig(ours_mix[i], 10, 10))
        c.add(
            "ours_ngram-mod+draft-mtp",
            _fig(ours_mix[i] * 0.9, 10, 10, ngram_mod=(8, 8), draft_mtp=(2, 2)),
        )
    c.not_run["upstream_ngram-cache"] = "llama-speculative-simple exited with 134: abort"
    return c


def test_summaries_pair_runs_per_repeat_and_keep_not_run_out_of_the_figures() -> None:
    d = summarise_prompt(_collected([100.0, 120.0], [200.0, 240.0]))
    assert d["ours_over_upstream"]["draft-mtp"]["values"] == pytest.approx([1.1, 1.1])
    assert d["ours_over_upstream"]["ngram-mod+draft-mtp"]["values"] == pytest.approx([0.9, 0.9])
    assert d["speedup_vs_ours_plain"]["upstream_draft-mtp"]["values"] == pytest.approx([1.0, 1.2])
    assert "ngram-cache" not in d["ours_over_upstream"]
    assert "upstream_ngram-cache" not in d["tokens_per_second"]
    assert d["not_run"] == {
        "upstream_ngram-cache": "llama-speculative-simple exited with 134: abort"
    }
    per = d["per_strategy"]["ours_ngram-mod+draft-mtp"]
    assert per["ngram-mod"]["acceptance"]["median"] == 1.0
    assert per["draft-mtp"]["drafted_tokens"]["median"] == 2
    assert d["acceptance"]["ours_draft-mtp"]["median"] == pytest.approx(0.9)
    assert all(d["output_equals_plain"].values()) and d["upstream_prompt_echo_matches"]


def test_without_upstream_nothing_is_compared_or_claimed() -> None:
    c = Collected()
    c.add(f"ours_{PLAIN}", _fig(100.0))
    c.add("ours_draft-mtp", _fig(120.0, 10, 9, draft_mtp=(10, 9)))
    d = summarise_prompt(c)
    assert d["ours_over_upstream"] == {} and d["upstream_prompt_echo_matches"] is None
    t = targets({"repetitive": d, "non_repetitive": d})
    assert t["best_over_upstream_draft_mtp"]["met"] is None
    assert t["ours_over_upstream_each"]["all_met"] is None


def test_targets_take_our_best_configuration_and_say_met_or_not() -> None:
    prompts = {
        "repetitive": summarise_prompt(_collected([100.0, 100.0], [200.0, 240.0])),
        "non_repetitive": summarise_prompt(_collected([100.0], [100.0])),
    }
    t = targets(prompts)
    best = t["best_over_upstream_draft_mtp"]
    assert best["configuration"] == "ours_ngram-mod+draft-mtp"
    assert best["ratio"]["values"] == pytest.approx([1.8, 2.16])
    assert best["met"] is True
    each = t["ours_over_upstream_each"]
    assert each["met"]["repetitive:draft-mtp"] is True
    assert each["met"]["repetitive:ngram-mod+draft-mtp"] is False
    assert each["all_met"] is False
    assert "repetitive:upstream_ngram-cache" in each["not_run"]


def test_report_shows_the_table_the_not_run_reason_and_the_targets() -> None:
    prompts = {
        "repetitive": summarise_prompt(_collected([100.0, 100.0], [200.0, 240.0])),
        "non_repetitive": summarise_prompt(_collected([100.0], [100.0])),
    }
    section = {
        "method": "m", "models": {"target": "t.gguf", "drafts": {"draft-simple": "d.gguf",
        "draft-eagle3": "e.gguf"}}, "draft_max": 8,
        "tokens": 96, "configurations": [[n, list(k)] for n, k in CONFIGS],
        "prompt_order": list(PROMPTS), "prompts": prompts, "targets": targets(prompts),
    }  # fmt: skip
    env = {
        "llama_cpp_tag": "b11312", "llama_cpp_commit": "0c1e57098bba43ac", "cpu_count": 2,
        "load_average": [1.0, 1.0, 1.0], "python": "3.11",
    }  # fmt: skip
    result: dict[str, Any] = {"name": "t", "environment": env, "sections": {"strategies": section}}
    text = report.markdown(json.loads(json.dumps(result)), "t.png")
    assert text.index("### repetitive prompt") < text.index("### non_repetitive prompt")
    assert "not-run: llama-speculative-simple exited with 134: abort" in text
    assert "| draft-mtp | 110.0 (110.0..110.0, n=2) | 100.0 (100.0..100.0, n=2) |" in text
    assert "| 12 / 12 | True / True |" in text
    assert (
        "Models: target `t.gguf`, draft-simple's draft `d.gguf`, draft-eagle3's draft `e.gguf`."
        in text
    )
    # a result from before the layer drafts names draft-simple's draft alone
    section["models"] = {"target": "t.gguf", "draft": "d.gguf"}
    old = report.markdown(json.loads(json.dumps(result)), "t.png")
    assert "Models: target `t.gguf`, draft-simple's draft `d.gguf`." in old
    assert "ngram-mod 8/8 (1.000); draft-mtp 2/2 (1.000)" in text
    assert "**1.98 (1.80..2.16, n=2)** (target >= 1.2): **met**" in text
    assert "below it (median): repetitive:ngram-mod+draft-mtp 0.900" in text
    labels = [p[0] for p in report._panels(result["sections"])]
    assert "repetitive:draft-mtp" in labels[0] and "upstream_draft-mtp" in labels[1]


def test_the_section_is_named_but_not_a_default() -> None:
    from bench import runner

    assert "strategies" in runner.SECTIONS and "strategies" not in runner.DEFAULT_SECTIONS
    args = runner.parse_args(["--sections", "strategies"])
    assert args.sections == ["strategies"] and args.strategies_draft_max == 8
    assert strategies.NGRAM_CACHE_DRAFT == args.strategies_draft_max
