"""A small typed runtime over these bindings: load a model, create a context, generate.

::

    from llama_bindings.runtime import Context, Model, Sampling
    from llama_bindings.runtime import SpeculativeDecoding, SpeculativeMode

    with Model("model.gguf", load_mtp=True) as model:
        spec = SpeculativeDecoding(SpeculativeMode.DRAFT_MTP)
        with Context(model, speculative=spec) as ctx:
            result = ctx.generate("Hello", max_tokens=64, on_token=print)
            print(result.text, result.metrics.acceptance_rate)
            for piece in ctx.stream("Once upon a time", max_tokens=32, stop=["\\n"]):
                print(piece, end="")  # exactly the result's text, stop strings never in part
            hi = [{"role": "user", "content": "Hi"}]
            reply = ctx.chat(hi, sampling=Sampling(temperature=0.7))  # the GGUF's template

Generation is greedy unless :class:`Sampling` (or a caller's own ``llama_sampler`` chain) says
otherwise; MTP verification samples with the same chain. Speculative decoding is off by default
(``SpeculativeDecoding()``, mode ``none``): the context then decodes one token per step with
``llama_decode``. With mode ``draft-mtp`` it drafts with the model's multi-token-prediction (NextN)
head through the ``llama_mtp`` wrapper, one ``llama_mtp_step`` call per verified step; greedy
output is upstream's ``llama-speculative-simple``'s token for token, and plain greedy's where
logits do not depend on the batch (see :class:`SpeculativeDecoding`). Combinations the MTP path
does not support raise :class:`LlamaUnsupportedError` with the reason.

After each generation the metrics (drafted and accepted tokens, acceptance rate, steps, tokens per
second) are logged at INFO level on the ``llama_bindings.runtime`` logger, with the llama.cpp tag
and whether MTP was on; never with file paths. llama.cpp's own log goes to the
``llama_bindings.llama_cpp`` logger, one record per line (so it is quiet unless logging is set up
to show it); ``Model(..., verbose=True)`` or :func:`set_llama_log` writes it to stderr instead, as
llama.cpp does by itself.
"""

from __future__ import annotations

import codecs
import contextlib
import enum
import errno
import logging
import math
import os
import sys
import threading
import time
import types
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol, TypedDict, Unpack, cast

from . import constants
from ._about import LLAMA_CPP_RELEASE, LOAD_MTP_PARAM, MTP_API, NEXTN_COUNT_FUNCTION
from ._ffi import SYMBOL_ERRORS
from .constants import (
    GGML_LOG_LEVEL_CONT,
    GGML_LOG_LEVEL_DEBUG,
    GGML_LOG_LEVEL_ERROR,
    GGML_LOG_LEVEL_INFO,
    GGML_LOG_LEVEL_WARN,
    LLAMA_DEFAULT_SEED,
    MTP_DRAFT_CONTEXT,
    MTP_STRATEGY_TYPES,
)
from .constants import SpeculativeMode as SpeculativeMode
from .errors import LlamaClosedError as LlamaClosedError
from .errors import LlamaLoadError, LlamaRuntimeError, LlamaUnsupportedError
from .lifetimes import NativeObject
from .loader import Libraries, load
from .outputs import TextPiece, TokenLogprob, check_top, normalized, token_logprob
from .params import (
    FLASH_ATTN_CHOICES,
    RopeScaling,
    apply_rope,
    check_count,
    check_flag,
    choose,
    enum_name,
    ggml_type,
    requested_settings,
    set_field,
)

if TYPE_CHECKING:
    from .api import LlamaLibrary

LLAMA_CPP_TAG: Final = LLAMA_CPP_RELEASE
LOGGER: Final = logging.getLogger(__name__)
LLAMA_LOGGER: Final = logging.getLogger("llama_bindings.llama_cpp")
LLAMA_LOGGER.addHandler(logging.NullHandler())  # silent unless the application shows it
# on_token's token for the text still held back when a generation ends after its last token
TAIL_TOKEN: Final = -1
# Wrapper functions the MTP path calls; libraries without any of them cannot run it.
_MTP_FUNCTIONS: Final = (
    "llama_mtp_default_params",
    "llama_mtp_create",
    "llama_mtp_free",
    "llama_mtp_process",
    "llama_mtp_begin",
    "llama_mtp_step",
    "llama_mtp_seq_rm",
    "llama_mtp_get_stats",
    "llama_mtp_reset_stats",
    "llama_mtp_last_error",
)
# ... and the ones a strategy other than draft-mtp alone needs (wrappers since the second release)
_STRATEGY_FUNCTIONS: Final = (
    "llama_mtp_default_strategy",
    "llama_mtp_n_strategies",
    "llama_mtp_get_strategy_stats",
)


def _refused_statuses() -> tuple[int, ...]:
    """The llama_mtp statuses that mean "this cannot run here" (LlamaUnsupportedError): no MTP
    head, not loaded, a strategy or mix the library cannot run, a draft model of another
    vocabulary, an unreadable n-gram cache file."""
    c = constants
    return (
        c.LLAMA_MTP_STATUS_NO_NEXTN_LAYERS,
        c.LLAMA_MTP_STATUS_MTP_NOT_LOADED,
        c.LLAMA_MTP_STATUS_UNSUPPORTED_STRATEGY,
        c.LLAMA_MTP_STATUS_VOCAB_MISMATCH,
        c.LLAMA_MTP_STATUS_FILE_UNREADABLE,
    )


def _fill_batch(
    batch: Any, tokens: Sequence[int], pos0: int, *, outputs: str = "last", seq: int = 0
) -> None:
    """One sequence (``seq``), positions from ``pos0``, outputs (logits or embeddings) for the
    last token only or for ``"all"``. The flat arrays are filled by cffi slice assignment (one
    call each, not one per token)."""
    n = len(tokens)
    batch.token[0:n] = tokens
    batch.pos[0:n] = range(pos0, pos0 + n)
    batch.n_seq_id[0:n] = [1] * n
    batch.logits[0:n] = [1] * n if outputs == "all" else [0] * (n - 1) + [1]
    seq_id = batch.seq_id
    for i in range(n):
        seq_id[i][0] = seq
    batch.n_tokens = n


@dataclass(frozen=True)
class Strategy:
    """One speculative strategy and its parameters; ``None`` keeps llama.cpp's default.

    ``size_n`` / ``size_m`` / ``min_hits``: n-gram key length, m-gram (draft) length and hits
    before an m-gram is proposed (ngram-simple, ngram-map-k, ngram-map-k4v); ``n_match``,
    ``mod_n_min``, ``mod_n_max``: ngram-mod's n-gram length and draft lengths; ``cache_static`` /
    ``cache_dynamic``: ngram-cache's files (written by llama.cpp's llama-lookup-create). Every
    draft is also capped by :attr:`SpeculativeDecoding.draft_token_max`.
    """

    kind: SpeculativeMode
    size_n: int | None = None
    size_m: int | None = None
    min_hits: int | None = None
    n_match: int | None = None
    mod_n_min: int | None = None
    mod_n_max: int | None = None
    cache_static: str | os.PathLike[str] | None = None
    cache_dynamic: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", SpeculativeMode(self.kind))
        if self.kind is SpeculativeMode.NONE:
            raise ValueError("Strategy kind 'none' is not a strategy")
        top = constants.LLAMA_MTP_NGRAM_MAX  # read here: a release without the MTP API lacks it
        for name in ("size_n", "size_m", "min_hits", "n_match", "mod_n_max"):
            value = getattr(self, name)
            if value is not None and not 1 <= value <= top:
                raise ValueError(f"Strategy.{name} must be in [1, {top}], got {value}")
        if (
            self.kind is SpeculativeMode.NGRAM_SIMPLE
            and self.size_n is not None
            and self.size_m is not None
            and self.size_m < self.size_n
        ):
            raise ValueError(
                f"Strategy.size_m {self.size_m} < size_n {self.size_n}: ngram-simple would never "
                "draft (llama.cpp drafts only an m-gram at least as long as the n-gram)"
            )
        if self.mod_n_min is not None:
            top = self.mod_n_max if self.mod_n_max is not None else top
            if not 0 <= self.mod_n_min <= top:
                raise ValueError(f"Strategy.mod_n_min must be in [0, {top}], got {self.mod_n_min}")
        for name in ("cache_static", "cache_dynamic"):
            path = getattr(self, name)
            if path is not None and self.kind is not SpeculativeMode.NGRAM_CACHE:
                raise ValueError(f"Strategy.{name} is for ngram-cache, not {self.kind.value}")
            if path is not None and not os.path.isfile(path):
                raise FileNotFoundError(errno.ENOENT, "no n-gram cache file", os.fspath(path))

    @property
    def draft_context(self) -> bool:
        return self.kind in MTP_DRAFT_CONTEXT


