"""A context's sequences as slots that many requests share (:meth:`Context.slots`).

One thread of its own owns the context and runs a :class:`SequenceScheduler`: a request waits
in a bounded queue until a slot is free, joins at the next step (continuous batching: the others
do not wait for it to finish, nor it for them), and leaves when it ends, freeing its slot. A
request goes to the free slot whose held tokens share the longest prefix with its prompt (ties:
the slot used longest ago), and that prefix is kept (each slot keeps what its last request left).
With speculative decoding each slot drafts on its own and one decode verifies every slot's draft,
so a slot's acceptance is what it would be alone.

Requests are checked (and chats rendered) in the calling thread, so a bad request raises there;
the calling threads read their replies as :class:`Stream` s or :class:`ChatStream` s, and closing
one (a client that left) ends its generation at the next step.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final, Unpack

from ..constants import LLAMA_DEFAULT_SEED
from ..errors import (
    LlamaClosedError,
    LlamaQueueFullError,
    LlamaRuntimeError,
    LlamaSlotBusyError,
)
from .chat_request import ChatOptions, ChatRequest, ChatResult, ChatStream, render
from .generation import GenerateOptions, Plan, Run
from .results import Cancellation, FinishReason, GenerationResult, Stream, run_to_end
from .session import common_prefix
from .state import load_context_state, save_context_state

if TYPE_CHECKING:
    from .decoding import Job
    from .media import MediaPrompt
    from .model import Model
    from .results import ChatMessages
    from .session import NativeSession
    from .speculative import Sidecar

Planner = Callable[["str | Sequence[int] | MediaPrompt", GenerateOptions], Plan]

DEFAULT_MAX_WAITING: Final = 64


class _EitherCancellation(Cancellation):
    """Cancelled when the request's own flag or the caller's :class:`Cancellation` is."""

    def __init__(self, caller: Cancellation | None) -> None:
        super().__init__()
        if caller is not None:
            caller.when_cancelled(self.cancel)


@dataclass(frozen=True)
class _Ended:
    result: GenerationResult | None
    error: BaseException | None


@dataclass
class _Ticket:
    """A request from its submission to its end: the replies go through ``out``; when it was
    submitted, given a slot and had its first token (``time.monotonic``)."""

    plan: Plan
    cancel: _EitherCancellation
    out: queue.SimpleQueue[str | _Ended] = field(default_factory=queue.SimpleQueue)
    submitted: float = field(default_factory=time.monotonic)
    admitted: float | None = None
    first_token: float | None = None


@dataclass(frozen=True)
class RequestTimes:
    """How long a request that ended took, in seconds, from the slots taking it: waiting for a
    slot (``queued``), to its first generated token (``first_token``, its prompt decoded and
    that token sampled; None when it generated none), per generated token after the first
    (``per_output_token``: the rest of its time over the rest of its tokens; None below two
    tokens) and to its end (``total``)."""

    slot: int
    queued: float
    first_token: float | None
    per_output_token: float | None
    total: float
    generated_tokens: int

    @staticmethod
    def of(slot: int, ticket: _Ticket, ended: float, generated: int) -> RequestTimes:
        admitted = ticket.admitted if ticket.admitted is not None else ended
        first = ticket.first_token
        per_token = (
            (ended - first) / (generated - 1) if first is not None and generated > 1 else None
        )
        return RequestTimes(
            slot, admitted - ticket.submitted, None if first is None else first - ticket.submitted,
            per_token, ended - ticket.submitted, generated,
        )  # fmt: skip


@dataclass
class SlotStats:
    """What one slot has served: requests ended, prompt tokens (and how many it held already),
    generated tokens, drafted and accepted tokens (speculative decoding), per strategy (its
    name: drafted, accepted) and per draft position (how often the i-th token of a draft was
    drafted and accepted)."""

    slot: int
    requests: int = 0
    prompt_tokens: int = 0
    reused_prompt_tokens: int = 0
    generated_tokens: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    strategies: dict[str, tuple[int, int]] = field(default_factory=dict)
    busy: bool = False
    # per draft position (0: a draft's first token): steps that drafted it, and accepted it
    drafted_at: list[int] = field(default_factory=list)
    accepted_at: list[int] = field(default_factory=list)

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else 0.0

    def add(self, result: GenerationResult) -> None:
        metrics = result.metrics
        self.requests += 1
        self.prompt_tokens += metrics.prompt_tokens
        self.reused_prompt_tokens += metrics.reused_prompt_tokens
        self.generated_tokens += metrics.generated_tokens
        self.drafted_tokens += metrics.drafted_tokens
        self.accepted_tokens += metrics.accepted_tokens
        for strategy in metrics.strategies:
            drafted, accepted = self.strategies.get(strategy.kind.value, (0, 0))
            self.strategies[strategy.kind.value] = (
                drafted + strategy.drafted_tokens, accepted + strategy.accepted_tokens,
            )  # fmt: skip

    def add_positions(self, drafted_at: Sequence[int], accepted_at: Sequence[int]) -> None:
        for mine, theirs in ((self.drafted_at, drafted_at), (self.accepted_at, accepted_at)):
            mine.extend([0] * (len(theirs) - len(mine)))
            for position, count in enumerate(theirs):
                mine[position] += count


class Slots:
    """The ``n_seq_max`` sequences of a context serving requests from many threads at once (see
    the module's text); made by :meth:`Context.slots`, which the context is busy with until
    :meth:`close`. ``max_waiting``: how many requests may wait for a slot (more:
    :class:`LlamaQueueFullError`)."""

    def __init__(
        self,
        model: Model,
        n_ctx: int,
        session: NativeSession,
        sidecar: Sidecar | None,
        planner: Planner,
        release: Callable[[], None],
        identity: Callable[[], dict[str, Any]],
        *,
        max_waiting: int = DEFAULT_MAX_WAITING,
    ) -> None:
        if max_waiting < 0:
            raise ValueError("max_waiting must be >= 0")
        self.model, self._session, self._sidecar = model, session, sidecar
        self._planner, self._release, self.max_waiting = planner, release, max_waiting
        self._identity = identity
        self._controls: deque[tuple[Callable[[], Any], Future[Any]]] = deque()
        self.n_slots = len(session.sequences)
        # the decode loops load with the first generation, not with the runtime
        # (Context: see _steps)
        from .decoding import SequenceScheduler, log_metrics

        self._log_metrics = log_metrics
        # a slot's share of the cells: with a unified KV cache llama.cpp lets any sequence fill
        # them all, and a slot that did would leave the others none
        self._room = min(session.room, n_ctx // self.n_slots)
        self._scheduler = SequenceScheduler(model, n_ctx, session, sidecar, self._room)
        self._waiting: deque[_Ticket] = deque()
        self._tickets: dict[int, _Ticket] = {}  # slot -> its request
        self._last_used = dict.fromkeys(range(self.n_slots), 0)
        self._clock = itertools.count(1)
        self._stats = [SlotStats(slot) for slot in range(self.n_slots)]
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._plan_lock = threading.Lock()  # requests are planned one at a time
        self._closing = False
        self._listeners: list[Callable[[RequestTimes], None]] = []
        self._thread = threading.Thread(target=self._serve, name="llama-slots", daemon=True)
        self._thread.start()

    # ---- submitting, from any thread ------------------------------------------------------

    def stream(
        self, prompt: str | Sequence[int] | MediaPrompt, **options: Unpack[GenerateOptions]
    ) -> Stream:
        """:meth:`Context.stream` in a slot: the prompt checked here, the stream's pieces as the
        slot generates them (the slot runs whether or not they are read)."""
        return Stream(self._pieces(self._submit(self._plan(prompt, options))))

    def generate(
        self, prompt: str | Sequence[int] | MediaPrompt, **options: Unpack[GenerateOptions]
    ) -> GenerationResult:
        """:meth:`Context.generate` in a slot (blocks until it ends)."""
        return run_to_end(self._pieces(self._submit(self._plan(prompt, options))))

    def stream_chat(self, messages: ChatMessages, **options: Unpack[ChatOptions]) -> ChatStream:
        """:meth:`Context.stream_chat` in a slot (the chat rendered and checked here)."""
        request, ticket = self._submit_chat(messages, options)
        return ChatStream(self._pieces(ticket), request)

    def chat(self, messages: ChatMessages, **options: Unpack[ChatOptions]) -> ChatResult:
        """:meth:`Context.chat` in a slot (blocks until it ends): the reply parsed once, at its
        end, as :meth:`Context.chat` parses it (not as a stream, which parses it every step)."""
        request, ticket = self._submit_chat(messages, options)
        try:
            return request.result(run_to_end(self._pieces(ticket)))
        finally:
            request.close()

    def _submit_chat(
        self, messages: ChatMessages, options: ChatOptions
    ) -> tuple[ChatRequest, _Ticket]:
        with self._plan_lock:
            request = render(self.model, self._sidecar, messages, options)
            try:
                plan = request.plan(self._planner(request.prompt, request.options))
            except BaseException:
                request.close()
                raise
        try:
            return request, self._submit(plan)
        except BaseException:
            request.close()
            raise

    def _plan(self, prompt: str | Sequence[int] | MediaPrompt, options: GenerateOptions) -> Plan:
        with self._plan_lock:
            return self._planner(prompt, options)

    def _submit(self, plan: Plan) -> _Ticket:
        if plan.sampler is not None or plan.on_token is not None or plan.alora is not None:
            raise LlamaRuntimeError(
                "slots take no sampler=, on_token= or aLoRA (a slot's request is read as a stream)"
            )
        if plan.cells >= self._room:
            raise ValueError(
                f"the prompt ({plan.cells} cells) does not fit a slot's {self._room} cells"
            )
        cancel = _EitherCancellation(plan.cancel)
        ticket = _Ticket(replace(plan, cancel=cancel), cancel)
        with self._lock:
            if self._closing:
                raise LlamaClosedError("the slots are closed")
            # a slot whose request was cancelled is free at the next step (a waiting request
            # that is cancelled leaves the queue at once: _withdraw)
            free = self.n_slots - sum(not t.cancel.cancelled for t in self._tickets.values())
            if len(self._waiting) >= self.max_waiting + free:
                raise LlamaQueueFullError(
                    f"all {self.n_slots} slots are busy and {len(self._waiting)} requests wait "
                    f"(max_waiting={self.max_waiting})"
                )
            self._waiting.append(ticket)
            self._wake.notify()
        cancel.when_cancelled(lambda: self._withdraw(ticket))
        return ticket

    def _withdraw(self, ticket: _Ticket) -> None:
        """A request cancelled while it waits leaves the queue now (its place free at once) and
        ends as cancelled, with no token; one in a slot ends there at the next step."""
        with self._lock:
            if ticket not in self._waiting:
                return
            self._waiting.remove(ticket)
        run = Run(self.model, (), None, ticket.cancel, ticket.plan.max_tokens)
        run.finish(FinishReason.CANCELLED)
        ticket.out.put(_Ended(run.result(self._sidecar is not None, len(ticket.plan.tokens),
                                         LLAMA_DEFAULT_SEED), None))  # fmt: skip

    @staticmethod
    def _pieces(ticket: _Ticket) -> Generator[str, None, GenerationResult]:
        """A request's replies as a generation's steps; closing it ends the request."""
        try:
            while True:
                item = ticket.out.get()
                if isinstance(item, _Ended):
                    if item.error is not None:
                        raise item.error
                    assert item.result is not None
                    return item.result
                yield item
        finally:
            ticket.cancel.cancel()  # nothing when it had ended

    # ---- a slot's state, between steps ----------------------------------------------------

    def save_slot(self, slot: int) -> bytes:
        """What slot ``slot`` holds, as :meth:`Context.save_state` with ``seq=slot`` gives it
        (the target's state and the speculative sidecar's): for :meth:`load_slot` here or in
        slots of another context on the same model, release and speculative setup. The slot
        must not be generating (else :class:`LlamaSlotBusyError`)."""
        saved = self._between_steps(slot, lambda: save_context_state(
            self._session, self._sidecar, self._identity(), slot
        ))  # fmt: skip
        return bytes(saved)

    def load_slot(self, slot: int, state: bytes) -> None:
        """Load a state from :meth:`save_slot` (or ``Context.save_state(seq=...)``) into slot
        ``slot``, which then holds it (the next request sharing its prefix goes there);
        :class:`LlamaStateError` when it was saved with another release, model or setup."""
        self._between_steps(slot, lambda: load_context_state(
            self._session, self._sidecar, self._identity(), state, None, slot
        ))  # fmt: skip

    def clear_slot(self, slot: int) -> None:
        """Empty slot ``slot`` (it must not be generating)."""
        self._between_steps(slot, lambda: self._session.clear(self._sidecar, slot))

    def held_tokens(self, slot: int) -> int:
        """How many tokens slot ``slot`` holds (read between steps)."""
        return int(self._between_steps(slot, lambda: len(self._session.sequences[slot].tokens)))

    def _between_steps(self, slot: int, call: Callable[[], Any]) -> Any:
        """``call()`` on the slots' thread between two steps, while ``slot`` is idle."""
        if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < self.n_slots:
            raise ValueError(f"slot must be an int in [0, {self.n_slots}), got {slot!r}")
        done: Future[Any] = Future()

        def guarded() -> Any:
            if slot in self._tickets:
                raise LlamaSlotBusyError(f"slot {slot} is generating: try again when it ends")
            return call()

        with self._lock:
            if self._closing:
                raise LlamaClosedError("the slots are closed")
            self._controls.append((guarded, done))
            self._wake.notify()
        return done.result()

    # ---- what the slots hold --------------------------------------------------------------

    @property
    def n_ctx(self) -> int:
        """The cells one slot holds (its prompt and its reply): the context's ``n_ctx`` shared
        out among the slots."""
        return self._room

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot."""
        with self._lock:
            return len(self._waiting)

    @property
    def busy(self) -> int:
        """Slots generating."""
        with self._lock:
            return len(self._tickets)

    def stats(self) -> list[SlotStats]:
        """Each slot's totals (copies)."""
        with self._lock:
            return [
                replace(s, strategies=dict(s.strategies), busy=s.slot in self._tickets,
                        drafted_at=list(s.drafted_at), accepted_at=list(s.accepted_at))
                for s in self._stats
            ]  # fmt: skip

    def cells_in_use(self) -> list[int]:
        """The KV cells each slot holds now (its tokens, and the cells its media items take
        beyond their positions), read without waiting for the step that runs."""
        return [len(held.tokens) + held.extra_cells for held in self._session.sequences]

    def on_request_end(self, listener: Callable[[RequestTimes], None]) -> None:
        """Call ``listener`` with the :class:`RequestTimes` of every request that ends with a
        result from now on (on the slots' thread, between steps: it must return quickly and
        not raise)."""
        with self._lock:
            self._listeners.append(listener)

    def close(self, *, cancel: bool = True, timeout: float | None = None) -> None:
        """Take no more requests; end the running and waiting ones (``cancel``, the default:
        they end at the next step as cancelled; False: they run to their end), wait for the
        thread (at most ``timeout`` seconds), and give the context back."""
        with self._lock:
            self._closing = True
            ending = [*self._waiting, *self._tickets.values()] if cancel else []
            self._wake.notify()
        for ticket in ending:  # outside the lock: a waiting one withdraws itself
            ticket.cancel.cancel()
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._release()

    def __enter__(self) -> Slots:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the slots' thread ----------------------------------------------------------------

    def _serve(self) -> None:
        scheduler = self._scheduler
        try:
            while True:
                with self._lock:
                    while not (self._waiting or scheduler.jobs or self._closing or self._controls):
                        self._wake.wait()
                    controls = list(self._controls)
                    self._controls.clear()
                    if self._closing and not self._waiting and not scheduler.jobs and not controls:
                        return
                    admitted = self._assign()
                for call, done in controls:
                    _run_into(call, done)
                for slot, ticket in admitted:
                    self._admit(slot, ticket)
                if scheduler.jobs:
                    self._step()
        finally:
            scheduler.close()
            with self._lock:
                self._closing = True
                left = [*self._waiting, *self._tickets.values()]
                self._waiting.clear()
                self._tickets.clear()
            for _, done in self._controls:
                done.set_exception(LlamaClosedError("the slots' thread stopped"))
            for ticket in left:  # only after an error in this thread itself
                ticket.out.put(_Ended(None, LlamaClosedError("the slots' thread stopped")))

    def _assign(self) -> list[tuple[int, _Ticket]]:
        """Waiting requests given free slots (under the lock)."""
        admitted = []
        while self._waiting and len(self._tickets) < self.n_slots:
            ticket = self._waiting.popleft()
            free = [s for s in range(self.n_slots) if s not in self._tickets]
            held = self._session.sequences
            slot = max(
                free,
                key=lambda s: (
                    common_prefix(held[s].tokens, ticket.plan.tokens),
                    -self._last_used[s],
                ),
            )
            self._last_used[slot] = next(self._clock)
            self._tickets[slot] = ticket
            admitted.append((slot, ticket))
        return admitted

    def _admit(self, slot: int, ticket: _Ticket) -> None:
        # libmtmd's context is not shared between threads: a media prompt is encoded while no
        # caller tokenizes one (planning holds the same lock)
        media = self._plan_lock if ticket.plan.media is not None else contextlib.nullcontext()
        ticket.admitted = time.monotonic()
        try:
            with media:
                job = self._scheduler.admit(slot, ticket.plan)
        except BaseException as exc:  # this request's prompt failed: the others go on
            self._end(slot, _Ended(None, exc))
            return
        self._deliver(job)

    def _step(self) -> None:
        scheduler = self._scheduler
        jobs = list(scheduler.jobs.values())
        try:
            scheduler.step()
        except BaseException as exc:  # a step failed: nothing of its generations is trusted
            for job in jobs:
                if job.result is None:
                    scheduler.drop(job)
                    self._end(job.seq, _Ended(None, exc))
                else:
                    self._deliver(job)
            return
        for job in jobs:
            self._deliver(job)

    def _deliver(self, job: Job) -> None:
        """A job's released text to its request; its end, once it has a result."""
        ticket = self._tickets[job.seq]
        if ticket.first_token is None and job.run.tokens:
            ticket.first_token = time.monotonic()
        for piece in job.run.take():
            ticket.out.put(piece)
        if job.result is not None:
            self._log_metrics(job.result, f"slot {job.seq}")
            times = RequestTimes.of(
                job.seq, ticket, time.monotonic(), job.result.metrics.generated_tokens
            )
            with self._lock:
                self._stats[job.seq].add(job.result)
                self._stats[job.seq].add_positions(job.drafted_at, job.accepted_at)
                listeners = list(self._listeners)
            for listener in listeners:
                listener(times)
            self._end(job.seq, _Ended(job.result, None))

    def _end(self, slot: int, ended: _Ended) -> None:
        with self._lock:
            ticket = self._tickets.pop(slot)
        ticket.out.put(ended)


def _run_into(call: Callable[[], Any], done: Future[Any]) -> None:
    try:
        done.set_result(call())
    except BaseException as exc:  # the caller's thread raises it
        done.set_exception(exc)
