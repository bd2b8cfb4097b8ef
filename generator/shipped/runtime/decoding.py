"""The decode loops of a context: plain (one token per ``llama_decode``), speculative
(one ``llama_mtp_step`` per verified step; several sequences' steps verified in one decode by
``llama_mtp_step_many``) and several sequences in one batch
(:meth:`Context.generate_batch`). Each runs a checked :class:`Plan`'s tokens through the
context's :class:`NativeSession` (which keeps the common prefix of the last prompt) and records
what it accepts in a :class:`Run`; :func:`running` is what every generation runs inside
(cancellation reaching into llama.cpp, the thread mark, the metrics logged). They take the
context's model, its ``n_ctx``, session and sidecar, never the :class:`Context`: :func:`run_steps`
and :func:`run_batch` are what it calls."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any, cast

from .. import constants
from ..errors import LlamaRuntimeError
from .adapters import ALORA_NEVER
from .generation import Plan, Run
from .media import media_start
from .results import LOGGER, Cancellation, FinishReason, GenerationResult
from .sampling import Sampling, build_sampler
from .session import NativeSession
from .speculative import ManyStep

if TYPE_CHECKING:
    from .model import Model
    from .speculative import Sidecar, SidecarCounts


@contextlib.contextmanager
def running(session: NativeSession, cancel: Cancellation | None) -> Iterator[None]:
    """While a generation runs: its cancellation checked inside llama.cpp's decodes (the abort
    callback, registered only then: llama.cpp calls it many times per token) and the thread
    marked as inside llama.cpp (closing from another thread then raises)."""
    native, llama, null = session.native, session.llama, session.ffi.NULL
    session.cancel = cancel
    if cancel is not None:
        llama.llama_set_abort_callback(session.handle, session.abort_callback, null)
    native.active_thread = threading.get_ident()
    try:
        yield
    finally:
        native.active_thread = None
        if cancel is not None and native.alive:
            llama.llama_set_abort_callback(native.pointer, null, null)
        session.cancel = None


def log_metrics(result: GenerationResult, what: str = "generation") -> None:
    metrics = result.metrics
    LOGGER.info(
        "%s: llama.cpp %s, mtp %s, %d prompt tokens (%d reused: %s) + %d generated, %d drafted, "
        "%d accepted (acceptance %.3f), %d steps, %.1f tokens/s, finish %s",
        what, metrics.llama_cpp_tag, "on" if metrics.mtp else "off", metrics.prompt_tokens,
        metrics.reused_prompt_tokens, metrics.prompt_reuse.value, metrics.generated_tokens,
        metrics.drafted_tokens, metrics.accepted_tokens, metrics.acceptance_rate, metrics.steps,
        metrics.tokens_per_second, result.finish_reason.value,
    )  # fmt: skip


def run_steps(
    model: Model, n_ctx: int, session: NativeSession, sidecar: Sidecar | None, plan: Plan
) -> Generator[str, None, GenerationResult]:
    """One generation of ``plan`` on a context (``n_ctx`` its cells, ``sidecar`` its speculative
    sidecar, if any): yields released text after every step, returns the result."""
    sampler = plan.sampler
    llama = session.llama
    try:
        if plan.sampling is not None:
            sampler = build_sampler(model, n_ctx, plan.sampling, plan.grammar)
        run = Run(
            model, plan.stop, plan.on_token, plan.cancel, plan.max_tokens, plan.logprobs,
            plan.preserved,
        )  # fmt: skip
        if sidecar is not None:
            steps = generate_mtp(session, sidecar, plan, sampler, run)
        else:
            steps = generate_plain(session, plan, sampler, run)
        native = session.native  # marks the thread inside llama.cpp between the yields
        with running(session, plan.cancel):
            for _ in steps:
                native.active_thread = None
                yield from run.take()
                native.active_thread = threading.get_ident()
        run.end_text()
        yield from run.take()
        seed = int(llama.llama_sampler_get_seed(sampler))
    finally:
        if plan.sampler is None and sampler is not None:
            llama.llama_sampler_free(sampler)
    result = run.result(sidecar is not None, len(plan.tokens), seed)
    log_metrics(result)
    return result


def run_batch(
    model: Model, n_ctx: int, session: NativeSession, sidecar: Sidecar | None, plans: list[Plan]
) -> list[GenerationResult]:
    """:meth:`Context.generate_batch` of checked ``plans``, sequence ``i`` for plan ``i``: every
    prompt first, then steps until every sequence ends. After an error nothing of them is
    trusted, and they are emptied."""
    scheduler = SequenceScheduler(model, n_ctx, session, sidecar)
    done = False
    try:
        with running(session, plans[0].cancel):  # the same options for each sequence
            jobs = [scheduler.admit(seq, plan) for seq, plan in enumerate(plans)]
            while scheduler.jobs:
                scheduler.step()
        done = True
    finally:
        scheduler.close()
        if not done:
            for seq in range(len(plans)):
                session.clear(sidecar, seq)
    results = [cast(GenerationResult, job.result) for job in jobs]
    for i, result in enumerate(results):
        log_metrics(result, f"sequence {i} of a batch")
    return results


def _prefill(
    session: NativeSession,
    tokens: list[int],
    start: int,
    run: Run,
    sidecar: Sidecar | None,
    plan: Plan,
) -> bool:
    """``tokens[start:]`` decoded, with their media (and mirrored into the sidecar); with an
    aLoRA, the tokens before its boundary without the adapters and the rest with them, which
    then stay on for the generation (off when the boundary is never reached). False when
    cancelled."""
    n_batch = int(session.llama.llama_n_batch(session.handle))
    batch = session.llama.llama_batch_init(n_batch, 0, 1)
    mirror = sidecar.process if sidecar is not None else None
    rows = sidecar.process_rows if sidecar is not None else None
    parts: list[tuple[int, int, bool | None]] = [(start, len(tokens), None)]
    if plan.alora is not None:
        boundary, switch = plan.alora
        spans = plan.media.spans if plan.media is not None else {}
        cut = min(max(start, boundary), len(tokens))
        cut = media_start(cut, ((first, span.n_pos) for first, span in spans.items()))
        parts = [(start, cut, False), (cut, len(tokens), True)]
    try:
        for begin, end, adapters_on in parts:
            if begin >= end:
                continue
            if adapters_on is not None:
                switch(adapters_on)
            done = session.decode_prompt(
                batch, tokens[:end], begin, run.cancelled, mirror=mirror, media=plan.media,
                mirror_rows=rows,
            )  # fmt: skip
            if done is None:
                return False
    finally:
        session.llama.llama_batch_free(batch)
    if plan.alora is not None:
        session.sequences[0].lora_from = boundary
        switch(boundary != ALORA_NEVER)
    return True


def generate_plain(session: NativeSession, plan: Plan, sampler: Any, run: Run) -> Iterator[None]:
    """One token per ``llama_decode`` after the prompt (its common prefix with what the context
    holds kept when ``reuse_prefix``); yields after each accepted token."""
    tokens = plan.tokens
    run.reused, run.reuse = session.reuse(
        tokens, len(tokens) - 1, plan.reuse_prefix, None, lora_from=plan.lora_from
    )
    if not _prefill(session, tokens, run.reused, run, None, plan):
        return
    session.checkpoint(None)
    run.prompt_done()
    llama = session.llama
    token_buf = session.ffi.new("llama_token[1]")
    held = session.sequences[0]
    while run.finish_reason is None:
        token = int(llama.llama_sampler_sample(sampler, session.handle, -1))
        run.steps += 1
        if not run.emit(token, session.logprob(run.top_logprobs, token, -1)):
            break
        yield
        if len(held.tokens) + held.extra_cells + 1 > session.room:
            run.finish(FinishReason.CONTEXT_FULL)
            break
        token_buf[0] = token
        status = session.decode(llama.llama_batch_get_one(token_buf, 1))
        if status != 0:
            if run.cancelled():
                return
            raise LlamaRuntimeError(f"llama_decode failed ({status})")
        session.history.append(token)
    session.checkpoint(None)


def generate_mtp(
    session: NativeSession, sidecar: Sidecar, plan: Plan, sampler: Any, run: Run
) -> Iterator[None]:
    """All prompt tokens but the last through the context and the sidecar (their common prefix
    with what the context holds kept when ``reuse_prefix``), then one ``llama_mtp_step`` (draft
    and verify) per step; yields after each step's tokens. When a media item comes right
    before the last token, the whole prompt is decoded and its first token sampled as plain
    decoding does: a step must start one past the target's last position, and an M-RoPE media
    item ends on fewer positions than it advances."""
    tokens = plan.tokens
    after_media = len(tokens) > 1 and tokens[-2] < 0
    head = tokens if after_media else tokens[:-1]
    run.reused, run.reuse = session.reuse(
        tokens, len(tokens) - 1, plan.reuse_prefix, sidecar, lora_from=plan.lora_from
    )
    if not _prefill(session, head, run.reused, run, sidecar, plan):
        return
    session.checkpoint(sidecar)
    sidecar.begin([t for t in head if t >= 0])
    before = sidecar.counts()
    run.prompt_done()
    step = _Stepper(session, sidecar, 0, sampler, run)
    held = session.sequences[0]
    id_last = tokens[-1]
    if after_media:
        id_last = int(session.llama.llama_sampler_sample(sampler, session.handle, -1))
        run.steps += 1
        if not run.emit(id_last, session.logprob(run.top_logprobs, id_last, -1)):
            _record(run, sidecar.counts().since(before))
            return
        yield
    while run.finish_reason is None:
        got = step(id_last, len(held.tokens), session.room - held.extra_cells)
        if got is None:
            break
        _held(session, 0, id_last, got)
        id_last = got[-1]
        if not _emit_all(run, session, got):
            break
        yield
    _record(run, sidecar.counts().since(before))
    session.checkpoint(sidecar)


class _Stepper:
    """One sequence's speculative steps: each drafts, verifies and accepts with
    ``llama_mtp_step``, capped by what the run and the sequence's cells leave room for. Log-
    probabilities come from the rows the target computed to verify the draft: row i is the
    distribution of the step's i-th token, as a plain decode would have computed it."""

    def __init__(
        self, session: NativeSession, sidecar: Sidecar, seq: int, sampler: Any, run: Run
    ) -> None:
        self.sidecar, self.seq, self.sampler, self.run = sidecar, seq, sampler, run
        self.capacity = sidecar.options.draft_token_max + 1
        self.out = session.ffi.new("llama_token[]", self.capacity)
        self.n_out = session.ffi.new("int32_t *")

    def __call__(self, id_last: int, n_past: int, room: int) -> list[int] | None:
        """The step's tokens (accepted drafts, then the target's own); None when the run ends
        first (cancelled, or no cell left in ``room``)."""
        step = self.prepare(id_last, n_past, room)
        if step is None:
            return None
        status = self.sidecar.step(
            self.seq, self.sampler, id_last, n_past, self.out, step.cap, self.n_out
        )
        return self.tokens(status, [int(self.out[i]) for i in range(int(self.n_out[0]))])

    def prepare(self, id_last: int, n_past: int, room: int) -> ManyStep | None:
        """The next step's part (its cap: what the run and ``room`` leave); None when the run
        ends first (cancelled, or no cell left)."""
        run = self.run
        if run.cancelled():
            return None
        if n_past + 1 > room:
            run.finish(FinishReason.CONTEXT_FULL)
            return None
        cap = min(self.capacity, max(1, run.remaining()), room - n_past)
        return ManyStep(self.seq, self.sampler, id_last, n_past, self.out, cap)

    def tokens(self, status: int, got: list[int]) -> list[int] | None:
        """A step's tokens after its status (None: cancelled meanwhile; an error raises)."""
        if status != constants.LLAMA_MTP_STATUS_OK:
            if self.run.cancelled():
                return None
            self.sidecar.check(status, "step")
        return got