@dataclass(frozen=True)
class SpeculativeDecoding:
    """Speculative decoding options; the default (mode ``none``) decodes one token per step.

    One strategy: ``mode`` (``SpeculativeDecoding("draft-mtp")``). Several: ``strategies``, each a
    :class:`Strategy` or a mode, for example ``strategies=("ngram-mod", "draft-mtp")``: draftless
    n-gram strategies with at most one draft-context strategy; each step asks them in llama.cpp's
    order (n-gram first) and verifies the first draft one of them makes. ``draft_model``: the
    :class:`Model` draft-simple drafts with (same vocabulary as the target; ``draft_n_ctx`` 0: the
    target's context size). Checked here, before anything native runs: a ValueError names a bad
    value, :class:`LlamaUnsupportedError` a strategy or mix that cannot run and why. The n-gram
    strategies keep their state (ngram-map-k's map, ngram-mod's pool, ngram-cache's dynamic
    cache) across the generations of one :class:`Context`, as a llama.cpp server slot does, so a
    second generation may draft differently, and take another number of steps, than the first; a
    new Context starts fresh.

    What is guaranteed of greedy output: it is that of upstream's ``llama-speculative-simple``
    with the same model, strategies and settings, token for token (its schedule: all prompt
    tokens but the last, then each step the last token and the draft in one batch). It equals
    plain greedy decoding where a row's logits do not depend on the batch it is computed in:
    the f32 test models, or a quantised model loaded with ``Model(use_extra_bufts=False)``
    (measured on Gemma 3 270M Q4_K_M). With llama.cpp's repacked CPU weights (the default) the
    logits of a batched row differ in the last bits from a row alone, so verifying drafts in
    batches, or the prompt split, can change later tokens.

    ``draft_token_max``: most tokens per draft, for every strategy (>= 1; llama.cpp's own 0 would
    mean unlimited), ``draft_token_min``: drafts of the draft context shorter than this are
    dropped, ``p_min``: stop drafting when the draft head's top probability falls below it.
    ``backend_sampling``: let llama.cpp sample the drafts on the draft context's device (the GPU
    when its layers are offloaded); llama.cpp falls back to the CPU when it cannot, and
    ``GenerationMetrics.backend_sampled_drafts`` counts the drafts it did sample there. ``None``
    (the default) takes llama.cpp's own default for the release (on where the release has it;
    releases before draft backend sampling have none, and ``True`` there is refused with
    :class:`LlamaUnsupportedError`).
    """

    mode: SpeculativeMode = SpeculativeMode.NONE
    draft_token_max: int = 3
    draft_token_min: int = 0
    p_min: float = 0.0
    backend_sampling: bool | None = None
    strategies: tuple[Strategy | SpeculativeMode | str, ...] = ()
    draft_model: Model | None = None
    draft_n_ctx: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", SpeculativeMode(self.mode))
        given = tuple(
            item if isinstance(item, Strategy) else Strategy(SpeculativeMode(item))
            for item in self.strategies
        )
        if given and self.mode is not SpeculativeMode.NONE:
            raise ValueError("give either mode or strategies, not both")
        if not given and self.mode is not SpeculativeMode.NONE:
            given = (Strategy(self.mode),)
        object.__setattr__(self, "strategies", given)
        _check_mix(given, self.draft_model)
        if self.draft_n_ctx < 0:
            raise ValueError(f"draft_n_ctx must be >= 0, got {self.draft_n_ctx}")
        top = constants.LLAMA_MTP_DRAFT_MAX if self.strategies else self.draft_token_max
        if not 1 <= self.draft_token_max <= top:
            raise ValueError(f"draft_token_max must be in [1, {top}], got {self.draft_token_max}")
        if not 0 <= self.draft_token_min <= self.draft_token_max:
            raise ValueError(
                f"draft_token_min must be in [0, draft_token_max], got {self.draft_token_min}"
            )
        if not 0.0 <= self.p_min <= 1.0:
            raise ValueError(f"p_min must be in [0, 1], got {self.p_min}")

    @property
    def enabled(self) -> bool:
        return bool(self.strategies)

    @property
    def kinds(self) -> tuple[SpeculativeMode, ...]:
        return tuple(cast(Strategy, s).kind for s in self.strategies)


def _check_mix(strategies: tuple[Strategy, ...], draft_model: Model | None) -> None:
    kinds = [s.kind for s in strategies]
    for kind in kinds:
        if kinds.count(kind) > 1:
            raise ValueError(f"strategy {kind.value} is listed twice")
    drafting = [k.value for k in kinds if k in MTP_DRAFT_CONTEXT]
    if len(drafting) > 1:
        raise LlamaUnsupportedError(
            f"{' and '.join(drafting)} both need a draft context; llama.cpp mixes n-gram "
            "strategies with at most one of them"
        )
    if SpeculativeMode.DRAFT_SIMPLE in kinds and draft_model is None:
        raise ValueError("draft-simple needs a draft model: SpeculativeDecoding(draft_model=...)")
    if draft_model is not None and SpeculativeMode.DRAFT_SIMPLE not in kinds:
        raise ValueError("draft_model is set, but no strategy uses it (draft-simple does)")


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


class _LineJoiner:
    """llama.cpp's log pieces joined into lines; a continuation (GGML_LOG_LEVEL_CONT) keeps the
    level of the line it continues."""

    _LEVELS: Final = {
        GGML_LOG_LEVEL_DEBUG: logging.DEBUG,
        GGML_LOG_LEVEL_INFO: logging.INFO,
        GGML_LOG_LEVEL_WARN: logging.WARNING,
        GGML_LOG_LEVEL_ERROR: logging.ERROR,
    }
    _CONT: Final = GGML_LOG_LEVEL_CONT

    def __init__(self) -> None:
        self._line = ""
        self._level = logging.INFO
        self.errors: list[str] = []  # a capture's error lines so far

    def feed(self, level: int, message: str) -> list[tuple[int, str]]:
        """The lines ``message`` completes, with their levels."""
        done: list[tuple[int, str]] = []
        if level != self._CONT:
            if self._line:  # a new message while a line was open: that line ends
                done.append((self._level, self._line))
                self._line = ""
            self._level = self._LEVELS.get(level, logging.INFO)
        *lines, self._line = (self._line + message).split("\n")
        return done + [(self._level, line) for line in lines if line]

    def flush(self) -> list[tuple[int, str]]:
        line, self._line = self._line, ""
        return [(self._level, line)] if line else []


class _LlamaLog:
    """Routes llama.cpp's (and ggml's) log to :data:`LLAMA_LOGGER`, or to stderr when verbose.

    The C callback lives as long as the process (llama.cpp keeps the pointer), one per ffi, and
    never raises: C calls it, from any thread. While :meth:`capturing` runs, the error lines are
    also kept for the caller, whatever the routing (a failed load says why in its exception).
    """

    def __init__(self) -> None:
        self.verbose = False
        self._lock = threading.Lock()
        self._joiner = _LineJoiner()
        self._captures: list[_LineJoiner] = []
        self._callbacks: dict[int, tuple[Any, Any]] = {}  # id(ffi) -> (ffi, its callback)
        self._libraries: dict[int, Any] = {}  # id(libllama) -> libllama, held so ids stay unique

    def install(self, libs: Libraries, verbose: bool | None) -> None:
        """Route the log of ``libs``' libllama (each opened library has its own logger)."""
        if verbose is not None:
            self.verbose = verbose
        ffi, llama = libs.ffi, libs.llama
        if id(llama) in self._libraries:
            return
        known = self._callbacks.get(id(ffi))
        if known is not None:
            callback = known[1]
        else:

            def on_log(level: int, text: Any, _data: Any) -> None:
                try:
                    if text != ffi.NULL:
                        self._write(int(level), ffi.string(text).decode("utf-8", "replace"))
                except BaseException:  # nothing may leave a callback that C calls
                    pass

            callback = ffi.callback("void(enum ggml_log_level, const char *, void *)", on_log)
            self._callbacks[id(ffi)] = (ffi, callback)
        self._libraries[id(llama)] = llama
        llama.llama_log_set(callback, ffi.NULL)

    @contextlib.contextmanager
    def capturing(self) -> Iterator[list[str]]:
        """The error lines llama.cpp logs (from any thread) while the block runs."""
        capture = _LineJoiner()
        errors: list[str] = []
        with self._lock:
            self._captures.append(capture)
        try:
            yield errors
        finally:
            with self._lock:
                self._captures.remove(capture)
                errors += capture.errors + [t for lv, t in capture.flush() if lv >= logging.ERROR]

    def _write(self, level: int, message: str) -> None:
        with self._lock:
            for capture in self._captures:
                capture.errors += [
                    t for lv, t in capture.feed(level, message) if lv >= logging.ERROR
                ]
            lines = [] if self.verbose else self._joiner.feed(level, message)
        if self.verbose:
            sys.stderr.write(message)
            sys.stderr.flush()
            return
        for line_level, line in lines:
            LLAMA_LOGGER.log(line_level, "%s", line)


_LLAMA_LOG: Final = _LlamaLog()


def set_llama_log(libs: Libraries, *, verbose: bool) -> None:
    """Where llama.cpp's log goes, process-wide: stderr as llama.cpp writes it (``verbose``) or
    the ``llama_bindings.llama_cpp`` logger (the default once a :class:`Model` was created)."""
    _LLAMA_LOG.install(libs, verbose)


@dataclass(frozen=True)
class ChatMessage:
    role: str
    content: str


ChatMessages = Sequence[ChatMessage | Mapping[str, str]]


class ChatTemplateError(LlamaRuntimeError):
    """No chat template (the model's GGUF has none and none was given), or llama.cpp cannot apply
    the one given."""


@dataclass(frozen=True)
class GenerationMetrics:
    """What one generation did. ``steps``: target decode steps after the prompt."""

    llama_cpp_tag: str
    mtp: bool
    prompt_tokens: int
    generated_tokens: int
    drafted_tokens: int
    accepted_tokens: int
    steps: int
    prompt_seconds: float
    generation_seconds: float
    drafts: int = 0  # drafts that produced at least one token
    backend_sampled_drafts: int = 0  # of those, sampled on the backend (backend_sampling)
    # per strategy, in the order they are asked (empty without speculation, or with a
    # first-release wrapper, which runs draft-mtp alone and has no per-strategy counters)
    strategies: tuple[StrategyMetrics, ...] = ()

    @property
    def acceptance_rate(self) -> float:
        """Accepted / drafted tokens (0.0 when nothing was drafted)."""
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else 0.0

    @property
    def tokens_per_second(self) -> float:
        """Generated tokens per second of generation (prompt processing excluded)."""
        if self.generation_seconds <= 0.0:
            return 0.0
        return self.generated_tokens / self.generation_seconds

    def as_dict(self) -> dict[str, object]:
        return {
            "llama_cpp_tag": self.llama_cpp_tag,
            "mtp": self.mtp,
            "prompt_tokens": self.prompt_tokens,
            "generated_tokens": self.generated_tokens,
            "drafted_tokens": self.drafted_tokens,
            "accepted_tokens": self.accepted_tokens,
            "acceptance_rate": self.acceptance_rate,
            "steps": self.steps,
            "tokens_per_second": self.tokens_per_second,
            "drafts": self.drafts,
            "backend_sampled_drafts": self.backend_sampled_drafts,
            "strategies": [s.as_dict() for s in self.strategies],
        }


