"""One generation's request and bookkeeping: the options :meth:`Context.generate` takes
(:class:`GenerateOptions`), checked by :func:`plan` into a :class:`Plan`
against the context's model, session, sidecar and adapters before anything reaches llama.cpp,
and :class:`Run`, which turns accepted tokens into released text, stop sequences, finish reasons
and the result. It never refers to the :class:`Context`."""

from __future__ import annotations

import codecs
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from ..constants import LLAMA_DEFAULT_SEED
from ..errors import LlamaUnsupportedError
from ..outputs import TextPiece, TokenLogprob, check_top
from ..params import check_flag
from .chat_layer import json_schema_to_grammar
from .media import MediaPrompt
from .results import (
    LLAMA_CPP_TAG,
    TAIL_TOKEN,
    Cancellation,
    FinishReason,
    GenerationMetrics,
    GenerationResult,
    PromptReuse,
    StrategyMetrics,
    TokenCallback,
)
from .sampling import Grammar, Sampling

if TYPE_CHECKING:
    from .adapters import ContextAdapters
    from .media import MediaInput
    from .model import Model
    from .session import NativeSession
    from .speculative import Sidecar


class GenerateOptions(TypedDict, total=False):
    """Keyword arguments of :meth:`Context.generate` and :meth:`Context.stream`."""

    max_tokens: int
    stop: str | Sequence[str]
    on_token: TokenCallback | None
    cancel: Cancellation | None
    sampling: Sampling | None
    sampler: Any
    temperature: float | None
    top_k: int | None
    seed: int | None
    grammar: str | Grammar | None
    json_schema: Mapping[str, Any] | bool | None
    reuse_prefix: bool
    logprobs: int | None
    media: Sequence[MediaInput] | None


def stop_sequences(stop: object) -> tuple[str, ...]:
    """``stop=`` as a tuple: one string is one stop sequence (never its characters); a list or
    tuple of strings as given; None: none. Anything else is a TypeError."""
    if stop is None:
        return ()
    if isinstance(stop, str):
        return (stop,)
    if isinstance(stop, Sequence) and not isinstance(stop, (bytes, bytearray)):
        bad = [item for item in stop if not isinstance(item, str)]
        if not bad:
            return tuple(stop)
        raise TypeError(f"stop= takes strings; got {type(bad[0]).__name__} {bad[0]!r} in it")
    raise TypeError(f"stop= takes a string or a sequence of strings, not {type(stop).__name__}")