def _held(session: NativeSession, seq: int, id_last: int, got: list[int]) -> None:
    """After a step: sequence ``seq`` holds ``id_last`` and every token of ``got`` but its last
    (the next step's ``id_last``)."""
    tokens = session.sequences[seq].tokens
    tokens.append(id_last)
    tokens.extend(got[:-1])


def _record(run: Run, counts: SidecarCounts) -> None:
    run.drafted, run.drafts, run.accepted = counts.drafted, counts.drafts, counts.accepted
    run.backend_sampled, run.steps, run.strategies = (
        counts.backend_sampled, counts.steps, counts.strategies,
    )  # fmt: skip


def _emit_all(run: Run, session: NativeSession, got: list[int], first_row: int = 0) -> bool:
    """Record a step's tokens (with their rows' log-probabilities, from ``first_row`` on); False
    when the run ends."""
    return all(
        run.emit(t, session.logprob(run.top_logprobs, t, first_row + i)) for i, t in enumerate(got)
    )


def _sampler(model: Model, n_ctx: int, plan: Plan) -> Any:
    return build_sampler(model, n_ctx, cast(Sampling, plan.sampling), plan.grammar)


def _decode_step(session: NativeSession, batch: Any, going: dict[int, tuple[int, int]]) -> None:
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
    status = session.decode(batch)
    if status != 0:
        raise LlamaRuntimeError(f"llama_decode failed ({status}) on a batch of {n} sequences")


