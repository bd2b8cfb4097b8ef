"""Speculative decoding's options (:class:`Strategy`, :class:`SpeculativeDecoding`, checked
before anything native runs) and the ``llama_mtp`` wrapper they run on: which functions it must
have, which of its statuses mean "cannot run here", :func:`strategy_support`."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Final, cast

from .. import constants
from .._about import MTP_API
from .._ffi import SYMBOL_ERRORS
from ..constants import MTP_DRAFT_CONTEXT, MTP_STRATEGY_TYPES, SpeculativeMode
from ..errors import LlamaRuntimeError, LlamaUnsupportedError
from ..lifetimes import NativeObject
from .results import LLAMA_CPP_TAG, StrategyMetrics

if TYPE_CHECKING:
    from ..api import LlamaMtpLibrary
    from ..loader import Libraries
    from .model import Model

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


# The default draft length: the wrapper's (llama_mtp.h's LLAMA_MTP_DRAFT_DEFAULT, generated into
# constants). A release without the MTP API has no wrapper constants and runs no speculation, so
# there the value only has to be a valid one.
_DRAFT_DEFAULT: Final[int] = getattr(constants, "LLAMA_MTP_DRAFT_DEFAULT", 1)


def refused_statuses() -> tuple[int, ...]:
    """The llama_mtp statuses that mean "this cannot run here" (LlamaUnsupportedError): no MTP
    head, not loaded, a strategy or mix the library cannot run, a draft model of another
    vocabulary or one that does not fit its strategy or target, an unreadable n-gram cache file,
    a strategy or feature the llama.cpp release lacks."""
    c = constants
    return (
        c.LLAMA_MTP_STATUS_NO_NEXTN_LAYERS,
        c.LLAMA_MTP_STATUS_MTP_NOT_LOADED,
        c.LLAMA_MTP_STATUS_UNSUPPORTED_STRATEGY,
        c.LLAMA_MTP_STATUS_VOCAB_MISMATCH,
        c.LLAMA_MTP_STATUS_DRAFT_MISMATCH,
        c.LLAMA_MTP_STATUS_FILE_UNREADABLE,
        c.LLAMA_MTP_STATUS_NOT_IN_RELEASE,
    )


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


@dataclass(frozen=True)
class SpeculativeDecoding:
    """Speculative decoding options; the default (mode ``none``) decodes one token per step.

    One strategy: ``mode`` (``SpeculativeDecoding("draft-mtp")``). Several: ``strategies``, each a
    :class:`Strategy` or a mode, for example ``strategies=("ngram-mod", "draft-mtp")``: draftless
    n-gram strategies with at most one draft-context strategy; each step asks them in llama.cpp's
    order (n-gram first) and verifies the first draft one of them makes. ``draft_model``: the
    :class:`Model` draft-simple, draft-eagle3, draft-dflash and draft-dspark draft with (same
    vocabulary as the target; an EAGLE-3, DFlash or DSpark draft is one trained for this target,
    which reads its hidden states and may share its embeddings and output head; ``draft_n_ctx``
    0: the target's context size). Checked here, before anything native runs: a ValueError names
    a bad value, :class:`LlamaUnsupportedError` a strategy or mix that cannot run and why. The
    n-gram strategies keep their state (ngram-map-k's map, ngram-mod's pool, ngram-cache's dynamic
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
    mean unlimited; default the wrapper's ``LLAMA_MTP_DRAFT_DEFAULT``), ``draft_token_min``:
    drafts of the draft context shorter than this are dropped, ``p_min``: stop drafting when the
    draft head's top probability falls below it.
    ``backend_sampling``: let llama.cpp sample the drafts on the draft context's device (the GPU
    when its layers are offloaded); llama.cpp falls back to the CPU when it cannot, and
    ``GenerationMetrics.backend_sampled_drafts`` counts the drafts it did sample there. ``None``
    (the default) takes llama.cpp's own default for the release (on where the release has it;
    releases before draft backend sampling have none, and ``True`` there is refused with
    :class:`LlamaUnsupportedError`).
    """

    mode: SpeculativeMode = SpeculativeMode.NONE
    draft_token_max: int = _DRAFT_DEFAULT
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

    def describe(self) -> dict[str, object]:
        """The strategies and limits, as plain data (a saved state names them)."""
        strategies = []
        for strategy in cast(tuple[Strategy, ...], self.strategies):
            values = {k: v for k, v in vars(strategy).items() if v is not None and k != "kind"}
            strategies.append(
                {"kind": strategy.kind.value, **{k: _plain(v) for k, v in sorted(values.items())}}
            )
        draft = self.draft_model.identity if self.draft_model is not None else None
        return {
            "strategies": strategies,
            "draft_token_max": self.draft_token_max,
            "draft_token_min": self.draft_token_min,
            "p_min": self.p_min,
            "draft_model": draft,
        }

    @property
    def kinds(self) -> tuple[SpeculativeMode, ...]:
        return tuple(cast(Strategy, s).kind for s in self.strategies)


def _plain(value: object) -> object:
    """A strategy parameter as JSON data (a path as its text)."""
    return value if isinstance(value, int | float | str) else os.fspath(cast(Any, value))


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
    with_model = [k for k in kinds if k in draft_model_modes()]
    if with_model and draft_model is None:
        raise ValueError(
            f"{with_model[0].value} needs a draft model: SpeculativeDecoding(draft_model=...)"
        )
    if draft_model is not None and not with_model:
        names = ", ".join(k.value for k in draft_model_modes())
        raise ValueError(f"draft_model is set, but no strategy uses it ({names} do)")


def draft_model_modes() -> tuple[SpeculativeMode, ...]:
    """The strategies that draft with a draft model of the caller's (every draft-context one but
    draft-mtp, which drafts with the target's own NextN layers)."""
    return tuple(k for k in MTP_DRAFT_CONTEXT if k is not SpeculativeMode.DRAFT_MTP)


