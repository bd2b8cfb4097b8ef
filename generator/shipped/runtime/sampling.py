"""How each token is chosen: :class:`Sampling`, checked before anything reaches llama.cpp, and
the :class:`Grammar` that constrains the choice."""

from __future__ import annotations

import math
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..constants import LLAMA_DEFAULT_SEED

if TYPE_CHECKING:
    from .model import Model


def _check(ok: bool, name: str, rule: str, value: object) -> None:
    if not ok:
        raise ValueError(f"Sampling.{name} must be {rule}, got {value!r}")


def _is_real(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)


@dataclass(frozen=True)
class Sampling:
    """How each token is chosen. The default is greedy (``temperature`` 0).

    With ``temperature`` > 0 the chain is top-k (``top_k``, 0: off), typical (``typical_p``, 1:
    off), top-p (``top_p``, 1: off), min-p (``min_p``, 0: off), temperature, then a random draw
    seeded with ``seed`` (``None``: a random seed, reported as ``GenerationResult.seed``).
    ``logit_bias`` (token -> bias added to its logit, ``-math.inf`` bans it) and the penalties
    (``repeat_penalty`` 1, ``frequency_penalty`` and ``presence_penalty`` 0: off; over the last
    ``penalty_last_n`` tokens, -1: the whole context) apply in greedy mode too. Values are checked
    here, before anything reaches llama.cpp: a ValueError names the field.
    """

    temperature: float = 0.0
    top_k: int = 40
    top_p: float = 1.0
    min_p: float = 0.0
    typical_p: float = 1.0
    repeat_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    penalty_last_n: int = 64
    logit_bias: Mapping[int, float] = field(default_factory=dict)
    seed: int | None = None

    def __post_init__(self) -> None:
        real = ("temperature", "top_p", "min_p", "typical_p", "repeat_penalty")
        for name in (*real, "frequency_penalty", "presence_penalty"):
            value = getattr(self, name)
            _check(_is_real(value) and math.isfinite(value), name, "a finite number", value)
        _check(self.temperature >= 0.0, "temperature", ">= 0", self.temperature)
        _check(0.0 < self.top_p <= 1.0, "top_p", "in (0, 1]", self.top_p)
        _check(0.0 <= self.min_p <= 1.0, "min_p", "in [0, 1]", self.min_p)
        _check(0.0 < self.typical_p <= 1.0, "typical_p", "in (0, 1]", self.typical_p)
        _check(self.repeat_penalty > 0.0, "repeat_penalty", "> 0", self.repeat_penalty)
        for name, low in (("top_k", 0), ("penalty_last_n", -1)):
            value = getattr(self, name)
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= low
            _check(ok, name, f"an integer >= {low}", value)
        seed = self.seed
        ok = seed is None or (isinstance(seed, int) and 0 <= seed < LLAMA_DEFAULT_SEED)
        _check(ok, "seed", f"None or an integer in [0, {LLAMA_DEFAULT_SEED})", seed)
        _check(isinstance(self.logit_bias, Mapping), "logit_bias", "a mapping", self.logit_bias)
        for token, bias in self.logit_bias.items():
            ok = isinstance(token, int) and not isinstance(token, bool) and token >= 0
            _check(ok, "logit_bias", "keyed by token ids >= 0", token)
            _check(_is_real(bias) and bias != math.inf, "logit_bias", "a number or -inf", bias)
        object.__setattr__(self, "logit_bias", types.MappingProxyType(dict(self.logit_bias)))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def penalized(self) -> bool:
        return (self.repeat_penalty, self.frequency_penalty, self.presence_penalty) != (
            1.0, 0.0, 0.0,
        )  # fmt: skip


@dataclass(frozen=True)
class Grammar:
    """A GBNF grammar (root rule ``root``) for the sampler chain. ``lazy``: it constrains nothing
    until a trigger appears in the output, one of ``patterns`` (regular expressions over the
    generated text, as llama.cpp matches them) or of ``tokens``. ``prefill``: tokens the grammar
    takes before the first sampled one: the generation prompt a chat template put at the end of
    the prompt, which a grammar from llama.cpp's chat layer starts with (as llama.cpp's sampler
    feeds it, for grammars that are not lazy)."""

    text: str
    lazy: bool = False
    patterns: tuple[str, ...] = ()
    tokens: tuple[int, ...] = ()
    prefill: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.lazy and not (self.patterns or self.tokens):
            raise ValueError("a lazy grammar needs a trigger (a pattern or a token)")


