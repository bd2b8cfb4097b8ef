"""Sampling: the chain a Sampling builds, seeds, logit bias, a caller's own chain, with and without
MTP (verification samples with the same chain)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests.mtp.conftest import generate

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

PROMPT = [10, 11, 12]


@pytest.mark.parametrize("mtp", [False, True])
def test_top_k_1_is_greedy(runtime: Any, libs: Any, models: dict[str, Path], mtp: bool) -> None:
    greedy = generate(runtime, libs, models["partial"], mtp=mtp, max_tokens=16)
    sampling = runtime.Sampling(temperature=5.0, top_k=1, seed=3)
    one = generate(runtime, libs, models["partial"], mtp=mtp, max_tokens=16, sampling=sampling)
    assert one.tokens == greedy.tokens
    assert greedy.seed is None and one.seed == 3


@pytest.mark.parametrize("mtp", [False, True])
def test_fixed_seed_repeats_and_random_seeds_differ(
    runtime: Any, libs: Any, models: dict[str, Path], mtp: bool
) -> None:
    hot = runtime.Sampling(temperature=30.0, top_k=0, seed=1234)
    first = generate(runtime, libs, models["agree"], mtp=mtp, max_tokens=16, sampling=hot)
    second = generate(runtime, libs, models["agree"], mtp=mtp, max_tokens=16, sampling=hot)
    greedy = generate(runtime, libs, models["agree"], mtp=mtp, max_tokens=16)
    assert first.tokens == second.tokens and first.seed == second.seed == 1234
    assert first.tokens != greedy.tokens  # the temperature does change the output
    unseeded = runtime.Sampling(temperature=30.0, top_k=0)
    seeds = {
        generate(runtime, libs, models["agree"], mtp=mtp, max_tokens=4, sampling=unseeded).seed
        for _ in range(3)
    }
    assert None not in seeds and len(seeds) == 3


def test_mtp_with_temperature_reports_acceptance(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    sampling = runtime.Sampling(temperature=0.8, top_p=0.9, min_p=0.01, seed=7)
    result = generate(runtime, libs, models["agree"], mtp=True, max_tokens=24, sampling=sampling)
    m = result.metrics
    assert m.mtp and len(result.tokens) == 24
    assert m.drafted_tokens > 0 and 0 < m.accepted_tokens <= m.drafted_tokens
    assert 0.0 < m.acceptance_rate <= 1.0
    again = generate(runtime, libs, models["agree"], mtp=True, max_tokens=24, sampling=sampling)
    assert again.tokens == result.tokens


@pytest.mark.parametrize("mtp", [False, True])
def test_logit_bias_bans_the_greedy_token(
    runtime: Any, libs: Any, models: dict[str, Path], mtp: bool
) -> None:
    """-inf on the greedy first token: the first token is the next best of the raw logits."""
    with runtime.Model(models["agree"], libs=libs) as model:
        with runtime.Context(model, n_ctx=128) as ctx:
            llama, ffi = libs.llama, libs.ffi
            buf = ffi.new("llama_token[]", PROMPT)
            assert llama.llama_decode(ctx.handle, llama.llama_batch_get_one(buf, len(PROMPT))) == 0
            logits = llama.llama_get_logits_ith(ctx.handle, -1)
            ranked = sorted(range(model.n_vocab), key=lambda i: -logits[i])
    banned, next_best = ranked[0], ranked[1]
    sampling = runtime.Sampling(logit_bias={banned: -math.inf})
    result = generate(runtime, libs, models["agree"], mtp=mtp, max_tokens=6, sampling=sampling)
    greedy = generate(runtime, libs, models["agree"], mtp=mtp, max_tokens=6)
    assert greedy.tokens[0] == banned
    assert result.tokens[0] == next_best
    assert banned not in result.tokens


@pytest.mark.parametrize("mtp", [False, True])
def test_presence_penalty_stops_a_repeat(
    runtime: Any, libs: Any, models: dict[str, Path], mtp: bool
) -> None:
    """A large logit bias on one token makes greedy output repeat it; a presence penalty larger
    than the bias leaves it at one, and then the trunk's own next token follows."""
    favourite = 50
    boost = runtime.Sampling(logit_bias={favourite: 1000.0})
    repeated = generate(runtime, libs, models["agree"], mtp=mtp, max_tokens=6, sampling=boost)
    assert repeated.tokens == (favourite,) * 6
    penalized = runtime.Sampling(logit_bias={favourite: 1000.0}, presence_penalty=5000.0)
    once = generate(runtime, libs, models["agree"], mtp=mtp, max_tokens=6, sampling=penalized)
    assert once.tokens[0] == favourite
    assert once.tokens[1:3] == (favourite + 1, favourite + 2)