def strategy_support(kind: SpeculativeMode | str, libs: Libraries) -> str | None:
    """None when the libraries run speculative strategy ``kind`` (given a suitable model); else
    the reason they do not: a release without the MTP API or the wrapper, a strategy this
    llama.cpp release does not have, or one the wrapper refuses in every release."""
    mode = SpeculativeMode(kind)
    if mode is SpeculativeMode.NONE:
        raise ValueError("strategy_support: NONE is not a strategy")
    try:
        wrapper = mtp_wrapper(libs, mode.value, strategies=mode is not SpeculativeMode.DRAFT_MTP)
        check = wrapper.llama_mtp_strategy_supported
    except LlamaUnsupportedError as exc:
        return exc.reason
    except SYMBOL_ERRORS:  # a first-release wrapper: draft-mtp alone
        return None if mode is SpeculativeMode.DRAFT_MTP else "the wrapper runs draft-mtp alone"
    if check(MTP_STRATEGY_TYPES[mode]) == constants.LLAMA_MTP_STATUS_OK:
        return None
    return str(libs.ffi.string(wrapper.llama_mtp_last_error()).decode("utf-8", "replace"))


def mtp_wrapper(libs: Libraries, what: str, strategies: bool = False) -> LlamaMtpLibrary:
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
    return cast("LlamaMtpLibrary", library)