def _take(
    session: NativeSession, run: Run, sampler: Any, row: int, next_pos: int, room: int
) -> bool:
    """Sample a sequence's next token from batch row ``row`` and record it; False when the
    sequence ends (``next_pos``: where that token would be decoded, in ``room`` cells)."""
    if run.cancelled():
        return False
    token = int(session.llama.llama_sampler_sample(sampler, session.handle, row))
    run.steps += 1
    if not run.emit(token, session.logprob(run.top_logprobs, token, row)):
        return False
    if next_pos + 1 > room:
        run.finish(FinishReason.CONTEXT_FULL)
        return False
    return True


class Job:
    """One generation in a sequence of a :class:`SequenceScheduler`: its plan, its run and its
    sampler; ``going`` (while it runs): the token to decode next (plain) or the step's
    ``id_last`` (speculative), and its position; ``result`` once it ends."""

    def __init__(self, seq: int, plan: Plan, run: Run, sampler: Any) -> None:
        self.seq, self.plan, self.run, self.sampler = seq, plan, run, sampler
        self.going: tuple[int, int] | None = None
        self.stepper: _Stepper | None = None
        self.totals: SidecarCounts | None = None
        self.result: GenerationResult | None = None
        # per draft position: the steps that drafted a token there, and accepted it
        self.drafted_at: list[int] = []
        self.accepted_at: list[int] = []

    def count_positions(self, drafted: int, accepted: int) -> None:
        """One step's draft: ``drafted`` tokens, the first ``accepted`` of them accepted."""
        for counts, n in ((self.drafted_at, drafted), (self.accepted_at, accepted)):
            counts.extend([0] * (n - len(counts)))
            for position in range(n):
                counts[position] += 1


