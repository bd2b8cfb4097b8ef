"""The decode loops of a context: plain (one token per ``llama_decode``), speculative
(one ``llama_mtp_step`` per verified step) and several sequences in one batch
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
    """:meth:`Context.generate_batch` of checked ``plans``, sequence ``i`` for plan ``i``."""
    with running(session, plans[0].cancel):  # the same options for each sequence
        if sidecar is not None:
            results = speculate_sequences(model, n_ctx, session, sidecar, plans, session.room)
        else:
            results = generate_sequences(model, n_ctx, session, plans, session.room)
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
        run = self.run
        if run.cancelled():
            return None
        if n_past + 1 > room:
            run.finish(FinishReason.CONTEXT_FULL)
            return None
        cap = min(self.capacity, max(1, run.remaining()), room - n_past)
        status = self.sidecar.step(
            self.seq, self.sampler, id_last, n_past, self.out, cap, self.n_out
        )
        if status != constants.LLAMA_MTP_STATUS_OK:
            if run.cancelled():
                return None
            self.sidecar.check(status, "step")
        return [int(self.out[i]) for i in range(int(self.n_out[0]))]


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


def speculate_sequences(
    model: Model,
    n_ctx: int,
    session: NativeSession,
    sidecar: Sidecar,
    plans: list[Plan],
    room: int,
) -> list[GenerationResult]:
    """:meth:`Context.generate_batch` with speculative decoding: each prompt but its last token
    into its own sequence (mirrored into the sidecar; what the sequence holds of it kept when its
    plan reuses prefixes), then one step per sequence in turn; each run's counters are the
    sidecar's differences around its own steps. Each sequence keeps what it holds afterwards."""
    runs = [
        Run(model, p.stop, None, p.cancel, p.max_tokens, p.logprobs, p.preserved) for p in plans
    ]
    samplers: list[Any] = []
    llama = session.llama
    batch = llama.llama_batch_init(int(llama.llama_n_batch(session.handle)), 0, 1)
    totals: dict[int, SidecarCounts | None] = {}
    done = False
    try:
        samplers += [_sampler(model, n_ctx, plan) for plan in plans]
        going: dict[int, tuple[int, int]] = {}  # sequence -> (id_last, n_past)
        for seq, (plan, run) in enumerate(zip(plans, runs, strict=True)):
            head = plan.tokens[:-1]
            run.reused, run.reuse = session.reuse(
                plan.tokens, len(head), plan.reuse_prefix, sidecar, seq
            )
            row = session.decode_prompt(
                batch, head, run.reused, run.cancelled, seq=seq, mirror=sidecar.process
            )
            if row is None:
                continue
            session.checkpoint(sidecar, seq)
            sidecar.begin(head, seq)
            run.prompt_done()
            going[seq] = (plan.tokens[-1], len(head))
        steppers = [_Stepper(session, sidecar, i, samplers[i], runs[i]) for i in range(len(runs))]
        totals.update((seq, None) for seq in going)
        _take_turns(session, sidecar, steppers, going, room, totals)
        seeds = [int(llama.llama_sampler_get_seed(sampler)) for sampler in samplers]
        done = True
    finally:
        _settle(session, sidecar, len(plans), done)
        llama.llama_batch_free(batch)
        for sampler in samplers:
            llama.llama_sampler_free(sampler)
    for seq, run in enumerate(runs):
        counts = totals.get(seq)
        if counts is not None:
            _record(run, counts)
        run.end_text()
    return [
        run.result(True, len(plan.tokens), seed)
        for run, plan, seed in zip(runs, plans, seeds, strict=True)
    ]


def _take_turns(
    session: NativeSession,
    sidecar: Sidecar,
    steppers: list[_Stepper],
    going: dict[int, tuple[int, int]],
    room: int,
    totals: dict[int, SidecarCounts | None],
) -> None:
    """A step of every sequence still going, in turn, until none is; ``totals`` gets each
    sequence's counters."""
    while going:
        for seq, (id_last, n_past) in list(going.items()):
            step = steppers[seq]
            before = sidecar.counts()
            got = step(id_last, n_past, room)
            counted = sidecar.counts().since(before)
            earlier = totals[seq]
            totals[seq] = counted if earlier is None else earlier.plus(counted)
            if got is not None:
                _held(session, seq, id_last, got)
            if got is None or not _emit_all(step.run, session, got):
                del going[seq]
            else:
                going[seq] = (got[-1], n_past + len(got))


def _settle(session: NativeSession, sidecar: Sidecar | None, n_seq: int, done: bool) -> None:
    """After a batch: each of its sequences keeps what it holds, with a checkpoint where it
    ends; after an error nothing of them is trusted, and they are emptied."""
    for seq in range(n_seq):
        if done:
            session.checkpoint(sidecar, seq)
        else:
            session.clear(sidecar, seq)


def _emit_all(run: Run, session: NativeSession, got: list[int]) -> bool:
    """Record a step's tokens (with their rows' log-probabilities); False when the run ends."""
    return all(run.emit(t, session.logprob(run.top_logprobs, t, i)) for i, t in enumerate(got))


def _sampler(model: Model, n_ctx: int, plan: Plan) -> Any:
    return build_sampler(model, n_ctx, cast(Sampling, plan.sampling), plan.grammar)


def generate_sequences(
    model: Model, n_ctx: int, session: NativeSession, plans: list[Plan], room: int
) -> list[GenerationResult]:
    """:meth:`Context.generate_batch`: the prompts, each its own sequence (what the sequence holds
    of it kept when its plan reuses prefixes), then one batch per step with the next token of
    every sequence still going (``room``: cells per sequence). Each sequence keeps what it holds
    afterwards."""
    runs = [
        Run(model, p.stop, None, p.cancel, p.max_tokens, p.logprobs, p.preserved) for p in plans
    ]
    samplers: list[Any] = []
    llama = session.llama
    n_batch = int(llama.llama_n_batch(session.handle))
    batch = llama.llama_batch_init(max(n_batch, len(plans)), 0, 1)
    done = False
    try:
        for plan in plans:
            samplers.append(_sampler(model, n_ctx, plan))
        going: dict[int, tuple[int, int]] = {}  # sequence -> (next token to decode, its pos)
        for seq, plan in enumerate(plans):
            run = runs[seq]
            run.reused, run.reuse = session.reuse(
                plan.tokens, len(plan.tokens) - 1, plan.reuse_prefix, None, seq
            )
            row = session.decode_prompt(batch, plan.tokens, run.reused, run.cancelled, seq=seq)
            if row is None:
                continue
            session.checkpoint(None, seq)
            run.prompt_done()
            if _take(session, run, samplers[seq], row, len(plan.tokens), room):
                going[seq] = (run.tokens[-1], len(plan.tokens))
        while going:
            _decode_step(session, batch, going)
            for row, (seq, (token, pos)) in enumerate(list(going.items())):
                session.sequences[seq].tokens.append(token)
                if _take(session, runs[seq], samplers[seq], row, pos + 1, room):
                    going[seq] = (runs[seq].tokens[-1], pos + 1)
                else:
                    del going[seq]
        seeds = [int(llama.llama_sampler_get_seed(sampler)) for sampler in samplers]
        done = True
    finally:
        _settle(session, None, len(plans), done)
        llama.llama_batch_free(batch)
        for sampler in samplers:
            llama.llama_sampler_free(sampler)
    for run in runs:
        run.end_text()
    return [
        run.result(False, len(plan.tokens), seed)
        for run, plan, seed in zip(runs, plans, seeds, strict=True)
    ]


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