@dataclass(frozen=True)
class SidecarCounts:
    """A reading of the sidecar's counters (:meth:`Sidecar.counts`)."""

    drafts: int
    drafted: int
    accepted: int
    steps: int
    backend_sampled: int
    strategies: tuple[StrategyMetrics, ...]

    def since(self, earlier: SidecarCounts) -> SidecarCounts:
        """What was counted after ``earlier`` was read."""
        return self._add(earlier, -1)

    def plus(self, other: SidecarCounts) -> SidecarCounts:
        """Two differences together."""
        return self._add(other, 1)

    def _add(self, other: SidecarCounts, sign: int) -> SidecarCounts:
        return SidecarCounts(
            self.drafts + sign * other.drafts,
            self.drafted + sign * other.drafted,
            self.accepted + sign * other.accepted,
            self.steps + sign * other.steps,
            self.backend_sampled + sign * other.backend_sampled,
            tuple(
                StrategyMetrics(
                    mine.kind,
                    mine.drafts + sign * theirs.drafts,
                    mine.drafted_tokens + sign * theirs.drafted_tokens,
                    mine.accepted_tokens + sign * theirs.accepted_tokens,
                )
                for mine, theirs in zip(self.strategies, other.strategies, strict=True)
            ),
        )


@dataclass(frozen=True)
class ManyStep:
    """One sequence's part of :meth:`Sidecar.step_many`: as :meth:`Sidecar.step` takes it
    (``out``: its token buffer of ``cap`` tokens)."""

    seq: int
    sampler: Any
    id_last: int
    n_past: int
    out: Any
    cap: int


@dataclass(frozen=True)
class StepOutcome:
    """What :meth:`Sidecar.step_many` gives one sequence: its status, its tokens (accepted
    drafts, then the target's own) and what it drafted and accepted."""

    status: int
    tokens: list[int]
    counts: SidecarCounts
    first_row: int  # the row of its first token among the decode's outputs


