"""What a generation takes and gives back: chat messages, results and their metrics, how it
finished, its cancellation flag and the :class:`Stream` of its text (the options of
:meth:`Context.generate` are in :mod:`.generation`, with the request they are checked into)."""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

from .._about import LLAMA_CPP_RELEASE
from ..constants import SpeculativeMode
from ..errors import LlamaRuntimeError
from ..outputs import TokenLogprob

LLAMA_CPP_TAG: Final = LLAMA_CPP_RELEASE
# the runtime's logger (llama_bindings.runtime): each generation's metrics, at INFO
LOGGER: Final = logging.getLogger(__name__.rpartition(".")[0])
# on_token's token for the text still held back when a generation ends after its last token
TAIL_TOKEN: Final = -1


@dataclass(frozen=True)
class ChatMessage:
    role: str
    content: str


ChatMessages = Sequence[ChatMessage | Mapping[str, Any]]


class ChatTemplateError(LlamaRuntimeError):
    """No chat template (the model's GGUF has none and none was given), or llama.cpp cannot apply
    the one given."""


def role_content(message: ChatMessage | Mapping[str, Any]) -> tuple[str, str]:
    if isinstance(message, ChatMessage):
        return message.role, message.content
    try:
        return str(message["role"]), str(message["content"])
    except (KeyError, TypeError):
        raise ValueError(
            f"a chat message is a ChatMessage or a mapping with 'role' and 'content', "
            f"got {message!r}"
        ) from None


class PromptReuse(enum.StrEnum):
    """How a generation's prompt met what the context held (``reuse_prefix``)."""

    OFF = "off"  # reuse_prefix=False: the context was cleared
    NONE = "none"  # nothing in common (the first generation, or another conversation)
    KEPT = "kept"  # the common prefix stayed in the context's memory
    CHECKPOINT = "checkpoint"  # restored from a checkpoint inside the common prefix
    FULL = "full"  # a prefix was in common, but the memory could not keep it and no checkpoint
    # covered it: decoded in full


@dataclass(frozen=True)
class GenerationMetrics:
    """What one generation did. ``steps``: target decode steps after the prompt;
    ``reused_prompt_tokens``: prompt tokens the context already held (not decoded again), and
    ``prompt_reuse`` how (:class:`PromptReuse`)."""

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
    reused_prompt_tokens: int = 0
    prompt_reuse: PromptReuse = PromptReuse.OFF

    @property
    def decoded_prompt_tokens(self) -> int:
        """Prompt tokens this generation decoded (those not reused)."""
        return self.prompt_tokens - self.reused_prompt_tokens

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
            "reused_prompt_tokens": self.reused_prompt_tokens,
            "prompt_reuse": self.prompt_reuse.value,
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

    Checked between steps and, through llama.cpp's abort callback, inside prompt decoding; a
    request waiting for a slot leaves the queue at once (:meth:`when_cancelled`).
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def cancel(self) -> None:
        with self._lock:
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def when_cancelled(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once, in the thread that cancels (now, if that was done)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return
        callback()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


TokenCallback = Callable[[int, str], None]


def run_to_end(steps: Generator[str, None, GenerationResult]) -> GenerationResult:
    """Run a generation's steps to their end; its result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return cast(GenerationResult, done.value)


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