class Run:
    """Bookkeeping of one generation: tokens, text, stop sequences, cancellation, counters.

    Text is decoded incrementally; what is released (to ``on_token`` and the stream) never holds
    a partial character or the start of a stop sequence that may still complete, and it always
    ends up equal to the result's text.
    """

    def __init__(
        self,
        model: Model,
        stop: Sequence[str],
        on_token: TokenCallback | None,
        cancel: Cancellation | None,
        max_tokens: int,
        top_logprobs: int | None = None,
        preserved: frozenset[int] = frozenset(),
    ) -> None:
        self.model = model
        self.preserved = preserved  # special tokens whose text the output keeps
        self.top_logprobs = top_logprobs  # None: no log-probabilities
        self.logprobs: list[TokenLogprob] = []
        self._unreleased: list[TokenLogprob] = []  # of tokens whose text no piece carried yet
        self.stop = [s for s in stop if s]
        self.on_token = on_token
        self.cancel = cancel
        self.max_tokens = max_tokens
        self.tokens: list[int] = []
        self.finish_reason: FinishReason | None = None if max_tokens > 0 else FinishReason.LENGTH
        self.drafted = 0
        self.drafts = 0
        self.backend_sampled = 0
        self.accepted = 0
        self.steps = 0
        self.strategies: tuple[StrategyMetrics, ...] = ()
        self.reused = 0  # prompt tokens the context already held
        self.reuse = PromptReuse.OFF
        self.started = time.perf_counter()
        self.prompt_seconds = 0.0
        self.generation_started = self.started
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""  # decoded so far; cut at the stop sequence once one appears
        self.released = 0  # characters of text released
        self._pieces: list[str] = []  # released, not yet taken by the stream

    def prompt_done(self) -> None:
        self.generation_started = time.perf_counter()
        self.prompt_seconds = self.generation_started - self.started

    def remaining(self) -> int:
        return self.max_tokens - len(self.tokens)

    def finish(self, reason: FinishReason) -> None:
        if self.finish_reason is None:
            self.finish_reason = reason

    def cancelled(self) -> bool:
        if self.cancel is not None and self.cancel.cancelled:
            self.finish(FinishReason.CANCELLED)
            return True
        return False

    def emit(self, token: int, logprob: TokenLogprob | None = None) -> bool:
        """Record an accepted token (and its log-probability, when asked for); False when
        generation must end."""
        if self.finish_reason is not None:
            return False
        if self.model.is_end_of_generation(token):
            self.finish(FinishReason.END_OF_GENERATION)
            return False
        self.tokens.append(token)
        if logprob is not None:
            self.logprobs.append(logprob)
            self._unreleased.append(logprob)
        special = token in self.preserved
        self.text += self._decoder.decode(self.model.token_bytes(token, special=special))
        stopped = self._scan()
        if not stopped and len(self.tokens) >= self.max_tokens:
            self.finish(FinishReason.LENGTH)
        if self.finish_reason is not None:
            self.text += self._decoder.decode(b"", final=True) if not stopped else ""
            piece = self._release(len(self.text))
        else:
            piece = self._release(len(self.text) - self._held())
        if self.on_token is not None:
            self.on_token(token, piece)
        return self.finish_reason is None and not self.cancelled()

    def _scan(self) -> bool:
        """Cut the text at the first stop sequence in it (a match starts in the unreleased
        part: what was released could not begin one)."""
        if not self.stop:
            return False
        hits = [i for i in (self.text.find(s, self.released) for s in self.stop) if i >= 0]
        if not hits:
            return False
        self.text = self.text[: min(hits)]
        self.finish(FinishReason.STOP)
        return True

    def _held(self) -> int:
        """Length of the longest end of the text that begins some stop sequence."""
        text = self.text
        longest = 0
        for stop in self.stop:
            for n in range(min(len(stop) - 1, len(text) - self.released), longest, -1):
                if text.endswith(stop[:n]):
                    longest = n
                    break
        return longest

    def _release(self, end: int) -> str:
        piece = self.text[self.released : end]
        if piece:
            self.released = end
            if self.top_logprobs is not None:
                piece = TextPiece(piece, tuple(self._unreleased))
                self._unreleased.clear()
            self._pieces.append(piece)
        return piece

    def end_text(self) -> None:
        """After the last token: release what was held back (a partial character becomes
        U+FFFD, as in a whole decode) in one more ``on_token`` call."""
        if self.finish_reason is not FinishReason.STOP:
            self.text += self._decoder.decode(b"", final=True)
            self._scan()
        piece = self._release(len(self.text))
        if piece and self.on_token is not None:
            self.on_token(TAIL_TOKEN, piece)

    def take(self) -> list[str]:
        pieces, self._pieces = self._pieces, []
        return pieces

    def result(self, mtp: bool, prompt_tokens: int, seed: int) -> GenerationResult:
        elapsed = time.perf_counter() - self.generation_started
        metrics = GenerationMetrics(
            llama_cpp_tag=LLAMA_CPP_TAG,
            mtp=mtp,
            prompt_tokens=prompt_tokens,
            generated_tokens=len(self.tokens),
            drafted_tokens=self.drafted,
            drafts=self.drafts,
            backend_sampled_drafts=self.backend_sampled,
            accepted_tokens=self.accepted,
            steps=self.steps,
            strategies=self.strategies,
            reused_prompt_tokens=self.reused,
            prompt_reuse=self.reuse,
            prompt_seconds=self.prompt_seconds,
            generation_seconds=elapsed,
        )
        reason = self.finish_reason if self.finish_reason is not None else FinishReason.LENGTH
        return GenerationResult(
            tuple(self.tokens), self.text, reason, metrics,
            None if seed == LLAMA_DEFAULT_SEED else seed,
            tuple(self.logprobs) if self.top_logprobs is not None else None,
        )  # fmt: skip