def build_sampler(model: Model, n_ctx: int, sampling: Sampling, grammar: Grammar | None) -> Any:
    """A new ``llama_sampler`` chain for ``sampling`` (and ``grammar``) on ``model``; the caller
    frees it."""
    llama = model.llama
    chain = llama.llama_sampler_chain_init(llama.llama_sampler_chain_default_params())
    try:
        for stage in _stages(model, n_ctx, sampling, grammar):
            llama.llama_sampler_chain_add(chain, stage)
    except BaseException:
        llama.llama_sampler_free(chain)
        raise
    return chain


def _stages(model: Model, n_ctx: int, sampling: Sampling, grammar: Grammar | None) -> Iterator[Any]:
    """The chain's samplers, in order: constraints, then the choice of one token."""
    llama, n_vocab = model.llama, model.n_vocab
    if sampling.logit_bias:
        biases = model.ffi.new("llama_logit_bias[]", len(sampling.logit_bias))
        for i, (token, bias) in enumerate(sampling.logit_bias.items()):
            biases[i].token, biases[i].bias = token, bias
        yield llama.llama_sampler_init_logit_bias(n_vocab, len(biases), biases)
    if sampling.penalized:
        last_n = sampling.penalty_last_n if sampling.penalty_last_n >= 0 else n_ctx
        yield llama.llama_sampler_init_penalties(
            n_vocab, last_n, sampling.repeat_penalty, sampling.frequency_penalty,
            sampling.presence_penalty,
        )  # fmt: skip
    if grammar is not None:
        yield _grammar_stage(model, grammar)
    if sampling.greedy:
        yield llama.llama_sampler_init_greedy()
        return
    if sampling.top_k > 0:
        yield llama.llama_sampler_init_top_k(sampling.top_k)
    if sampling.typical_p < 1.0:
        yield llama.llama_sampler_init_typical(sampling.typical_p, 1)
    if sampling.top_p < 1.0:
        yield llama.llama_sampler_init_top_p(sampling.top_p, 1)
    if sampling.min_p > 0.0:
        yield llama.llama_sampler_init_min_p(sampling.min_p, 1)
    yield llama.llama_sampler_init_temp(sampling.temperature)
    yield llama.llama_sampler_init_dist(
        sampling.seed if sampling.seed is not None else LLAMA_DEFAULT_SEED
    )


def _grammar_stage(model: Model, grammar: Grammar) -> Any:
    """The grammar's sampler, its prefill taken; ValueError when llama.cpp cannot parse it or
    the grammar refuses its prefill (checked token by token before each is taken: llama.cpp
    ends the process when a grammar is made to take a token it refuses)."""
    llama, ffi = model.llama, model.ffi
    text = grammar.text.encode("utf-8")
    if grammar.lazy:
        keep = [ffi.new("char[]", pattern.encode("utf-8")) for pattern in grammar.patterns]
        patterns = ffi.new("const char *[]", keep) if keep else ffi.NULL
        tokens = ffi.new("llama_token[]", list(grammar.tokens)) if grammar.tokens else ffi.NULL
        stage = llama.llama_sampler_init_grammar_lazy_patterns(
            model.vocab, text, b"root", patterns, len(keep), tokens, len(grammar.tokens)
        )
    else:
        stage = llama.llama_sampler_init_grammar(model.vocab, text, b"root")
    if stage == ffi.NULL:
        raise ValueError("llama.cpp could not parse the grammar")
    try:
        for token in grammar.prefill:
            if not _allows(model, stage, token):
                piece = model.token_bytes(token, special=True).decode("utf-8", "replace")
                raise ValueError(
                    f"the grammar refuses the generation prompt's token {token} ({piece!r})"
                )
            llama.llama_sampler_accept(stage, token)
    except BaseException:
        llama.llama_sampler_free(stage)
        raise
    return stage


def _allows(model: Model, stage: Any, token: int) -> bool:
    """Whether the sampler ``stage`` lets ``token`` be chosen next (its logit not -inf)."""
    ffi = model.ffi
    data = ffi.new("llama_token_data[1]")
    data[0].id, data[0].logit, data[0].p = token, 0.0, 0.0
    candidates = ffi.new("llama_token_data_array *")
    candidates.data, candidates.size, candidates.selected, candidates.sorted = data, 1, -1, False
    model.llama.llama_sampler_apply(stage, candidates)
    return bool(math.isfinite(data[0].logit))
