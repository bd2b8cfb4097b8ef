"""Every speculative strategy the wrapper runs, alone and mixed, through the runtime.

The test models' trunk predicts ``t -> t + 1``; the prompt repeats a run of ids, so that the
continuation repeats the prompt and n-gram strategies have something to draft. Expected tokens
are those of plain decoding on the same model, computed in the same test.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

PROMPT = [*range(10, 30), *range(10, 30), *range(10, 30), *range(10, 14)]
MAX_TOKENS = 40
NGRAM = ("ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")


def _generate(runtime: Any, libs: Any, model: Path, spec: Any, *, mtp: bool = True) -> Any:
    with runtime.Model(model, load_mtp=mtp, libs=libs) as loaded:
        with runtime.Context(loaded, n_ctx=256, speculative=spec) as ctx:
            return ctx.generate(PROMPT, max_tokens=MAX_TOKENS)


@pytest.fixture(scope="module")
def plain_tokens(runtime: Any, libs: Any, models: dict[str, Path]) -> tuple[int, ...]:
    result = _generate(runtime, libs, models["partial"], runtime.SpeculativeDecoding(), mtp=False)
    assert len(result.tokens) == MAX_TOKENS
    return tuple(result.tokens)


def _check_counts(result: Any, kinds: list[str]) -> None:
    metrics = result.metrics
    assert [s.kind.value for s in metrics.strategies] == kinds
    assert sum(s.drafted_tokens for s in metrics.strategies) == metrics.drafted_tokens
    assert sum(s.accepted_tokens for s in metrics.strategies) == metrics.accepted_tokens
    for strategy in metrics.strategies:
        assert strategy.drafts > 0 and 0 < strategy.accepted_tokens <= strategy.drafted_tokens


@pytest.mark.parametrize("kind", NGRAM)
def test_ngram_strategy_alone_keeps_greedy_output(
    runtime: Any, libs: Any, models: dict[str, Path], plain_tokens: tuple[int, ...], kind: str
) -> None:
    spec = runtime.SpeculativeDecoding(strategies=(kind,), draft_token_max=8)
    result = _generate(runtime, libs, models["partial"], spec, mtp=False)
    assert tuple(result.tokens) == plain_tokens
    _check_counts(result, [kind])


@pytest.mark.parametrize("draft_kind", ["plain", "draft"])
def test_draft_simple_keeps_greedy_output(
    runtime: Any,
    libs: Any,
    models: dict[str, Path],
    plain_tokens: tuple[int, ...],
    draft_kind: str,
) -> None:
    with runtime.Model(models[draft_kind], libs=libs) as draft:
        spec = runtime.SpeculativeDecoding(strategies=("draft-simple",), draft_model=draft)
        result = _generate(runtime, libs, models["partial"], spec, mtp=False)
    assert tuple(result.tokens) == plain_tokens
    _check_counts(result, ["draft-simple"])
    rate = result.metrics.acceptance_rate
    if draft_kind == "plain":  # the target's own trunk: every draft token is right
        assert rate == 1.0
    else:  # wrong after every disagree_every-th token
        assert 0.0 < rate < 1.0


def test_draft_mtp_alone_reports_itself_per_strategy(
    runtime: Any, libs: Any, models: dict[str, Path], plain_tokens: tuple[int, ...]
) -> None:
    result = _generate(runtime, libs, models["partial"], runtime.SpeculativeDecoding("draft-mtp"))
    assert tuple(result.tokens) == plain_tokens
    _check_counts(result, ["draft-mtp"])


def test_ngram_with_draft_mtp_mix(
    runtime: Any, libs: Any, models: dict[str, Path], plain_tokens: tuple[int, ...]
) -> None:
    strategies = (runtime.Strategy("ngram-simple", size_n=2, size_m=8), "draft-mtp")
    spec = runtime.SpeculativeDecoding(strategies=strategies, draft_token_max=8)
    result = _generate(runtime, libs, models["partial"], spec)
    assert tuple(result.tokens) == plain_tokens
    _check_counts(result, ["ngram-simple", "draft-mtp"])  # llama.cpp's order: n-gram first


def test_mix_with_temperature_reports_acceptance(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    spec = runtime.SpeculativeDecoding(strategies=("ngram-mod", "draft-mtp"), draft_token_max=4)
    with runtime.Model(models["agree"], load_mtp=True, libs=libs) as model:
        with runtime.Context(model, n_ctx=256, speculative=spec) as ctx:
            sampling = runtime.Sampling(temperature=0.8, seed=7)
            first = ctx.generate(PROMPT, max_tokens=24, sampling=sampling)
            again = ctx.generate(PROMPT, max_tokens=24, sampling=sampling)
    assert first.tokens == again.tokens and len(first.tokens) == 24
    assert first.metrics.drafted_tokens > 0 and 0.0 <= first.metrics.acceptance_rate <= 1.0


def test_ngram_cache_with_files(
    runtime: Any, libs: Any, models: dict[str, Path], plain_tokens: tuple[int, ...], tmp_path: Path
) -> None:
    cache = tmp_path / "static.lookup"  # one record as llama.cpp writes them
    cache.write_bytes(struct.pack("<4i", 10, 11, -1, -1) + struct.pack("<iii", 1, 12, 3))
    strategy = runtime.Strategy("ngram-cache", cache_static=cache, cache_dynamic=cache)
    spec = runtime.SpeculativeDecoding(strategies=(strategy,), draft_token_max=8)
    result = _generate(runtime, libs, models["partial"], spec, mtp=False)
    assert tuple(result.tokens) == plain_tokens


def test_malformed_ngram_cache_file_is_refused_by_the_wrapper(
    runtime: Any, libs: Any, models: dict[str, Path], tmp_path: Path
) -> None:
    cache = tmp_path / "bad.lookup"
    cache.write_bytes(b"\x01\x02\x03")  # less than one n-gram: llama.cpp's loader would abort
    spec = runtime.SpeculativeDecoding(
        strategies=(runtime.Strategy("ngram-cache", cache_static=cache),)
    )
    with runtime.Model(models["plain"], libs=libs) as model:
        with pytest.raises(runtime.LlamaUnsupportedError, match="not an n-gram cache file"):
            runtime.Context(model, speculative=spec)


def test_draft_model_with_another_vocabulary_is_refused(
    runtime: Any, libs: Any, models: dict[str, Path], tmp_path: Path
) -> None:
    from generator.testmodel import write_test_model

    other = write_test_model(tmp_path / "other.gguf", "plain", vocab=512)
    with runtime.Model(other, libs=libs) as draft, runtime.Model(models["plain"], libs=libs) as m:
        spec = runtime.SpeculativeDecoding(strategies=("draft-simple",), draft_model=draft)
        with pytest.raises(runtime.LlamaUnsupportedError, match="vocabulary"):
            runtime.Context(m, speculative=spec)


LAYER_DRAFTS = ("eagle3", "dflash", "dspark")


@pytest.mark.parametrize("partial", [False, True], ids=["agreeing", "partial"])
@pytest.mark.parametrize("family", LAYER_DRAFTS)
def test_drafts_reading_the_target_keep_greedy_output(
    runtime: Any,
    libs: Any,
    models: dict[str, Path],
    plain_tokens: tuple[int, ...],
    family: str,
    partial: bool,
) -> None:
    """draft-eagle3, -dflash and -dspark with their test drafts (generator/testdrafts.py): the
    target's output, counted per strategy; the agreeing drafts are always right, the partial
    ones wrong after every disagree_every-th token."""
    kind = f"draft-{family}"
    with runtime.Model(models[family + ("-partial" if partial else "")], libs=libs) as draft:
        spec = runtime.SpeculativeDecoding(strategies=(kind,), draft_model=draft, draft_token_max=4)
        result = _generate(runtime, libs, models["partial"], spec, mtp=False)
    assert tuple(result.tokens) == plain_tokens
    _check_counts(result, [kind])
    rate = result.metrics.acceptance_rate
    assert 0.0 < rate < 1.0 if partial else rate == 1.0


def test_a_layer_draft_mixes_with_an_ngram_strategy(
    runtime: Any, libs: Any, models: dict[str, Path], plain_tokens: tuple[int, ...]
) -> None:
    with runtime.Model(models["eagle3-partial"], libs=libs) as draft:
        spec = runtime.SpeculativeDecoding(
            strategies=("ngram-mod", "draft-eagle3"), draft_model=draft, draft_token_max=8
        )
        result = _generate(runtime, libs, models["partial"], spec, mtp=False)
    assert tuple(result.tokens) == plain_tokens
    _check_counts(result, ["ngram-mod", "draft-eagle3"])


def test_a_draft_for_another_strategy_is_refused_by_the_wrapper(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    """An EAGLE-3 draft given to draft-dflash: the wrapper's typed refusal (llama.cpp would
    abort), at Context creation, with the library's message."""
    with runtime.Model(models["eagle3"], libs=libs) as draft:
        with runtime.Model(models["partial"], libs=libs) as model:
            spec = runtime.SpeculativeDecoding(strategies=("draft-dflash",), draft_model=draft)
            with pytest.raises(runtime.LlamaUnsupportedError, match="'eagle3' model"):
                runtime.Context(model, n_ctx=128, speculative=spec)