@pytest.mark.parametrize("mtp", [False, True])
def test_callers_own_sampler_chain(
    runtime: Any, libs: Any, models: dict[str, Path], mtp: bool
) -> None:
    llama = libs.llama
    chain = llama.llama_sampler_chain_init(llama.llama_sampler_chain_default_params())
    llama.llama_sampler_chain_add(chain, llama.llama_sampler_init_top_k(1))
    llama.llama_sampler_chain_add(chain, llama.llama_sampler_init_dist(5))
    try:
        own = generate(runtime, libs, models["partial"], mtp=mtp, max_tokens=12, sampler=chain)
        assert own.seed == 5
        assert llama.llama_sampler_chain_n(chain) == 2  # still the caller's, not freed
    finally:
        llama.llama_sampler_free(chain)
    greedy = generate(runtime, libs, models["partial"], mtp=mtp, max_tokens=12)
    assert own.tokens == greedy.tokens


def test_legacy_keywords_map_onto_sampling(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    legacy = generate(
        runtime, libs, models["agree"], mtp=False, max_tokens=8, temperature=30.0, top_k=0, seed=9
    )
    sampling = runtime.Sampling(temperature=30.0, top_k=0, seed=9)
    new = generate(runtime, libs, models["agree"], mtp=False, max_tokens=8, sampling=sampling)
    assert legacy.tokens == new.tokens and legacy.seed == 9
    with pytest.raises(ValueError, match="temperature"):
        generate(runtime, libs, models["agree"], mtp=False, sampling=sampling, temperature=1.0)
    with pytest.raises(ValueError, match="sampler="):
        generate(runtime, libs, models["agree"], mtp=False, sampler=object(), sampling=sampling)


@pytest.mark.parametrize("mtp", [False, True])
def test_grammar_still_constrains(
    runtime: Any, libs: Any, models: dict[str, Path], mtp: bool
) -> None:
    """The grammar is a stage of the chain, so MTP verification applies it too."""
    with runtime.Model(models["agree"], libs=libs) as model:
        wanted = model.detokenize([40])
    grammar = f'root ::= "{wanted}"+'
    result = generate(runtime, libs, models["agree"], mtp=mtp, max_tokens=5, grammar=grammar)
    free = generate(runtime, libs, models["agree"], mtp=mtp, max_tokens=5)
    if mtp:
        plain = generate(runtime, libs, models["agree"], mtp=False, max_tokens=5, grammar=grammar)
        assert result.tokens == plain.tokens
    assert len(result.tokens) == 5 and result.text  # the grammar's text, whatever the tokens
    assert result.text == (wanted * len(result.text))[: len(result.text)]
    assert free.text != result.text


def test_logit_bias_outside_the_vocabulary(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    with runtime.Model(models["agree"], libs=libs) as model:
        with runtime.Context(model, n_ctx=64) as ctx:
            sampling = runtime.Sampling(logit_bias={model.n_vocab: -1.0})
            with pytest.raises(ValueError, match=r"Sampling\.logit_bias"):
                ctx.generate([1, 2], sampling=sampling)