@dataclass(frozen=True)
class StrategyMetrics:
    """One strategy's share of a generation: its verified drafts, drafted and accepted tokens."""

    kind: SpeculativeMode
    drafts: int
    drafted_tokens: int
    accepted_tokens: int

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind.value,
            "drafts": self.drafts,
            "drafted_tokens": self.drafted_tokens,
            "accepted_tokens": self.accepted_tokens,
            "acceptance_rate": self.acceptance_rate,
        }


class FinishReason(enum.StrEnum):
    LENGTH = "length"  # max_tokens reached
    END_OF_GENERATION = "eog"  # the model emitted an end-of-generation token
    STOP = "stop"  # a stop sequence appeared
    CANCELLED = "cancelled"  # Cancellation.cancel() was called
    CONTEXT_FULL = "context_full"  # no room left in the context


@dataclass(frozen=True)
class GenerationResult:
    """``tokens``: every generated token, in order (also those of a stop sequence);
    ``text``: their text, cut before the first stop sequence (exactly what was streamed);
    ``seed``: the seed of the random draw (``None`` when greedy or with a caller's sampler);
    ``logprobs``: one :class:`TokenLogprob` per token of ``tokens`` when ``logprobs=`` asked
    for them, else None."""

    tokens: tuple[int, ...]
    text: str
    finish_reason: FinishReason
    metrics: GenerationMetrics
    seed: int | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None


class Cancellation:
    """Thread-safe cancellation flag for :meth:`Context.generate`.

    Checked between steps and, through llama.cpp's abort callback, inside prompt decoding.
    """

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


TokenCallback = Callable[[int, str], None]


class Stream:
    """The text of one generation, piece by piece (:meth:`Context.stream`): iterate it for the
    pieces (joined, they are ``result.text``); ``result`` is set once it is exhausted. Closing
    it (or leaving a ``with`` block, or breaking out and dropping it) ends the generation. The
    context generates only while the stream is read: the metrics' times include the reader's."""

    def __init__(self, steps: Generator[str, None, GenerationResult]) -> None:
        self._steps = steps
        self.result: GenerationResult | None = None

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        try:
            return next(self._steps)
        except StopIteration as done:
            self.result = done.value
            raise StopIteration from None

    def close(self) -> None:
        self._steps.close()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _MtpWrapper(Protocol):
    """The part of the ``llama_mtp`` library (llama_mtp.h) the MTP path uses."""

    def llama_mtp_default_params(self, params: Any, /) -> int: ...
    def llama_mtp_create(self, ctx_tgt: Any, params: Any, out: Any, /) -> int: ...
    def llama_mtp_free(self, mtp: Any, /) -> None: ...
    def llama_mtp_process(self, mtp: Any, batch: Any, /) -> int: ...
    def llama_mtp_begin(self, mtp: Any, seq_id: int, prompt: Any, n_prompt: int, /) -> int: ...
    def llama_mtp_step(
        self, mtp: Any, seq_id: int, smpl: Any, id_last: int, n_past: int,
        tokens: Any, capacity: int, n_tokens: Any, /,
    ) -> int: ...  # fmt: skip
    def llama_mtp_seq_rm(self, mtp: Any, seq_id: int, p0: int, p1: int, /) -> int: ...
    def llama_mtp_get_stats(self, mtp: Any, stats: Any, /) -> int: ...
    def llama_mtp_reset_stats(self, mtp: Any, /) -> int: ...
    def llama_mtp_last_error(self) -> Any: ...
    def llama_mtp_default_strategy(self, type: int, strategy: Any, /) -> int: ...
    def llama_mtp_n_strategies(self, mtp: Any, /) -> int: ...
    def llama_mtp_get_strategy_stats(self, mtp: Any, index: int, stats: Any, /) -> int: ...
    def llama_mtp_strategy_supported(self, type: int, /) -> int: ...


def strategy_support(kind: SpeculativeMode | str, libs: Libraries) -> str | None:
    """None when the libraries run speculative strategy ``kind`` (given a suitable model); else
    the reason they do not: a release without the MTP API or the wrapper, a strategy this
    llama.cpp release does not have, or one the wrapper refuses in every release."""
    mode = SpeculativeMode(kind)
    if mode is SpeculativeMode.NONE:
        raise ValueError("strategy_support: NONE is not a strategy")
    try:
        wrapper = _mtp_wrapper(libs, mode.value, strategies=mode is not SpeculativeMode.DRAFT_MTP)
        check = wrapper.llama_mtp_strategy_supported
    except LlamaUnsupportedError as exc:
        return exc.reason
    except SYMBOL_ERRORS:  # a first-release wrapper: draft-mtp alone
        return None if mode is SpeculativeMode.DRAFT_MTP else "the wrapper runs draft-mtp alone"
    if check(MTP_STRATEGY_TYPES[mode]) == constants.LLAMA_MTP_STATUS_OK:
        return None
    return str(libs.ffi.string(wrapper.llama_mtp_last_error()).decode("utf-8", "replace"))


def _mtp_wrapper(libs: Libraries, what: str, strategies: bool = False) -> _MtpWrapper:
    """The wrapper library, or LlamaUnsupportedError saying why the MTP path cannot run."""
    if not MTP_API:
        raise LlamaUnsupportedError(
            f"llama.cpp {LLAMA_CPP_TAG} has no MTP API (no MTP context type): "
            f"speculative mode {what} needs a release with it (the llama_mtp wrapper is built only "
            "for those)"
        )
    library: Any = libs.llama_mtp
    if library is None:
        raise LlamaUnsupportedError(
            "the libraries have no llama_mtp wrapper (built for llama.cpp "
            f"{LLAMA_CPP_TAG} without it, or the file is missing): "
            f"speculative mode {what} needs it"
        )
    for name in _MTP_FUNCTIONS + (_STRATEGY_FUNCTIONS if strategies else ()):
        try:
            getattr(library, name)
        except SYMBOL_ERRORS:  # cffi's ffi.error from the pre-parsed ffi, else AttributeError
            raise LlamaUnsupportedError(
                f"the llama_mtp wrapper these bindings declare has no {name}: speculative mode "
                f"{what} needs the wrapper of llama-bindgen's native_wrapper (a newer build)"
            ) from None
    return cast(_MtpWrapper, library)