class SequenceScheduler:
    """Generations in the sequences of one context that start and end at any step (continuous
    batching): :meth:`admit` decodes a prompt into a free sequence (its common prefix with what
    the sequence holds kept when its plan reuses prefixes); :meth:`step` advances every
    generation going by one step: plain, one batch with the next token of each; speculative,
    every sequence's draft, then one decode verifying them all (``llama_mtp_step_many``), each
    sampling, accepting and counting its own. A generation that ends keeps what its sequence
    holds, with a checkpoint where it ends."""

    def __init__(
        self,
        model: Model,
        n_ctx: int,
        session: NativeSession,
        sidecar: Sidecar | None,
        room: int | None = None,
    ) -> None:
        """``room``: the cells a sequence may fill (default: llama.cpp's per sequence, all of
        them with a unified KV cache)."""
        self.model, self.n_ctx, self.session, self.sidecar = model, n_ctx, session, sidecar
        self.room = session.room if room is None else min(room, session.room)
        llama = session.llama
        n_batch = int(llama.llama_n_batch(session.handle))
        self.batch = llama.llama_batch_init(max(n_batch, len(session.sequences)), 0, 1)
        self.jobs: dict[int, Job] = {}  # sequence -> its generation, while it runs

    def admit(self, seq: int, plan: Plan) -> Job:
        """Start ``plan`` in sequence ``seq`` (free): its prompt decoded now (and, plain, its
        first token sampled). A prompt that fails leaves its sequence empty."""
        if seq in self.jobs:
            raise LlamaRuntimeError(f"sequence {seq} is generating already")
        run = Run(self.model, plan.stop, None, plan.cancel, plan.max_tokens, plan.logprobs,
                  plan.preserved)  # fmt: skip
        job = Job(seq, plan, run, _sampler(self.model, self.n_ctx, plan))
        self.jobs[seq] = job
        try:
            if self.sidecar is None:
                self._admit_plain(job)
            else:
                self._admit_speculative(job, self.sidecar)
        except BaseException:
            self.drop(job)
            raise
        if job.going is None:
            self._finish(job)
        return job

    def _admit_plain(self, job: Job) -> None:
        session, run, tokens = self.session, job.run, job.plan.tokens
        run.reused, run.reuse = session.reuse(
            tokens, len(tokens) - 1, job.plan.reuse_prefix, None, job.seq
        )
        row = session.decode_prompt(
            self.batch, tokens, run.reused, run.cancelled, seq=job.seq, media=job.plan.media
        )
        if row is None:
            return
        session.checkpoint(None, job.seq)
        run.prompt_done()
        if _take(session, run, job.sampler, row, len(tokens), self._room(job.seq)):
            job.going = (run.tokens[-1], len(tokens))

    def _admit_speculative(self, job: Job, sidecar: Sidecar) -> None:
        """The prompt but its last token into the sequence, mirrored into the sidecar (after a
        media item, the whole prompt and its first token sampled: see :func:`generate_mtp`)."""
        session, run, tokens, seq = self.session, job.run, job.plan.tokens, job.seq
        after_media = len(tokens) > 1 and tokens[-2] < 0
        head = tokens if after_media else tokens[:-1]
        run.reused, run.reuse = session.reuse(
            tokens, len(tokens) - 1, job.plan.reuse_prefix, sidecar, seq
        )
        row = session.decode_prompt(
            self.batch, head, run.reused, run.cancelled, seq=seq, mirror=sidecar.process,
            media=job.plan.media, mirror_rows=sidecar.process_rows,
        )  # fmt: skip
        if row is None:
            return
        session.checkpoint(sidecar, seq)
        sidecar.begin([t for t in head if t >= 0], seq)
        run.prompt_done()
        job.stepper = _Stepper(session, sidecar, seq, job.sampler, run)
        n_past = len(session.sequences[seq].tokens)
        if after_media and not _take(session, run, job.sampler, row, n_past, self._room(seq)):
            return
        job.going = (run.tokens[-1] if after_media else tokens[-1], n_past)

    def _room(self, seq: int) -> int:
        """The cells sequence ``seq`` has for positions (a media item may take more cells
        than positions)."""
        return self.room - self.session.sequences[seq].extra_cells

    def step(self) -> None:
        """One step of every generation going (one cancelled since is ended first); each that
        ends gets its result."""
        going = [job for job in self.jobs.values() if job.going is not None]
        for job in going:
            if job.run.cancelled():
                job.going = None
        running_now = [job for job in going if job.going is not None]
        if running_now:
            if self.sidecar is None:
                self._step_plain(running_now)
            else:
                self._step_speculative(running_now, self.sidecar)
        for job in going:
            if job.going is None:
                self._finish(job)

    def _step_plain(self, jobs: list[Job]) -> None:
        session = self.session
        nexts = {job.seq: cast(tuple[int, int], job.going) for job in jobs}
        _decode_step(session, self.batch, nexts)
        for row, job in enumerate(jobs):
            token, pos = cast(tuple[int, int], job.going)
            session.sequences[job.seq].tokens.append(token)
            if _take(session, job.run, job.sampler, row, pos + 1, self._room(job.seq)):
                job.going = (job.run.tokens[-1], pos + 1)
            else:
                job.going = None

    def _step_speculative(self, jobs: list[Job], sidecar: Sidecar) -> None:
        """Every sequence's step: with one verification decode for all (``step_many``), or one
        ``llama_mtp_step`` each with a wrapper from before it."""
        if not sidecar.steps_many:
            for job in jobs:
                before = sidecar.counts()
                id_last, n_past = cast(tuple[int, int], job.going)
                got = cast(_Stepper, job.stepper)(id_last, n_past, self._room(job.seq))
                self._stepped(job, got, sidecar.counts().since(before), 0)
            return
        parts: list[tuple[Job, ManyStep]] = []
        for job in jobs:
            id_last, n_past = cast(tuple[int, int], job.going)
            step = cast(_Stepper, job.stepper).prepare(id_last, n_past, self._room(job.seq))
            if step is None:
                self._stepped(job, None, sidecar.nothing_counted, 0)
            else:
                parts.append((job, step))
        if not parts:
            return
        outcomes = sidecar.step_many([step for _, step in parts])
        for (job, _), outcome in zip(parts, outcomes, strict=True):
            got = cast(_Stepper, job.stepper).tokens(outcome.status, outcome.tokens)
            self._stepped(job, got, outcome.counts, outcome.first_row)

    def _stepped(
        self, job: Job, got: list[int] | None, counted: SidecarCounts, first_row: int
    ) -> None:
        """A sequence's step done: its counts, the tokens it holds (their logits from row
        ``first_row`` of the step's decode), and whether it goes on."""
        job.totals = counted if job.totals is None else job.totals.plus(counted)
        job.count_positions(counted.drafted, counted.accepted)
        id_last, n_past = cast(tuple[int, int], job.going)
        if got is not None:
            _held(self.session, job.seq, id_last, got)
        if got is None or not _emit_all(job.run, self.session, got, first_row):
            job.going = None
        else:
            job.going = (got[-1], n_past + len(got))

    def _finish(self, job: Job) -> None:
        """An ended generation's result; its sequence keeps what it holds."""
        del self.jobs[job.seq]
        llama = self.session.llama
        try:
            seed = int(llama.llama_sampler_get_seed(job.sampler))
        finally:
            llama.llama_sampler_free(job.sampler)
        self.session.checkpoint(self.sidecar, job.seq)
        if job.totals is not None:
            _record(job.run, job.totals)
        job.run.end_text()
        job.result = job.run.result(self.sidecar is not None, len(job.plan.tokens), seed)

    def drop(self, job: Job) -> None:
        """End ``job`` without a result (after an error): its sampler freed, its sequence
        emptied (nothing of it is trusted)."""
        if self.jobs.get(job.seq) is job:
            del self.jobs[job.seq]
            self.session.llama.llama_sampler_free(job.sampler)
        self.session.clear(self.sidecar, job.seq)

    def close(self) -> None:
        """Every generation still going dropped, the batch freed."""
        try:
            for job in list(self.jobs.values()):
                self.drop(job)
        finally:
            self.session.llama.llama_batch_free(self.batch)
