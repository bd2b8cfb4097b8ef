"""The decode loops of a :class:`Context`: plain (one token per ``llama_decode``), speculative
(one ``llama_mtp_step`` per verified step) and several sequences in one batch
(:meth:`Context.generate_batch`). Each runs a checked :class:`_Plan`'s tokens through the
context's :class:`NativeSession` (which keeps the common prefix of the last prompt) and records
what it accepts in a :class:`_Run`; :func:`running` is what every generation runs inside
(cancellation reaching into llama.cpp, the thread mark, the metrics logged)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from .. import constants
from ..errors import LlamaRuntimeError
from .generation import _Plan, _Run
from .results import LOGGER, Cancellation, FinishReason, GenerationResult
from .sampling import Sampling, build_sampler
from .session import NativeSession, _common_prefix, _fill_batch

if TYPE_CHECKING:
    from .context import Context
    from .speculative import Sidecar

__all__ = ["_common_prefix", "_fill_batch"]


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


def _prefill(
    session: NativeSession, tokens: list[int], start: int, run: _Run, sidecar: Sidecar | None
) -> bool:
    """``tokens[start:]`` decoded (and mirrored into the sidecar); False when cancelled."""
    n_batch = int(session.llama.llama_n_batch(session.handle))
    batch = session.llama.llama_batch_init(n_batch, 0, 1)
    try:
        mirror = sidecar.process if sidecar is not None else None
        return session.decode_prompt(batch, tokens, start, run, mirror=mirror) is not None
    finally:
        session.llama.llama_batch_free(batch)


def generate_plain(
    session: NativeSession, tokens: list[int], sampler: Any, run: _Run, reuse_prefix: bool
) -> Iterator[None]:
    """One token per ``llama_decode`` after the prompt (its common prefix with what the context
    holds kept when ``reuse_prefix``); yields after each accepted token."""
    run.reused, run.reuse = session.reuse(tokens, len(tokens) - 1, reuse_prefix, None)
    if not _prefill(session, tokens, run.reused, run, None):
        return
    session.checkpoint(None)
    run.prompt_done()
    llama = session.llama
    n_ctx = int(llama.llama_n_ctx(session.handle))
    token_buf = session.ffi.new("llama_token[1]")
    while run.finish_reason is None:
        token = int(llama.llama_sampler_sample(sampler, session.handle, -1))
        run.steps += 1
        if not run.emit(token, session.logprob(run, token, -1)):
            break
        yield
        if len(session.history) + 1 > n_ctx:
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
    session: NativeSession,
    sidecar: Sidecar,
    tokens: list[int],
    sampler: Any,
    run: _Run,
    reuse_prefix: bool,
) -> Iterator[None]:
    """All prompt tokens but the last through the context and the sidecar (their common prefix
    with what the context holds kept when ``reuse_prefix``), then one ``llama_mtp_step`` (draft
    and verify) per step; yields after each step's tokens. Log-probabilities come from the rows
    the target computed to verify the draft: row i is the distribution of the step's i-th
    token, as a plain decode would have computed it."""
    head = tokens[:-1]
    run.reused, run.reuse = session.reuse(tokens, len(head), reuse_prefix, sidecar)
    if not _prefill(session, head, run.reused, run, sidecar):
        return
    session.checkpoint(sidecar)
    sidecar.begin(head)
    run.prompt_done()
    capacity = sidecar.options.draft_token_max + 1
    ffi = session.ffi
    out = ffi.new("llama_token[]", capacity)
    n_out = ffi.new("int32_t *")
    n_ctx = int(session.llama.llama_n_ctx(session.handle))
    id_last = tokens[-1]
    while run.finish_reason is None:
        if run.cancelled():
            break
        n_past = len(session.history)
        if n_past + 1 > n_ctx:
            run.finish(FinishReason.CONTEXT_FULL)
            break
        cap = min(capacity, max(1, run.remaining()))
        status = sidecar.step(sampler, id_last, n_past, out, cap, n_out)
        if status != constants.LLAMA_MTP_STATUS_OK:
            if run.cancelled():
                break
            sidecar.check(status, "step")
        got = [int(out[i]) for i in range(int(n_out[0]))]
        session.history.append(id_last)
        session.history.extend(got[:-1])
        id_last = got[-1]
        if not all(run.emit(t, session.logprob(run, t, i)) for i, t in enumerate(got)):
            break
        yield
    stats = sidecar.stats()
    run.drafted = int(stats.n_drafted)
    run.drafts = int(stats.n_drafts)
    run.backend_sampled = int(stats.n_backend_sampled)
    run.accepted = int(stats.n_accepted)
    run.steps = int(stats.n_steps)
    run.strategies = sidecar.strategy_metrics()
    session.checkpoint(sidecar)


def generate_sequences(
    ctx: Context, session: NativeSession, plans: list[_Plan], room: int
) -> list[GenerationResult]:
    """:meth:`Context.generate_batch`: the prompts, each its own sequence, then one batch per step
    with the next token of every sequence still going (``room``: cells per sequence)."""
    runs = [_Run(ctx, p.stop, None, p.cancel, p.max_tokens, p.logprobs) for p in plans]
    samplers: list[Any] = []
    llama = session.llama
    n_batch = int(llama.llama_n_batch(session.handle))
    batch = llama.llama_batch_init(max(n_batch, len(plans)), 0, 1)
    memory = session.memory()
    try:
        for plan in plans:
            sampling = cast(Sampling, plan.sampling)
            samplers.append(build_sampler(ctx.model, ctx.n_ctx, sampling, plan.grammar))
        # the context's memory holds several sequences now: nothing of it is reused later
        session.clear(None)
        going: dict[int, tuple[int, int]] = {}  # sequence -> (next token to decode, its pos)
        for seq, plan in enumerate(plans):
            run = runs[seq]
            row = session.decode_prompt(batch, plan.tokens, 0, run, seq=seq)
            if row is None:
                continue
            run.prompt_done()
            if _take(session, run, samplers[seq], row, len(plan.tokens), room):
                going[seq] = (run.tokens[-1], len(plan.tokens))
        while going:
            _decode_step(session, batch, going)
            for row, (seq, (_, pos)) in enumerate(list(going.items())):
                if _take(session, runs[seq], samplers[seq], row, pos + 1, room):
                    going[seq] = (runs[seq].tokens[-1], pos + 1)
                else:
                    del going[seq]
                    llama.llama_memory_seq_rm(memory, seq, -1, -1)
        seeds = [int(llama.llama_sampler_get_seed(sampler)) for sampler in samplers]
    finally:
        session.history = []
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
    session: NativeSession, run: _Run, sampler: Any, row: int, next_pos: int, room: int
) -> bool:
    """Sample a sequence's next token from batch row ``row`` and record it; False when the
    sequence ends (``next_pos``: where that token would be decoded, in ``room`` cells)."""
    if run.cancelled():
        return False
    token = int(session.llama.llama_sampler_sample(sampler, session.handle, row))
    run.steps += 1
    if not run.emit(token, session.logprob(run, token, row)):
        return False
    if next_pos + 1 > room:
        run.finish(FinishReason.CONTEXT_FULL)
        return False
    return True