class Model:
    """A model loaded from a GGUF file. ``load_mtp``: also load the MTP (NextN) layers, which
    speculative mode draft-mtp needs. ``n_gpu_layers`` (-1: all), ``main_gpu`` and
    ``split_mode`` (``"none"``, ``"layer"``, ``"row"``, ...): offloading; ``use_extra_bufts``:
    llama.cpp's repacked weight layouts for the CPU (on by default; with them a row's logits
    depend on the batch it is computed in, see :class:`SpeculativeDecoding`). None keeps
    llama.cpp's default (:mod:`~llama_bindings.params`). ``libs``: opened libraries (default:
    :func:`load` with ``lib_dir``). ``verbose``: llama.cpp's log to stderr (True) or to the
    ``llama_bindings.llama_cpp`` logger (False); ``None`` keeps the process-wide setting, which
    starts as False (see :func:`set_llama_log`). A file llama.cpp cannot load raises
    :class:`LlamaLoadError` with the error lines llama.cpp logged, whatever the log's routing.

    Lifetimes: closing a model (``close()``, leaving its ``with`` block, or its collection)
    first closes every :class:`Context` on it and every context that uses it as a draft model;
    after that, every method and property of those objects raises :class:`LlamaClosedError`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        load_mtp: bool = False,
        n_gpu_layers: int | None = None,
        main_gpu: int | None = None,
        split_mode: str | None = None,
        use_extra_bufts: bool | None = None,
        libs: Libraries | None = None,
        lib_dir: str | os.PathLike[str] | None = None,
        verbose: bool | None = None,
    ) -> None:
        if not os.path.isfile(path):
            what = "is not a file" if os.path.exists(path) else "does not exist"
            raise FileNotFoundError(errno.ENOENT, f"the model file {what}", os.fspath(path))
        check_count(n_gpu_layers, "n_gpu_layers", -1)
        check_count(main_gpu, "main_gpu", 0)
        check_flag(use_extra_bufts, "use_extra_bufts")
        if load_mtp and not MTP_API:
            raise LlamaUnsupportedError(
                f"llama.cpp {LLAMA_CPP_TAG} has no MTP API: load_mtp is not available"
            )
        self.libs = libs if libs is not None else load(lib_dir)
        _LLAMA_LOG.install(self.libs, verbose)
        self.ffi: Any = self.libs.ffi
        self.llama: LlamaLibrary = self.libs.llama
        self.load_mtp = load_mtp
        self.llama.llama_backend_init()
        params = self.llama.llama_model_default_params()
        if n_gpu_layers is not None:
            params.n_gpu_layers = n_gpu_layers
        if main_gpu is not None:
            params.main_gpu = main_gpu
        if split_mode is not None:
            params.split_mode = choose(
                self.ffi, "llama_split_mode", "LLAMA_SPLIT_MODE_", "split_mode", split_mode
            )
        if use_extra_bufts is not None:
            set_field(self.ffi, params, "llama_model_params", "use_extra_bufts", use_extra_bufts,
                      "use_extra_bufts")  # fmt: skip
        if load_mtp and LOAD_MTP_PARAM:
            params.load_mtp = True  # (releases before load_mtp always load the NextN layers)
        with _LLAMA_LOG.capturing() as errors:
            handle = self.llama.llama_model_load_from_file(os.fsencode(path), params)
        if handle == self.ffi.NULL:
            raise LlamaLoadError(
                f"llama.cpp could not load the model {os.fspath(path)!r}", "; ".join(errors)
            )
        self._native = NativeObject("model", handle, self.llama.llama_model_free, self.ffi.NULL)
        self._finalizer = self._native.finalize_with(self)
        self._vocab: Any = self.llama.llama_model_get_vocab(handle)

    @property
    def handle(self) -> Any:
        """The ``llama_model *``; :class:`LlamaClosedError` once the model is closed."""
        return self._native.pointer

    @property
    def native(self) -> NativeObject:
        """The model's native object (contexts register on it to be closed first)."""
        return self._native

    @property
    def vocab(self) -> Any:
        """The model's ``llama_vocab *`` (it lives as long as the model)."""
        self._native.pointer  # noqa: B018  (raises once closed)
        return self._vocab

    @property
    def closed(self) -> bool:
        return not self._native.alive

    @property
    def n_nextn_layers(self) -> int:
        """Number of NextN (MTP) layers the model file has (0: no MTP head)."""
        handle = self.handle
        if not MTP_API:
            return 0
        if NEXTN_COUNT_FUNCTION:
            return int(self.llama.llama_model_n_layer_nextn(handle))
        # Releases before llama_model_n_layer_nextn: the GGUF key the loader reads.
        arch = self.metadata_value("general.architecture")
        value = self.metadata_value(f"{arch}.nextn_predict_layers") if arch else None
        return int(value) if value is not None and value.isdigit() else 0

    def metadata_value(self, key: str) -> str | None:
        """The model's GGUF metadata value for ``key`` as llama.cpp renders it, or None."""
        capacity = 256
        for _ in range(2):
            buf = self.ffi.new("char[]", capacity)
            n = int(self.llama.llama_model_meta_val_str(self.handle, key.encode(), buf, capacity))
            if n < 0:
                return None
            if n < capacity:
                return str(self.ffi.string(buf).decode("utf-8", errors="replace"))
            capacity = n + 1
        return None

    @property
    def n_vocab(self) -> int:
        return int(self.llama.llama_vocab_n_tokens(self.vocab))

    def tokenize(
        self, text: str, *, add_special: bool = True, parse_special: bool = False
    ) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 8
        for _ in range(2):
            buf = self.ffi.new("llama_token[]", capacity)
            n = int(
                self.llama.llama_tokenize(
                    self.vocab, data, len(data), buf, capacity, add_special, parse_special
                )
            )
            if n >= 0:
                return [int(buf[i]) for i in range(n)]
            capacity = -n
        raise LlamaRuntimeError("llama_tokenize failed")

    def token_bytes(self, token: int) -> bytes:
        """The bytes of one token (pieces of a multi-byte character are partial UTF-8)."""
        capacity = 32
        for _ in range(2):
            buf = self.ffi.new("char[]", capacity)
            n = int(self.llama.llama_token_to_piece(self.vocab, token, buf, capacity, 0, False))
            if n >= 0:
                return bytes(self.ffi.buffer(buf, n))
            capacity = -n
        raise LlamaRuntimeError(f"llama_token_to_piece failed for token {token}")

    def detokenize(self, tokens: Sequence[int]) -> str:
        self.handle  # noqa: B018  (a closed model raises, with no tokens as well)
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", errors="replace")

    def is_end_of_generation(self, token: int) -> bool:
        return bool(self.llama.llama_vocab_is_eog(self.vocab, token))

    @property
    def chat_template(self) -> str | None:
        """The chat template of the model's GGUF metadata (``tokenizer.chat_template``), if any."""
        text = self.llama.llama_model_chat_template(self.handle, self.ffi.NULL)
        if text == self.ffi.NULL:
            return None
        return str(self.ffi.string(text).decode("utf-8", errors="replace"))

    def apply_chat_template(
        self,
        messages: ChatMessages,
        *,
        template: str | None = None,
        add_generation_prompt: bool = True,
    ) -> str:
        """The prompt text for ``messages`` (``ChatMessage`` or ``{"role", "content"}`` mappings)
        in ``template`` (a template text or a name llama.cpp knows, such as ``"chatml"``;
        default: the model's own), with the assistant's turn opened when ``add_generation_prompt``.
        llama.cpp recognises the template among the ones it supports; it does not run Jinja."""
        self.handle  # noqa: B018  (a closed model raises)
        chosen = template if template is not None else self.chat_template
        if chosen is None:
            raise ChatTemplateError(
                "the model has no chat template (its GGUF metadata has no tokenizer.chat_template)"
                ": pass template=, a template text or a name such as 'chatml'"
            )
        keep: list[Any] = []
        chat = self.ffi.new("struct llama_chat_message[]", max(1, len(messages)))
        for i, message in enumerate(messages):
            role, content = _role_content(message)
            keep += [
                self.ffi.new("char[]", role.encode()),
                self.ffi.new("char[]", content.encode()),
            ]
            chat[i].role, chat[i].content = keep[-2], keep[-1]
        tmpl = chosen.encode("utf-8")
        capacity = 2 * sum(len(c) for c in keep) + 256
        for _ in range(2):
            buf = self.ffi.new("char[]", capacity)
            n = int(
                self.llama.llama_chat_apply_template(
                    tmpl, chat, len(messages), add_generation_prompt, buf, capacity
                )
            )
            if n < 0:
                raise ChatTemplateError(
                    "llama.cpp does not support this chat template (it recognises the templates "
                    "of common model families, or names such as 'chatml')"
                )
            if n <= capacity:
                return bytes(self.ffi.buffer(buf, n)).decode("utf-8", errors="replace")
            capacity = n
        raise LlamaRuntimeError("llama_chat_apply_template failed")

    def close(self) -> None:
        """Close the contexts that use the model, then free it; a second call does nothing."""
        self._native.release()
        self._finalizer.detach()

    def __enter__(self) -> Model:
        self.handle  # noqa: B018  (a closed model raises)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Context:
    """A llama.cpp context on ``model`` for one sequence at a time.

    ``speculative``: :class:`SpeculativeDecoding` (default: none). With draft-mtp the model must
    have NextN layers and be loaded with ``load_mtp=True``, the libraries must include the
    ``llama_mtp`` wrapper, and ``n_seq_max`` must be 1.

    llama.cpp's parameters (None keeps llama.cpp's own default; :attr:`settings` shows the
    values the context has). Four defaults are this runtime's, not llama.cpp's: ``n_ctx`` 2048
    (llama.cpp: 512; 0: the model's training context), ``n_batch`` 512 (llama.cpp: 2048; the
    logical batch), ``n_ubatch`` = ``n_batch`` (the physical batch), ``n_threads`` (generation)
    and ``n_threads_batch`` (prompts and drafts; default: ``n_threads``) the CPU count, at most 4
    (llama.cpp: 4, more threads than cores on a smaller machine). ``flash_attn`` (``"auto"``,
    ``"on"``, ``"off"``), ``type_k``/``type_v`` (KV
    cache element types by ggml name: ``"f16"``, ``"q8_0"``, ``"q4_0"``, ...; a quantised V
    cache needs flash attention), ``swa_full`` (a full-size cache for sliding-window attention
    layers), ``offload_kqv`` (the KV cache and its attention on the GPU), ``op_offload`` (host
    tensor operations offloaded), ``rope`` (:class:`RopeScaling` overrides). A context llama.cpp
    cannot create raises :class:`LlamaLoadError` with llama.cpp's error lines.

    Closing the context (or its model) frees it; every method and property then raises
    :class:`LlamaClosedError`, and an open :class:`Stream` of it raises at its next step.
    """

    def __init__(
        self,
        model: Model,
        *,
        n_ctx: int = 2048,
        n_batch: int = 512,
        n_ubatch: int | None = None,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        n_seq_max: int = 1,
        flash_attn: str | None = None,
        type_k: str | None = None,
        type_v: str | None = None,
        swa_full: bool | None = None,
        offload_kqv: bool | None = None,
        op_offload: bool | None = None,
        rope: RopeScaling | None = None,
        embeddings: bool = False,
        pooling: str | None = None,
        speculative: SpeculativeDecoding | None = None,
    ) -> None:
        self.model = model
        self.speculative = speculative if speculative is not None else SpeculativeDecoding()
        self.ffi: Any = model.ffi
        self.llama: LlamaLibrary = model.llama
        self._mtp_lib: _MtpWrapper | None = None
        self._history: list[int] = []
        self._cancel: Cancellation | None = None
        self._busy = False
        self._embeddings = embeddings
        check_flag(embeddings, "embeddings")
        if pooling is not None and not embeddings:
            raise ValueError("pooling= is for embeddings: pass embeddings=True with it")
        if embeddings and self.speculative.enabled:
            raise LlamaUnsupportedError("an embeddings context does not generate: no speculative=")
        check_count(n_ctx, "n_ctx", 0)
        check_count(n_batch, "n_batch", 1)
        check_count(n_ubatch, "n_ubatch", 1)
        check_count(n_threads, "n_threads", 1)
        check_count(n_threads_batch, "n_threads_batch", 1)
        check_count(n_seq_max, "n_seq_max", 1)
        flags = {"swa_full": swa_full, "offload_kqv": offload_kqv, "op_offload": op_offload}
        for name, flag in flags.items():
            check_flag(flag, name)
        if rope is not None and not isinstance(rope, RopeScaling):
            raise TypeError(f"rope must be a RopeScaling, not {type(rope).__name__}")
        if self.speculative.enabled:
            self._mtp_lib = self._check_mtp_supported(model, n_seq_max)
        params = self.llama.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_seq_max = n_ctx, n_batch, n_seq_max
        params.n_ubatch = n_ubatch if n_ubatch is not None else n_batch
        threads = n_threads if n_threads is not None else max(1, min(4, os.cpu_count() or 1))
        params.n_threads = threads
        params.n_threads_batch = n_threads_batch if n_threads_batch is not None else threads
        self._set_options(params, flash_attn, {"type_k": type_k, "type_v": type_v}, flags)
        if rope is not None:
            apply_rope(self.ffi, params, rope)
        if embeddings:
            params.embeddings = True
        if pooling is not None:
            params.pooling_type = choose(
                self.ffi, "llama_pooling_type", "LLAMA_POOLING_TYPE_", "pooling", pooling
            )
        if MTP_API and self._mtp_lib is not None:
            # rollback snapshots for recurrent layers, and room to verify a whole draft
            params.n_rs_seq = self.speculative.draft_token_max
        self._requested = requested_settings(self.ffi, params)
        self._native = self._create(model, params)
        self._finalizer = self._native.finalize_with(self)
        # C keeps this pointer while it is registered, so it lives as long as the context (peers'
        # failure: a collected callback called from C). It is registered only while a generation
        # with a Cancellation runs: llama.cpp calls it many times per token, which costs time.
        self._abort_callback: Any = self.ffi.callback("bool(void *)", self._should_abort)
        self._mtp_native: NativeObject | None = None
        if self._mtp_lib is not None:
            try:
                self._create_mtp(self._mtp_lib)
            except BaseException:
                self.close()
                raise

    def _set_options(
        self,
        params: Any,
        flash_attn: str | None,
        kv_types: dict[str, str | None],
        flags: dict[str, bool | None],
    ) -> None:
        struct, ffi = "llama_context_params", self.ffi
        if flash_attn is not None:
            if not isinstance(flash_attn, str) or flash_attn not in FLASH_ATTN_CHOICES:
                names = ", ".join(FLASH_ATTN_CHOICES)
                raise ValueError(f"flash_attn must be one of {names}; not {flash_attn!r}")
            value = choose(
                ffi, "llama_flash_attn_type", "LLAMA_FLASH_ATTN_TYPE_", "flash_attn",
                FLASH_ATTN_CHOICES[flash_attn],
            )  # fmt: skip
            set_field(ffi, params, struct, "flash_attn_type", value, "flash_attn")
        for name, kv_type in kv_types.items():
            if kv_type is not None:
                set_field(ffi, params, struct, name, ggml_type(ffi, name, kv_type), name)
        for name, flag in flags.items():
            if flag is not None:
                set_field(ffi, params, struct, name, flag, name)

    def _create(self, model: Model, params: Any) -> NativeObject:
        """The llama.cpp context, registered to close before the model (and the draft model)."""
        draft = self.speculative.draft_model
        with _LLAMA_LOG.capturing() as errors:
            ctx = self.llama.llama_init_from_model(model.handle, params)
        if ctx == self.ffi.NULL:
            raise LlamaLoadError("llama.cpp could not create the context", "; ".join(errors))
        native = NativeObject("context", ctx, self.llama.llama_free, self.ffi.NULL)
        native.depends_on(model.native)
        if draft is not None:
            native.depends_on(draft.native)
        return native

    @property
    def settings(self) -> dict[str, object]:
        """The llama.cpp parameters of this context: the counts as llama.cpp reports them (after
        its own adjustments, such as n_ctx rounded up), the rest as requested, llama.cpp's
        defaults included (``flash_attn_type`` ``auto`` is resolved by llama.cpp at creation:
        its log says how)."""
        handle, llama = self.handle, self.llama
        found: dict[str, object] = {
            "n_ctx": int(llama.llama_n_ctx(handle)),
            "n_batch": int(llama.llama_n_batch(handle)),
            "n_ubatch": int(llama.llama_n_ubatch(handle)),
            "n_seq_max": int(llama.llama_n_seq_max(handle)),
            "n_threads": int(llama.llama_n_threads(handle)),
            "n_threads_batch": int(llama.llama_n_threads_batch(handle)),
        }
        return {**self._requested, **found}

    def _check_mtp_supported(self, model: Model, n_seq_max: int) -> _MtpWrapper:
        kinds = self.speculative.kinds
        what = ", ".join(k.value for k in kinds)
        wrapper = _mtp_wrapper(model.libs, what, kinds != (SpeculativeMode.DRAFT_MTP,))
        if n_seq_max != 1:
            raise LlamaUnsupportedError(
                f"speculative mode {what} supports one sequence, n_seq_max is {n_seq_max}"
            )
        if SpeculativeMode.DRAFT_MTP not in kinds:
            return wrapper
        if model.n_nextn_layers <= 0:
            raise LlamaUnsupportedError(
                "the model has no NextN (MTP) layers: speculative mode draft-mtp needs a model "
                "with an MTP head"
            )
        if not model.load_mtp:
            raise LlamaUnsupportedError(
                "the model was loaded without its MTP layers: load it with Model(..., "
                "load_mtp=True) for speculative mode draft-mtp"
            )
        return wrapper

    def _create_mtp(self, wrapper: _MtpWrapper) -> None:
        params = self.ffi.new("struct llama_mtp_params *")
        params.struct_size = self.ffi.sizeof("struct llama_mtp_params")
        self._mtp_check(wrapper, wrapper.llama_mtp_default_params(params), "default_params")
        params.n_max = self.speculative.draft_token_max
        params.n_min = self.speculative.draft_token_min
        params.p_min = self.speculative.p_min
        if self.speculative.backend_sampling is not None:  # else the release's own default
            params.backend_sampling = 1 if self.speculative.backend_sampling else 0
        params.n_seq = 1
        keep: list[Any] = []  # cdata the call reads (strategy array, file names)
        if self.speculative.kinds != (SpeculativeMode.DRAFT_MTP,):
            strategies = cast(tuple[Strategy, ...], self.speculative.strategies)
            array = self.ffi.new("struct llama_mtp_strategy[]", len(strategies))
            for i, strategy in enumerate(strategies):
                self._fill_strategy(wrapper, array + i, strategy, keep)
            keep.append(array)
            params.strategies = array
            params.n_strategies = len(strategies)
            draft = self.speculative.draft_model
            if draft is not None:
                params.draft_model = draft.handle
            params.draft_n_ctx = self.speculative.draft_n_ctx
        out = self.ffi.new("struct llama_mtp **")
        status = wrapper.llama_mtp_create(self.handle, params, out)
        if status in _refused_statuses():
            raise LlamaUnsupportedError(self._mtp_error(wrapper))
        self._mtp_check(wrapper, status, "create")
        self._mtp_native = NativeObject(
            "speculative sidecar", out[0], wrapper.llama_mtp_free, self.ffi.NULL
        )
        self._mtp_native.depends_on(self._native)  # freed before the context it drafts for

    def _fill_strategy(
        self, wrapper: _MtpWrapper, item: Any, strategy: Strategy, keep: list[Any]
    ) -> None:
        item.struct_size = self.ffi.sizeof("struct llama_mtp_strategy")
        status = wrapper.llama_mtp_default_strategy(MTP_STRATEGY_TYPES[strategy.kind], item)
        self._mtp_check(wrapper, status, "default_strategy")
        for name in ("size_n", "size_m", "min_hits", "n_match", "mod_n_min", "mod_n_max"):
            value = getattr(strategy, name)
            if value is not None:
                setattr(item, name, value)
        for name in ("cache_static", "cache_dynamic"):
            path = getattr(strategy, name)
            if path is not None:
                text = self.ffi.new("char[]", os.fsencode(path))
                keep.append(text)
                setattr(item, name, text)

    def _mtp_error(self, wrapper: _MtpWrapper) -> str:
        return str(self.ffi.string(wrapper.llama_mtp_last_error()).decode("utf-8", "replace"))

    def _mtp_check(self, wrapper: _MtpWrapper, status: int, what: str) -> None:
        if status != constants.LLAMA_MTP_STATUS_OK:
            message = self._mtp_error(wrapper)
            raise LlamaRuntimeError(f"llama_mtp_{what} failed ({status}): {message}")

    def _should_abort(self, _data: Any) -> bool:
        cancel = self._cancel
        return cancel is not None and cancel.cancelled

    @property
    def handle(self) -> Any:
        """The ``llama_context *``; :class:`LlamaClosedError` once the context is closed."""
        return self._native.pointer

    @property
    def _mtp(self) -> Any:
        """The wrapper's ``llama_mtp *`` (MTP contexts only)."""
        if self._mtp_native is None:
            raise LlamaRuntimeError("the context has no speculative sidecar")
        return self._mtp_native.pointer

    @property
    def closed(self) -> bool:
        return not self._native.alive

    @property
    def mtp_enabled(self) -> bool:
        self.handle  # noqa: B018  (a closed context raises)
        return self._mtp_lib is not None

    @property
    def n_ctx(self) -> int:
        return int(self.llama.llama_n_ctx(self.handle))

    def _unsupported_with_mtp(self, what: str) -> None:
        if self.mtp_enabled:
            raise LlamaUnsupportedError(
                f"{what} is not supported with speculative decoding (the draft strategies' "
                "state is not saved or reused with the target's)"
            )

    def save_state(self) -> bytes:
        """The context's state (KV cache, recurrent state, outputs). Not with MTP."""
        self._unsupported_with_mtp("saving the state")
        size = int(self.llama.llama_state_get_size(self.handle))
        buf = self.ffi.new("uint8_t[]", size)
        written = int(self.llama.llama_state_get_data(self.handle, buf, size))
        return bytes(self.ffi.buffer(buf, written))

    def load_state(self, state: bytes, tokens: Sequence[int]) -> None:
        """Restore a state saved with :meth:`save_state` that holds ``tokens``. Not with MTP."""
        self._unsupported_with_mtp("loading a state")
        buf = self.ffi.from_buffer(state)
        if int(self.llama.llama_state_set_data(self.handle, buf, len(state))) != len(state):
            raise LlamaRuntimeError("llama_state_set_data rejected the state")
        self._history = list(tokens)

    @property
    def pooling(self) -> str:
        """How :meth:`embed` pools token vectors: ``none`` (then :meth:`embed_tokens`), ``mean``,
        ``cls``, ``last`` or ``rank`` (a reranker's scores): the ``pooling=`` given, else the
        model's own (llama.cpp's ``llama_pooling_type``)."""
        value = int(self.llama.llama_pooling_type(self.handle))
        return enum_name(self.ffi, "llama_pooling_type", "LLAMA_POOLING_TYPE_", value)

    def embed(self, text: str | Sequence[int], *, normalize: bool = False) -> list[float]:
        """The pooled embedding of ``text`` (text or token ids), Euclidean-normalised when
        ``normalize``. The context must have ``embeddings=True`` and a pooling other than none;
        the input must fit one ``n_ubatch``."""
        tokens = self._embedding_input(text)
        if self.pooling == "none":
            raise LlamaUnsupportedError(
                "this context's pooling is none (one vector per token): use embed_tokens(), or "
                "create the Context with pooling='mean' (or cls, last)"
            )
        self._encode_for_embeddings(tokens)
        vector = self.llama.llama_get_embeddings_seq(self.handle, 0)
        if vector == self.ffi.NULL:
            raise LlamaRuntimeError("llama.cpp returned no pooled embedding")
        if self.pooling == "rank":  # a reranker: its class scores
            size = int(self.llama.llama_model_n_cls_out(self.model.handle))
        else:
            size = self._n_embd()
        values = list(self.ffi.unpack(vector, size))
        return normalized(values) if normalize else values

    def embed_tokens(
        self, text: str | Sequence[int], *, normalize: bool = False
    ) -> list[list[float]]:
        """One embedding per token of ``text`` (pooling none), each Euclidean-normalised when
        ``normalize``."""
        tokens = self._embedding_input(text)
        if self.pooling != "none":
            raise LlamaUnsupportedError(
                f"this context pools token vectors ({self.pooling}): create the Context with "
                "pooling='none' for one vector per token"
            )
        self._encode_for_embeddings(tokens)
        size, found = self._n_embd(), []
        for row in range(len(tokens)):
            vector = self.llama.llama_get_embeddings_ith(self.handle, row)
            if vector == self.ffi.NULL:
                raise LlamaRuntimeError(f"llama.cpp returned no embedding for token {row}")
            values = list(self.ffi.unpack(vector, size))
            found.append(normalized(values) if normalize else values)
        return found

    def _n_embd(self) -> int:
        try:
            return int(self.llama.llama_model_n_embd_out(self.model.handle))
        except SYMBOL_ERRORS:  # releases before llama_model_n_embd_out
            return int(self.llama.llama_model_n_embd(self.model.handle))

    def _embedding_input(self, text: str | Sequence[int]) -> list[int]:
        if not self._embeddings:
            raise LlamaUnsupportedError(
                "this context was created without embeddings: create one with "
                "Context(model, embeddings=True)"
            )
        tokens = self.model.tokenize(text) if isinstance(text, str) else [int(t) for t in text]
        if not tokens:
            raise ValueError("the input has no tokens")
        n_ubatch = int(self.llama.llama_n_ubatch(self.handle))
        if len(tokens) > n_ubatch:
            raise ValueError(
                f"the input ({len(tokens)} tokens) does not fit one batch of n_ubatch {n_ubatch}: "
                "create the Context with a larger n_batch and n_ubatch"
            )
        return tokens

    def _encode_for_embeddings(self, tokens: list[int]) -> None:
        """Every token of ``tokens`` through the model, alone in sequence 0, outputs on."""
        if self._busy:
            raise LlamaRuntimeError("the context is generating already (a stream is open)")
        self.llama.llama_memory_clear(self.llama.llama_get_memory(self.handle), True)
        batch = self.llama.llama_batch_init(len(tokens), 0, 1)
        try:
            _fill_batch(batch, tokens, 0, outputs="all")
            with _LLAMA_LOG.capturing() as errors:
                status = int(self.llama.llama_decode(self.handle, batch))
            if status != 0:
                raise LlamaRuntimeError(
                    f"llama_decode failed ({status}) on the input: {'; '.join(errors)}"
                )
        finally:
            self.llama.llama_batch_free(batch)

    def generate(
        self, prompt: str | Sequence[int], **options: Unpack[GenerateOptions]
    ) -> GenerationResult:
        """Generate up to ``max_tokens`` tokens after ``prompt`` (text or token ids).

        ``on_token(token, piece)`` is called for every accepted token in order; ``piece`` is the
        text that token releases: UTF-8 is decoded across tokens (a character split over tokens
        comes whole, with the token that completes it) and text that could begin a ``stop``
        sequence is held back until it cannot; text still held when the generation ends after its
        last token comes in one more call with token :data:`TAIL_TOKEN`. Joined, the pieces are
        ``result.text``. ``stop``: a stop sequence (text) or a sequence of them; anything else is
        a ``TypeError``. ``sampling``: a :class:`Sampling`
        (default: greedy); ``temperature``, ``top_k`` and ``seed`` are shorthands for its fields
        (not with ``sampling``). ``sampler``: a caller's own ``llama_sampler`` chain instead, used
        as it is (not reset, not freed; it must select a token, e.g. end with greedy or dist).
        ``grammar``: a GBNF grammar (root rule ``root``). ``reuse_prefix``: keep
        the part of the context that equals the start of this prompt instead of clearing it, not
        with MTP. ``cancel``: a :class:`Cancellation`.
        """
        steps = self._steps(self._plan(prompt, options))
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return cast(GenerationResult, done.value)

    def generate_batch(
        self, prompts: Sequence[str | Sequence[int]], **options: Unpack[GenerateOptions]
    ) -> list[GenerationResult]:
        """Generate after each of ``prompts`` (text or token ids) as independent sequences of
        this context, together: after the prompts, each step decodes one batch holding the next
        token of every sequence still going. Options as :meth:`generate`'s, for every sequence
        (each gets its own sampler chain from the same :class:`Sampling`, so the same seed), but
        not ``on_token``, ``sampler`` or ``reuse_prefix``. Needs ``n_seq_max`` >= the number of
        prompts; not with speculative decoding (its wrapper drafts for one sequence)."""
        if isinstance(prompts, str) or not prompts:
            raise TypeError("prompts must be a non-empty sequence of prompts (text or token ids)")
        refused = sorted({"on_token", "sampler", "reuse_prefix"} & set(options))
        if refused:
            raise TypeError(f"generate_batch does not take {', '.join(refused)}")
        n_seq_max = int(self.llama.llama_n_seq_max(self.handle))
        if len(prompts) > n_seq_max:
            raise ValueError(
                f"{len(prompts)} prompts need n_seq_max >= {len(prompts)}: this context has "
                f"{n_seq_max} (Context(..., n_seq_max=N))"
            )
        if self.mtp_enabled and len(prompts) > 1:
            raise LlamaUnsupportedError(
                "speculative decoding supports one sequence: generate_batch with one prompt, "
                "or a Context without speculative="
            )
        plans = [self._plan(prompt, options) for prompt in prompts]
        room = self._n_ctx_seq()
        for i, plan in enumerate(plans):
            if len(plan.tokens) >= room:
                raise ValueError(
                    f"prompt {i} ({len(plan.tokens)} tokens) does not fit a sequence's "
                    f"{room} cells (n_ctx {self.n_ctx} over n_seq_max {n_seq_max})"
                )
        self._busy = True
        try:
            return self._generate_sequences(plans, room)
        finally:
            self._busy = False

    def _n_ctx_seq(self) -> int:
        try:
            return int(self.llama.llama_n_ctx_seq(self.handle))
        except SYMBOL_ERRORS:  # releases before llama_n_ctx_seq
            return self.n_ctx // int(self.llama.llama_n_seq_max(self.handle))

    def _generate_sequences(self, plans: list[_Plan], room: int) -> list[GenerationResult]:
        runs = [_Run(self, p.stop, None, p.cancel, p.max_tokens, p.logprobs) for p in plans]
        samplers: list[Any] = []
        n_batch = int(self.llama.llama_n_batch(self.handle))
        batch = self.llama.llama_batch_init(max(n_batch, len(plans)), 0, 1)
        memory = self.llama.llama_get_memory(self.handle)
        self._native.active_thread = threading.get_ident()
        try:
            for plan in plans:
                samplers.append(self._build_sampler(cast(Sampling, plan.sampling), plan.grammar))
            self.llama.llama_memory_clear(memory, True)
            self._history = []
            going: dict[int, tuple[int, int]] = {}  # sequence -> (next token to decode, its pos)
            for seq, plan in enumerate(plans):
                row = self._decode_prompt(batch, plan.tokens, seq, n_batch, runs[seq])
                if row is not None and self._take(
                    runs[seq], samplers[seq], row, len(plan.tokens), room
                ):
                    going[seq] = (runs[seq].tokens[-1], len(plan.tokens))
            while going:
                self._decode_step(batch, going)
                for row, (seq, (_, pos)) in enumerate(list(going.items())):
                    if self._take(runs[seq], samplers[seq], row, pos + 1, room):
                        going[seq] = (runs[seq].tokens[-1], pos + 1)
                    else:
                        del going[seq]
                        self.llama.llama_memory_seq_rm(memory, seq, -1, -1)
            seeds = [int(self.llama.llama_sampler_get_seed(sampler)) for sampler in samplers]
        finally:
            self._native.active_thread = None
            self.llama.llama_batch_free(batch)
            for sampler in samplers:
                self.llama.llama_sampler_free(sampler)
        for run in runs:
            run.end_text()
        return [
            run.result(False, len(plan.tokens), seed)
            for run, plan, seed in zip(runs, plans, seeds, strict=True)
        ]

    def _decode_prompt(
        self, batch: Any, tokens: list[int], seq: int, n_batch: int, run: _Run
    ) -> int | None:
        """``tokens`` decoded into sequence ``seq``; the batch row holding the last token's
        logits (None: cancelled)."""
        last = 0
        for start in range(0, len(tokens), n_batch):
            if run.cancelled():
                return None
            chunk = tokens[start : start + n_batch]
            _fill_batch(batch, chunk, start, seq=seq)
            status = self._decode(batch)
            if status != 0:
                if run.cancelled():
                    return None
                raise LlamaRuntimeError(f"llama_decode failed ({status}) on prompt {seq}")
            last = len(chunk) - 1
        run.prompt_done()
        return last

    def _decode_step(self, batch: Any, going: dict[int, tuple[int, int]]) -> None:
        """One batch: the next token of every sequence in ``going``, a row each, in order."""
        n = len(going)
        batch.token[0:n] = [token for token, _ in going.values()]
        batch.pos[0:n] = [pos for _, pos in going.values()]
        batch.n_seq_id[0:n] = [1] * n
        batch.logits[0:n] = [1] * n
        seq_id = batch.seq_id
        for row, seq in enumerate(going):
            seq_id[row][0] = seq
        batch.n_tokens = n
        status = self._decode(batch)
        if status != 0:
            raise LlamaRuntimeError(f"llama_decode failed ({status}) on a batch of {n} sequences")

    def _take(self, run: _Run, sampler: Any, row: int, next_pos: int, room: int) -> bool:
        """Sample a sequence's next token from batch row ``row`` and record it; False when the
        sequence ends (``next_pos``: where that token would be decoded, in ``room`` cells)."""
        if run.cancelled():
            return False
        token = int(self.llama.llama_sampler_sample(sampler, self.handle, row))
        run.steps += 1
        if not run.emit(token, self._logprob(run, token, row)):
            return False
        if next_pos + 1 > room:
            run.finish(FinishReason.CONTEXT_FULL)
            return False
        return True

    def stream(self, prompt: str | Sequence[int], **options: Unpack[GenerateOptions]) -> Stream:
        """:meth:`generate` as an iterator of text pieces (the same pieces ``on_token`` gets,
        without the empty ones); the :class:`Stream`'s ``result`` is set at its end. Arguments
        are checked here; the context generates as the stream is read."""
        return Stream(self._steps(self._plan(prompt, options)))

    def chat(self, messages: ChatMessages, **options: Unpack[ChatOptions]) -> GenerationResult:
        """:meth:`generate` the assistant's reply to ``messages`` (see
        :meth:`Model.apply_chat_template`; ``template``: default the model's own)."""
        prompt, rest = self._chat_prompt(messages, options)
        return self.generate(prompt, **rest)

    def stream_chat(self, messages: ChatMessages, **options: Unpack[ChatOptions]) -> Stream:
        """:meth:`chat` as a :class:`Stream`."""
        prompt, rest = self._chat_prompt(messages, options)
        return self.stream(prompt, **rest)

    def _chat_prompt(
        self, messages: ChatMessages, options: ChatOptions
    ) -> tuple[list[int], GenerateOptions]:
        """The tokens of the templated messages (special tokens parsed, as llama.cpp's chat
        tools do), and the other options."""
        text = self.model.apply_chat_template(messages, template=options.get("template"))
        rest = cast(GenerateOptions, {k: v for k, v in options.items() if k != "template"})
        return self.model.tokenize(text, parse_special=True), rest

    def _plan(self, prompt: str | Sequence[int], options: GenerateOptions) -> _Plan:
        """Check everything before anything reaches llama.cpp."""
        unknown = sorted(set(options) - set(GenerateOptions.__annotations__))
        if unknown:
            raise TypeError(f"unexpected generation option(s): {', '.join(unknown)}")
        max_tokens = options.get("max_tokens", 128)
        if max_tokens < 0:
            raise ValueError("max_tokens must be >= 0")
        grammar = options.get("grammar")
        reuse_prefix = options.get("reuse_prefix", False)
        if reuse_prefix:
            self._unsupported_with_mtp("prompt-prefix reuse")
        logprobs = check_top(options.get("logprobs"))
        if logprobs is not None:
            self._unsupported_with_mtp("log-probabilities")
        if self._embeddings:
            raise LlamaUnsupportedError(
                "this context was created with embeddings=True, for embed(): create another "
                "Context on the model to generate"
            )
        sampler = options.get("sampler")
        sampling = _sampling_of(options, sampler)
        if sampling is not None:
            self._check_logit_bias(sampling)
        if isinstance(prompt, str):
            tokens = self.model.tokenize(prompt)
        else:
            tokens = [int(t) for t in prompt]
        if not tokens:
            raise ValueError("the prompt has no tokens")
        if len(tokens) >= self.n_ctx:
            raise ValueError(f"the prompt ({len(tokens)} tokens) does not fit n_ctx {self.n_ctx}")
        if self._busy:
            raise LlamaRuntimeError("the context is generating already (a stream is open)")
        return _Plan(
            tokens, max_tokens, _stop_sequences(options.get("stop")), options.get("on_token"),
            options.get("cancel"), sampling, sampler, grammar, reuse_prefix, logprobs,
        )  # fmt: skip

    def _check_logit_bias(self, sampling: Sampling) -> None:
        n_vocab = self.model.n_vocab
        outside = sorted(t for t in sampling.logit_bias if t >= n_vocab)
        if outside:
            raise ValueError(
                f"Sampling.logit_bias names tokens outside the vocabulary [0, {n_vocab}): "
                f"{outside[:8]}"
            )

    def _steps(self, plan: _Plan) -> Generator[str, None, GenerationResult]:
        """The generation: yields released text after every step, returns the result."""
        if self._busy:  # a stream made earlier may have started since this one was checked
            raise LlamaRuntimeError("the context is generating already (a stream is open)")
        self._busy = True
        sampler = plan.sampler
        cancel = plan.cancel
        try:
            if plan.sampling is not None:
                sampler = self._build_sampler(plan.sampling, plan.grammar)
            self._cancel = cancel
            if cancel is not None:
                self.llama.llama_set_abort_callback(
                    self.handle, self._abort_callback, self.ffi.NULL
                )
            run = _Run(self, plan.stop, plan.on_token, cancel, plan.max_tokens, plan.logprobs)
            if self._mtp_lib is not None:
                steps = self._generate_mtp(self._mtp_lib, plan.tokens, sampler, run)
            else:
                steps = self._generate_plain(plan.tokens, sampler, run, plan.reuse_prefix)
            native = self._native  # marks the thread inside llama.cpp between the yields
            native.active_thread = threading.get_ident()
            for _ in steps:
                native.active_thread = None
                yield from run.take()
                native.active_thread = threading.get_ident()
            run.end_text()
            yield from run.take()
            seed = int(self.llama.llama_sampler_get_seed(sampler))
        finally:
            if cancel is not None and self._native.alive:
                self.llama.llama_set_abort_callback(self.handle, self.ffi.NULL, self.ffi.NULL)
            self._native.active_thread = None
            self._cancel = None
            if plan.sampler is None and sampler is not None:
                self.llama.llama_sampler_free(sampler)
            self._busy = False
        result = run.result(self.mtp_enabled, len(plan.tokens), seed)
        metrics = result.metrics
        LOGGER.info(
            "generation: llama.cpp %s, mtp %s, %d prompt + %d generated tokens, %d drafted, "
            "%d accepted (acceptance %.3f), %d steps, %.1f tokens/s, finish %s",
            metrics.llama_cpp_tag, "on" if metrics.mtp else "off", metrics.prompt_tokens,
            metrics.generated_tokens, metrics.drafted_tokens, metrics.accepted_tokens,
            metrics.acceptance_rate, metrics.steps, metrics.tokens_per_second,
            result.finish_reason.value,
        )  # fmt: skip
        return result

    def _build_sampler(self, sampling: Sampling, grammar: str | None) -> Any:
        chain = self.llama.llama_sampler_chain_init(self.llama.llama_sampler_chain_default_params())
        try:
            for stage in self._stages(sampling, grammar):
                self.llama.llama_sampler_chain_add(chain, stage)
        except BaseException:
            self.llama.llama_sampler_free(chain)
            raise
        return chain

    def _stages(self, sampling: Sampling, grammar: str | None) -> Iterator[Any]:
        """The chain's samplers, in order: constraints, then the choice of one token."""
        llama, n_vocab = self.llama, self.model.n_vocab
        if sampling.logit_bias:
            biases = self.ffi.new("llama_logit_bias[]", len(sampling.logit_bias))
            for i, (token, bias) in enumerate(sampling.logit_bias.items()):
                biases[i].token, biases[i].bias = token, bias
            yield llama.llama_sampler_init_logit_bias(n_vocab, len(biases), biases)
        if sampling.penalized:
            last_n = sampling.penalty_last_n if sampling.penalty_last_n >= 0 else self.n_ctx
            yield llama.llama_sampler_init_penalties(
                n_vocab, last_n, sampling.repeat_penalty, sampling.frequency_penalty,
                sampling.presence_penalty,
            )  # fmt: skip
        if grammar is not None:
            stage = llama.llama_sampler_init_grammar(
                self.model.vocab, grammar.encode("utf-8"), b"root"
            )
            if stage == self.ffi.NULL:
                raise ValueError("llama.cpp could not parse the grammar")
            yield stage
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

    def _logprob(self, run: _Run, token: int, row: int) -> TokenLogprob | None:
        """``token``'s log-probability from the logits of batch row ``row`` (when asked for)."""
        if run.top_logprobs is None:
            return None
        logits = self.llama.llama_get_logits_ith(self.handle, row)
        return token_logprob(self.ffi, logits, self.model.n_vocab, token, run.top_logprobs)

    def _decode(self, batch: Any) -> int:
        return int(self.llama.llama_decode(self.handle, batch))

    def _generate_plain(
        self, tokens: list[int], sampler: Any, run: _Run, reuse_prefix: bool
    ) -> Iterator[None]:
        memory = self.llama.llama_get_memory(self.handle)
        keep = 0
        if reuse_prefix:
            keep = _common_prefix(self._history, tokens)
            keep = min(keep, len(tokens) - 1)  # the last prompt token is decoded for its logits
            if not self.llama.llama_memory_seq_rm(memory, 0, keep, -1):
                keep = 0
        if keep == 0:
            self.llama.llama_memory_clear(memory, True)
        self._history = tokens[:keep]
        n_batch = int(self.llama.llama_n_batch(self.handle))
        for start in range(keep, len(tokens), n_batch):
            chunk = tokens[start : start + n_batch]
            buf = self.ffi.new("llama_token[]", chunk)
            if run.cancelled():
                return
            status = self._decode(self.llama.llama_batch_get_one(buf, len(chunk)))
            if status != 0:
                if run.cancelled():
                    return
                raise LlamaRuntimeError(f"llama_decode failed ({status}) on the prompt")
            self._history.extend(chunk)
        run.prompt_done()
        token_buf = self.ffi.new("llama_token[1]")
        while run.finish_reason is None:
            token = int(self.llama.llama_sampler_sample(sampler, self.handle, -1))
            run.steps += 1
            if not run.emit(token, self._logprob(run, token, -1)):
                return
            yield
            if len(self._history) + 1 > self.n_ctx:
                run.finish(FinishReason.CONTEXT_FULL)
                return
            token_buf[0] = token
            status = self._decode(self.llama.llama_batch_get_one(token_buf, 1))
            if status != 0:
                if run.cancelled():
                    return
                raise LlamaRuntimeError(f"llama_decode failed ({status})")
            self._history.append(token)

    def _generate_mtp(
        self, wrapper: _MtpWrapper, tokens: list[int], sampler: Any, run: _Run
    ) -> Iterator[None]:
        self._mtp_check(wrapper, wrapper.llama_mtp_seq_rm(self._mtp, 0, 0, -1), "seq_rm")
        self._mtp_check(wrapper, wrapper.llama_mtp_reset_stats(self._mtp), "reset_stats")
        self._history = []
        n_batch = int(self.llama.llama_n_batch(self.handle))
        batch = self.llama.llama_batch_init(n_batch, 0, 1)
        try:
            head = tokens[:-1]
            for start in range(0, len(head), n_batch):
                if run.cancelled():
                    return
                chunk = head[start : start + n_batch]
                _fill_batch(batch, chunk, start)
                decoded = self._decode(batch)
                if decoded != 0:
                    if run.cancelled():
                        return
                    raise LlamaRuntimeError(f"llama_decode failed ({decoded}) on the prompt")
                processed = wrapper.llama_mtp_process(self._mtp, self.ffi.addressof(batch))
                self._mtp_check(wrapper, processed, "process")
        finally:
            self.llama.llama_batch_free(batch)
        prompt_buf = self.ffi.new("llama_token[]", head) if head else self.ffi.NULL
        self._mtp_check(
            wrapper, wrapper.llama_mtp_begin(self._mtp, 0, prompt_buf, len(head)), "begin"
        )
        self._history = list(head)
        run.prompt_done()
        capacity = self.speculative.draft_token_max + 1
        out = self.ffi.new("llama_token[]", capacity)
        n_out = self.ffi.new("int32_t *")
        id_last = tokens[-1]
        n_past = len(head)
        while run.finish_reason is None:
            if run.cancelled():
                break
            if n_past + 1 > self.n_ctx:
                run.finish(FinishReason.CONTEXT_FULL)
                break
            cap = min(capacity, max(1, run.remaining()))
            status = wrapper.llama_mtp_step(self._mtp, 0, sampler, id_last, n_past, out, cap, n_out)
            if status != constants.LLAMA_MTP_STATUS_OK:
                if run.cancelled():
                    break
                self._mtp_check(wrapper, status, "step")
            got = [int(out[i]) for i in range(int(n_out[0]))]
            self._history.append(id_last)
            self._history.extend(got[:-1])
            n_past += len(got)
            id_last = got[-1]
            if not all(run.emit(token) for token in got):
                break
            yield
        stats = self.ffi.new("struct llama_mtp_stats *")
        stats.struct_size = self.ffi.sizeof("struct llama_mtp_stats")
        self._mtp_check(wrapper, wrapper.llama_mtp_get_stats(self._mtp, stats), "get_stats")
        run.drafted = int(stats.n_drafted)
        run.drafts = int(stats.n_drafts)
        run.backend_sampled = int(stats.n_backend_sampled)
        run.accepted = int(stats.n_accepted)
        run.steps = int(stats.n_steps)
        run.strategies = self._strategy_metrics(wrapper)

    def _strategy_metrics(self, wrapper: _MtpWrapper) -> tuple[StrategyMetrics, ...]:
        try:
            for name in _STRATEGY_FUNCTIONS:
                getattr(wrapper, name)
        except SYMBOL_ERRORS:
            return ()  # a first-release wrapper (draft-mtp alone): no per-strategy counters
        kinds = {value: kind for kind, value in MTP_STRATEGY_TYPES.items()}
        stats = self.ffi.new("struct llama_mtp_strategy_stats *")
        found = []
        for index in range(int(wrapper.llama_mtp_n_strategies(self._mtp))):
            stats.struct_size = self.ffi.sizeof("struct llama_mtp_strategy_stats")
            status = wrapper.llama_mtp_get_strategy_stats(self._mtp, index, stats)
            self._mtp_check(wrapper, status, "get_strategy_stats")
            found.append(
                StrategyMetrics(
                    kinds[int(stats.type)],
                    int(stats.n_drafts),
                    int(stats.n_drafted),
                    int(stats.n_accepted),
                )
            )
        return tuple(found)

    def close(self) -> None:
        """Free the context (and its speculative sidecar); a second call does nothing."""
        self._native.release()
        self._finalizer.detach()

    def __enter__(self) -> Context:
        self.handle  # noqa: B018  (a closed context raises)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stop_sequences(stop: object) -> tuple[str, ...]:
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