class Sidecar:
    """The ``llama_mtp`` sidecar of one context: created against the context's handle with the
    options' strategies, freed before it (:class:`NativeObject`); every wrapper call the decode
    loops make goes through here, each status checked."""

    def __init__(
        self,
        wrapper: LlamaMtpLibrary,
        ffi: Any,
        target: NativeObject,
        options: SpeculativeDecoding,
        n_seq: int = 1,
    ) -> None:
        self.wrapper = wrapper
        self.ffi = ffi
        self.options = options
        params = ffi.new("struct llama_mtp_params *")
        params.struct_size = ffi.sizeof("struct llama_mtp_params")
        self.check(wrapper.llama_mtp_default_params(params), "default_params")
        params.n_max = options.draft_token_max
        params.n_min = options.draft_token_min
        params.p_min = options.p_min
        if options.backend_sampling is not None:  # else the release's own default
            params.backend_sampling = 1 if options.backend_sampling else 0
        params.n_seq = n_seq
        keep: list[Any] = []  # cdata the call reads (strategy array, file names)
        if options.kinds != (SpeculativeMode.DRAFT_MTP,):
            strategies = cast(tuple[Strategy, ...], options.strategies)
            array = ffi.new("struct llama_mtp_strategy[]", len(strategies))
            for i, strategy in enumerate(strategies):
                self._fill_strategy(array + i, strategy, keep)
            keep.append(array)
            params.strategies = array
            params.n_strategies = len(strategies)
            if options.draft_model is not None:
                params.draft_model = options.draft_model.handle
            params.draft_n_ctx = options.draft_n_ctx
        out = ffi.new("struct llama_mtp **")
        status = wrapper.llama_mtp_create(target.pointer, params, out)
        if status in refused_statuses():
            raise LlamaUnsupportedError(self.error())
        self.check(status, "create")
        self.native = NativeObject("speculative sidecar", out[0], wrapper.llama_mtp_free, ffi.NULL)
        self.native.depends_on(target)  # freed before the context it drafts for

    def _fill_strategy(self, item: Any, strategy: Strategy, keep: list[Any]) -> None:
        item.struct_size = self.ffi.sizeof("struct llama_mtp_strategy")
        status = self.wrapper.llama_mtp_default_strategy(MTP_STRATEGY_TYPES[strategy.kind], item)
        self.check(status, "default_strategy")
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

    @property
    def handle(self) -> Any:
        """The ``llama_mtp *``; :class:`LlamaClosedError` once freed."""
        return self.native.pointer

    def error(self) -> str:
        return str(self.ffi.string(self.wrapper.llama_mtp_last_error()).decode("utf-8", "replace"))

    def check(self, status: int, what: str) -> None:
        if status != constants.LLAMA_MTP_STATUS_OK:
            raise LlamaRuntimeError(f"llama_mtp_{what} failed ({status}): {self.error()}")

    def draft_context(self) -> Any:
        """The draft or MTP context the sidecar owns (``ffi.NULL`` for n-gram strategies)."""
        try:
            return self.wrapper.llama_mtp_get_context(self.handle)
        except SYMBOL_ERRORS:  # a wrapper without it: its draft context is not checkpointed
            return self.ffi.NULL

    def live_draft_context(self) -> Any:
        """:meth:`draft_context` while the sidecar is alive (``ffi.NULL`` once it is freed)."""
        return self.draft_context() if self.native.alive else self.ffi.NULL

    def seq_rm(self, p0: int, seq: int = 0) -> bool:
        """Remove positions ``p0``.. of sequence ``seq`` from the target and the draft context;
        False when llama.cpp refused (then the wrapper removed nothing from the target)."""
        status = self.wrapper.llama_mtp_seq_rm(self.handle, seq, p0, -1)
        return bool(status == constants.LLAMA_MTP_STATUS_OK)

    def process(self, batch: Any) -> None:
        """Mirror a batch just decoded on the target."""
        status = self.wrapper.llama_mtp_process(self.handle, self.ffi.addressof(batch))
        self.check(status, "process")

    def require_media(self) -> None:
        """Raise :class:`LlamaUnsupportedError` unless the wrapper can mirror media rows
        (``llama_mtp_process_embd``) with this llama.cpp release."""
        supported = self.ffi.new("int32_t *")
        try:
            status = self.wrapper.llama_mtp_embd_supported(supported)
        except SYMBOL_ERRORS:
            raise LlamaUnsupportedError(
                "this llama_mtp wrapper predates media (no llama_mtp_process_embd): generate "
                "with media without speculative decoding, or rebuild the wrapper"
            ) from None
        self.check(status, "embd_supported")
        if not supported[0]:
            raise LlamaUnsupportedError(
                f"llama.cpp {LLAMA_CPP_TAG}'s speculative decoding takes token batches only, so "
                "a prompt with media cannot be speculated on: generate it with "
                "SpeculativeDecoding() (off)"
            )

    def process_rows(self, rows: Any) -> None:
        """Mirror a batch of media rows just decoded on the target (libmtmd's
        ``mtmd_helper_embd_batch``)."""
        status = self.wrapper.llama_mtp_process_embd(
            self.handle, rows.seq_id, rows.embd, rows.n_tokens, rows.n_embd, rows.pos, rows.n_pos
        )
        self.check(status, "process_embd")

    def begin(self, tokens: list[int], seq: int = 0) -> None:
        """Start a generation on sequence ``seq`` after ``tokens`` (what the target holds)."""
        prompt = self.ffi.new("llama_token[]", tokens) if tokens else self.ffi.NULL
        self.check(self.wrapper.llama_mtp_begin(self.handle, seq, prompt, len(tokens)), "begin")

    def step(
        self, seq: int, sampler: Any, id_last: int, n_past: int, out: Any, cap: int, n_out: Any
    ) -> int:
        """One draft/verify step of sequence ``seq`` (its status: the caller decides what a
        failure means)."""
        wrapper = self.wrapper
        return int(
            wrapper.llama_mtp_step(self.handle, seq, sampler, id_last, n_past, out, cap, n_out)
        )

    @cached_property
    def steps_many(self) -> bool:
        """Whether the wrapper verifies many sequences' drafts in one decode
        (``llama_mtp_step_many``). Not with a draft that reads the target's layers (the wrapper
        verifies each sequence alone then), nor with a wrapper from before it."""
        try:
            together = self.wrapper.llama_mtp_step_many_together
        except SYMBOL_ERRORS:
            return False
        return int(together(self.handle)) == 1

    def step_many(self, steps: Sequence[ManyStep]) -> list[StepOutcome]:
        """One step of every sequence of ``steps`` with one verification decode: each one's
        status, tokens and counts (a failed one: its status, nothing else)."""
        ffi = self.ffi
        items = ffi.new("struct llama_mtp_step_item[]", len(steps))
        size = ffi.sizeof("struct llama_mtp_step_item")
        for item, step in zip(items, steps, strict=True):
            item.struct_size, item.seq_id, item.smpl = size, step.seq, step.sampler
            item.id_last, item.n_past = step.id_last, step.n_past
            item.tokens, item.capacity = step.out, step.cap
        self.wrapper.llama_mtp_step_many(self.handle, items, len(steps))
        zero = self._zero_strategies
        outcomes = []
        for item, step in zip(items, steps, strict=True):
            n, drafted = int(item.n_tokens), int(item.n_drafted)
            accepted = n - 1 if drafted and n else 0
            strategies = tuple(
                StrategyMetrics(z.kind, 1, drafted, accepted) if i == int(item.strategy) else z
                for i, z in enumerate(zero)
            )
            counts = SidecarCounts(
                int(drafted > 0), drafted, accepted, int(n > 0), int(item.backend_sampled),
                strategies,
            )  # fmt: skip
            tokens = [int(step.out[i]) for i in range(n)]
            outcomes.append(StepOutcome(int(item.status), tokens, counts, int(item.first_row)))
        return outcomes

    @cached_property
    def _zero_strategies(self) -> tuple[StrategyMetrics, ...]:
        return tuple(StrategyMetrics(m.kind, 0, 0, 0) for m in self.strategy_metrics())

    @property
    def nothing_counted(self) -> SidecarCounts:
        """The counts of a step that did not run."""
        return SidecarCounts(0, 0, 0, 0, 0, self._zero_strategies)

    def counts(self) -> SidecarCounts:
        """The sidecar's counters now (since its creation): the difference of two readings is
        what happened between them, so that sequences and generations are told apart."""
        stats = self.ffi.new("struct llama_mtp_stats *")
        stats.struct_size = self.ffi.sizeof("struct llama_mtp_stats")
        self.check(self.wrapper.llama_mtp_get_stats(self.handle, stats), "get_stats")
        return SidecarCounts(
            int(stats.n_drafts), int(stats.n_drafted), int(stats.n_accepted),
            int(stats.n_steps), int(stats.n_backend_sampled), self.strategy_metrics(),
        )  # fmt: skip

    def strategy_metrics(self) -> tuple[StrategyMetrics, ...]:
        """Each strategy's drafts and tokens of the last generation (none from a first-release
        wrapper)."""
        wrapper = self.wrapper
        try:
            for name in _STRATEGY_FUNCTIONS:
                getattr(wrapper, name)
        except SYMBOL_ERRORS:
            return ()  # a first-release wrapper (draft-mtp alone): no per-strategy counters
        kinds = {value: kind for kind, value in MTP_STRATEGY_TYPES.items()}
        stats = self.ffi.new("struct llama_mtp_strategy_stats *")
        found = []
        for index in range(int(wrapper.llama_mtp_n_strategies(self.handle))):
            stats.struct_size = self.ffi.sizeof("struct llama_mtp_strategy_stats")
            status = wrapper.llama_mtp_get_strategy_stats(self.handle, index, stats)
            self.check(status, "get_strategy_stats")
            found.append(
                StrategyMetrics(
                    kinds[int(stats.type)],
                    int(stats.n_drafts),
                    int(stats.n_drafted),
                    int(stats.n_accepted),
                )
            )
        return tuple(found)