@dataclass(frozen=True)
class Plan:
    """A checked generation request."""

    tokens: list[int]
    max_tokens: int
    stop: tuple[str, ...]
    on_token: TokenCallback | None
    cancel: Cancellation | None
    sampling: Sampling | None  # None: the caller's sampler
    sampler: Any
    grammar: Grammar | None
    reuse_prefix: bool
    logprobs: int | None  # None: off; else the number of alternatives per token
    media: MediaPrompt | None = None  # the prompt's media, when it has any
    # an aLoRA's boundary (ALORA_NEVER: off) and how to turn the adapters on or off; None: the
    # adapters (if any) apply everywhere
    alora: tuple[int, Callable[[bool], None]] | None = None
    # special tokens whose text the output keeps (a chat format's tool-call markers)
    preserved: frozenset[int] = frozenset()

    @property
    def cells(self) -> int:
        """The KV cells the prompt fills (a media item may fill more than its positions)."""
        return len(self.tokens) + (self.media.extra_cells if self.media is not None else 0)

    @property
    def lora_from(self) -> int:
        """The first position this generation computes with the LoRA adapters (0: all)."""
        return self.alora[0] if self.alora is not None else 0


def sampling_of(options: GenerateOptions, sampler: Any) -> Sampling | None:
    """The Sampling a request asks for (None with a caller's own sampler chain)."""
    shorthands: dict[str, Any] = {
        name: options.get(name)
        for name in ("temperature", "top_k", "seed")
        if options.get(name) is not None
    }
    sampling = options.get("sampling")
    if sampler is not None:
        constrained = options.get("grammar") is not None or options.get("json_schema") is not None
        if sampling is not None or shorthands or constrained:
            raise ValueError(
                "sampler= is a whole llama_sampler chain: not with sampling=, grammar=, "
                "json_schema= or "
                f"{', '.join(shorthands) or 'temperature/top_k/seed'}"
            )
        return None
    if sampling is not None:
        if shorthands:
            raise ValueError(
                f"give {', '.join(shorthands)} in sampling= (a Sampling), not beside it"
            )
        return sampling
    return Sampling(**shorthands)


def plan_request(
    model: Model,
    session: NativeSession,
    sidecar: Sidecar | None,
    adapters: ContextAdapters | None,
    prompt: str | Sequence[int] | MediaPrompt,
    options: GenerateOptions,
) -> Plan:
    """``prompt`` and ``options`` checked for a context's ``model``, ``session`` and ``sidecar``
    before anything reaches llama.cpp (``adapters``: what the context has set, None before it
    set any): the request one generation runs."""
    unknown = sorted(set(options) - set(GenerateOptions.__annotations__))
    if unknown:
        raise TypeError(f"unexpected generation option(s): {', '.join(unknown)}")
    max_tokens = options.get("max_tokens", 128)
    if max_tokens < 0:
        raise ValueError("max_tokens must be >= 0")
    grammar = grammar_of(model, options)
    reuse_prefix = options.get("reuse_prefix", True)
    check_flag(reuse_prefix, "reuse_prefix")
    logprobs = check_top(options.get("logprobs"))
    sampler = options.get("sampler")
    sampling = sampling_of(options, sampler)
    if sampling is not None:
        _check_logit_bias(model, sampling)
    media = options.get("media")
    if media is not None:
        prompt = tokenize_media(model, sidecar, prompt, media, parse_special=False)
    media_prompt, tokens = _prompt_tokens(model, prompt)
    plan = Plan(
        tokens, max_tokens, stop_sequences(options.get("stop")), options.get("on_token"),
        options.get("cancel"), sampling, sampler, grammar, reuse_prefix, logprobs,
        media_prompt, _alora(adapters, tokens),
    )  # fmt: skip
    _check_room(session, plan.cells)
    return plan