def test_generated_strategies_are_the_librarys(runtime: Any, libs: Any) -> None:
    """The bindings' strategy table is generated from llama_mtp.h; the built library answers the
    same names, the same draft-context rule and the same bounds."""
    from llama_bindings import constants, enums

    declared = {m.name: m.value for m in enums.llama_mtp_strategy_type}
    assert {m.name: v for m, v in runtime.MTP_STRATEGY_TYPES.items()} == declared
    ffi, wrapper = libs.ffi, libs.llama_mtp
    for mode, value in runtime.MTP_STRATEGY_TYPES.items():
        assert ffi.string(wrapper.llama_mtp_strategy_name(value)).decode() == mode.value
    assert ffi.NULL == wrapper.llama_mtp_strategy_name(max(declared.values()) + 1)
    assert {m.value for m in runtime.SpeculativeMode} == {"none"} | {
        m.value for m in runtime.MTP_STRATEGY_TYPES
    }
    types = runtime.MTP_STRATEGY_TYPES
    mask = sum(1 << types[m] for m in runtime.MTP_DRAFT_CONTEXT)
    assert mask == constants.LLAMA_MTP_DRAFT_CONTEXT_STRATEGIES
    assert runtime.SpeculativeMode.DRAFT_MTP in runtime.MTP_DRAFT_CONTEXT
    assert not any(m.value.startswith("ngram-") for m in runtime.MTP_DRAFT_CONTEXT)
    assert constants.LLAMA_MTP_NGRAM_MAX > 0 and constants.LLAMA_MTP_DRAFT_MAX > 0