def _role_content(message: ChatMessage | Mapping[str, str]) -> tuple[str, str]:
    if isinstance(message, ChatMessage):
        return message.role, message.content
    try:
        return str(message["role"]), str(message["content"])
    except (KeyError, TypeError):
        raise ValueError(
            f"a chat message is a ChatMessage or a mapping with 'role' and 'content', "
            f"got {message!r}"
        ) from None


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class _Run:
    """Bookkeeping of one generation: tokens, text, stop sequences, cancellation, counters.

    Text is decoded incrementally; what is released (to ``on_token`` and the stream) never holds
    a partial character or the start of a stop sequence that may still complete, and it always
    ends up equal to the result's text.
    """

    def __init__(
        self,
        context: Context,
        stop: Sequence[str],
        on_token: TokenCallback | None,
        cancel: Cancellation | None,
        max_tokens: int,
        top_logprobs: int | None = None,
    ) -> None:
        self.model = context.model
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
        self.text += self._decoder.decode(self.model.token_bytes(token))
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
            prompt_seconds=self.prompt_seconds,
            generation_seconds=elapsed,
        )
        reason = self.finish_reason if self.finish_reason is not None else FinishReason.LENGTH
        return GenerationResult(
            tuple(self.tokens), self.text, reason, metrics,
            None if seed == LLAMA_DEFAULT_SEED else seed,
            tuple(self.logprobs) if self.top_logprobs is not None else None,
        )  # fmt: skip


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
    grammar: str | None
    reuse_prefix: bool
    logprobs: int | None


class ChatOptions(GenerateOptions, total=False):
    """:class:`GenerateOptions` and ``template`` (see :meth:`Model.apply_chat_template`)."""

    template: str | None


@dataclass(frozen=True)
class _Plan:
    """A checked generation request."""

    tokens: list[int]
    max_tokens: int
    stop: tuple[str, ...]
    on_token: TokenCallback | None
    cancel: Cancellation | None
    sampling: Sampling | None  # None: the caller's sampler
    sampler: Any
    grammar: str | None
    reuse_prefix: bool
    logprobs: int | None  # None: off; else the number of alternatives per token


def _sampling_of(options: GenerateOptions, sampler: Any) -> Sampling | None:
    """The Sampling a request asks for (None with a caller's own sampler chain)."""
    shorthands: dict[str, Any] = {
        name: options.get(name)
        for name in ("temperature", "top_k", "seed")
        if options.get(name) is not None
    }
    sampling = options.get("sampling")
    if sampler is not None:
        if sampling is not None or shorthands or options.get("grammar") is not None:
            raise ValueError(
                "sampler= is a whole llama_sampler chain: not with sampling=, grammar= or "
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