def grammar_of(model: Model, options: GenerateOptions) -> Grammar | None:
    """The request's grammar: ``grammar`` (GBNF text, or a :class:`Grammar`), or ``json_schema``
    as llama.cpp's chat layer turns it into one (LlamaSchemaError when it cannot)."""
    grammar, schema = options.get("grammar"), options.get("json_schema")
    if schema is not None:
        if grammar is not None:
            raise ValueError("give grammar= or json_schema=, not both")
        if not isinstance(schema, Mapping | bool):
            raise TypeError(
                f"json_schema= is a JSON schema (a mapping), not {type(schema).__name__}"
            )
        return Grammar(json_schema_to_grammar(model.libs, schema))
    if grammar is None or isinstance(grammar, Grammar):
        return grammar
    if not isinstance(grammar, str):
        raise TypeError(f"grammar= is GBNF text or a Grammar, not {type(grammar).__name__}")
    return Grammar(grammar)


def _prompt_tokens(
    model: Model, prompt: str | Sequence[int] | MediaPrompt
) -> tuple[MediaPrompt | None, list[int]]:
    """The prompt's media (None: text or token ids alone) and its tokens (not none)."""
    media_prompt = None
    if isinstance(prompt, MediaPrompt):
        if prompt.projector.model is not model:
            raise ValueError("the MediaPrompt was tokenized by another model's projector")
        prompt.projector.handle  # noqa: B018  (a closed projector raises)
        media_prompt, tokens = prompt, prompt.tokens
    elif isinstance(prompt, str):
        tokens = model.tokenize(prompt)
    else:
        tokens = [int(t) for t in prompt]
    if not tokens:
        raise ValueError("the prompt has no tokens")
    return media_prompt, tokens


def _check_room(session: NativeSession, cells_needed: int) -> None:
    """A prompt of ``cells_needed`` cells leaves a sequence of the context room to generate."""
    room = session.room
    if cells_needed >= room:
        cells = f"n_ctx {room}" if room == session.n_ctx else f"a sequence's {room} cells"
        raise ValueError(f"the prompt ({cells_needed} cells) does not fit {cells}")


def _alora(
    adapters: ContextAdapters | None, tokens: list[int]
) -> tuple[int, Callable[[bool], None]] | None:
    """A set aLoRA's boundary in a generation after ``tokens`` and the adapters' switch
    (None: no aLoRA is set; see :meth:`Context.set_loras`)."""
    if adapters is None:
        return None
    boundary = adapters.alora_boundary(tokens)
    return None if boundary is None else (boundary, adapters.switch)


def _check_logit_bias(model: Model, sampling: Sampling) -> None:
    n_vocab = model.n_vocab
    outside = sorted(t for t in sampling.logit_bias if t >= n_vocab)
    if outside:
        raise ValueError(
            f"Sampling.logit_bias names tokens outside the vocabulary [0, {n_vocab}): {outside[:8]}"
        )


def tokenize_media(
    model: Model,
    sidecar: Sidecar | None,
    text: object,
    media: Sequence[MediaInput],
    *,
    parse_special: bool,
) -> MediaPrompt:
    """``text`` and its ``media`` tokenized by the model's projector, checked for a context
    with ``sidecar`` (before anything is decoded)."""
    if isinstance(media, (str, bytes, os.PathLike)):
        raise TypeError("media is a sequence of media items (paths or bytes)")
    projector = model.projector
    if projector is None:
        raise LlamaUnsupportedError(
            "this model has no multimodal projector: load one with Model(..., mmproj=path)"
        )
    if not isinstance(text, str):
        raise TypeError(
            f"a prompt with media is text holding the media marker {projector.marker!r}"
        )
    if sidecar is not None:
        sidecar.require_media()
    prompt = projector.tokenize(text, list(media), parse_special=parse_special)
    if prompt.tokens and prompt.tokens[-1] < 0:
        raise ValueError("the prompt must end with text after its last media item")
    return prompt
