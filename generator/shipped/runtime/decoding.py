"""The decode loops of a :class:`Context`: plain (one token per ``llama_decode``), speculative
(one ``llama_mtp_step`` per verified step) and several sequences in one batch
(:meth:`Context.generate_batch`). Each runs a checked :class:`_Plan`'s tokens through the
context and records what it accepts in a :class:`_Run`."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from .. import constants
from .._ffi import SYMBOL_ERRORS
from ..constants import MTP_STRATEGY_TYPES
from ..errors import LlamaRuntimeError
from .generation import _Plan, _Run
from .results import FinishReason, GenerationResult, StrategyMetrics
from .sampling import Sampling
from .speculative import _STRATEGY_FUNCTIONS, _MtpWrapper

if TYPE_CHECKING:
    from .context import Context


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


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def generate_plain(
    ctx: Context, tokens: list[int], sampler: Any, run: _Run, reuse_prefix: bool
) -> Iterator[None]:
    """One token per ``llama_decode`` after the prompt (its common prefix with what the context
    holds kept when ``reuse_prefix``); yields after each accepted token."""
    memory = ctx.llama.llama_get_memory(ctx.handle)
    keep = 0
    if reuse_prefix:
        keep = _common_prefix(ctx._history, tokens)
        keep = min(keep, len(tokens) - 1)  # the last prompt token is decoded for its logits
        if not ctx.llama.llama_memory_seq_rm(memory, 0, keep, -1):
            keep = 0
    if keep == 0:
        ctx.llama.llama_memory_clear(memory, True)
    ctx._history = tokens[:keep]
    n_batch = int(ctx.llama.llama_n_batch(ctx.handle))
    for start in range(keep, len(tokens), n_batch):
        chunk = tokens[start : start + n_batch]
        buf = ctx.ffi.new("llama_token[]", chunk)
        if run.cancelled():
            return
        status = ctx._decode(ctx.llama.llama_batch_get_one(buf, len(chunk)))
        if status != 0:
            if run.cancelled():
                return
            raise LlamaRuntimeError(f"llama_decode failed ({status}) on the prompt")
        ctx._history.extend(chunk)
    run.prompt_done()
    token_buf = ctx.ffi.new("llama_token[1]")
    while run.finish_reason is None:
        token = int(ctx.llama.llama_sampler_sample(sampler, ctx.handle, -1))
        run.steps += 1
        if not run.emit(token, ctx._logprob(run, token, -1)):
            return
        yield
        if len(ctx._history) + 1 > ctx.n_ctx:
            run.finish(FinishReason.CONTEXT_FULL)
            return
        token_buf[0] = token
        status = ctx._decode(ctx.llama.llama_batch_get_one(token_buf, 1))
        if status != 0:
            if run.cancelled():
                return
            raise LlamaRuntimeError(f"llama_decode failed ({status})")
        ctx._history.append(token)


def generate_mtp(
    ctx: Context, wrapper: _MtpWrapper, tokens: list[int], sampler: Any, run: _Run
) -> Iterator[None]:
    """All prompt tokens but the last through the context and the sidecar, then one
    ``llama_mtp_step`` (draft and verify) per step; yields after each step's tokens."""
    ctx._mtp_check(wrapper, wrapper.llama_mtp_seq_rm(ctx._mtp, 0, 0, -1), "seq_rm")
    ctx._mtp_check(wrapper, wrapper.llama_mtp_reset_stats(ctx._mtp), "reset_stats")
    ctx._history = []
    n_batch = int(ctx.llama.llama_n_batch(ctx.handle))
    batch = ctx.llama.llama_batch_init(n_batch, 0, 1)
    try:
        head = tokens[:-1]
        for start in range(0, len(head), n_batch):
            if run.cancelled():
                return
            chunk = head[start : start + n_batch]
            _fill_batch(batch, chunk, start)
            decoded = ctx._decode(batch)
            if decoded != 0:
                if run.cancelled():
                    return
                raise LlamaRuntimeError(f"llama_decode failed ({decoded}) on the prompt")
            processed = wrapper.llama_mtp_process(ctx._mtp, ctx.ffi.addressof(batch))
            ctx._mtp_check(wrapper, processed, "process")
    finally:
        ctx.llama.llama_batch_free(batch)
    prompt_buf = ctx.ffi.new("llama_token[]", head) if head else ctx.ffi.NULL
    ctx._mtp_check(wrapper, wrapper.llama_mtp_begin(ctx._mtp, 0, prompt_buf, len(head)), "begin")
    ctx._history = list(head)
    run.prompt_done()
    capacity = ctx.speculative.draft_token_max + 1
    out = ctx.ffi.new("llama_token[]", capacity)
    n_out = ctx.ffi.new("int32_t *")
    id_last = tokens[-1]
    n_past = len(head)
    while run.finish_reason is None:
        if run.cancelled():
            break
        if n_past + 1 > ctx.n_ctx:
            run.finish(FinishReason.CONTEXT_FULL)
            break
        cap = min(capacity, max(1, run.remaining()))
        status = wrapper.llama_mtp_step(ctx._mtp, 0, sampler, id_last, n_past, out, cap, n_out)
        if status != constants.LLAMA_MTP_STATUS_OK:
            if run.cancelled():
                break
            ctx._mtp_check(wrapper, status, "step")
        got = [int(out[i]) for i in range(int(n_out[0]))]
        ctx._history.append(id_last)
        ctx._history.extend(got[:-1])
        n_past += len(got)
        id_last = got[-1]
        if not all(run.emit(token) for token in got):
            break
        yield
    stats = ctx.ffi.new("struct llama_mtp_stats *")
    stats.struct_size = ctx.ffi.sizeof("struct llama_mtp_stats")
    ctx._mtp_check(wrapper, wrapper.llama_mtp_get_stats(ctx._mtp, stats), "get_stats")
    run.drafted = int(stats.n_drafted)
    run.drafts = int(stats.n_drafts)
    run.backend_sampled = int(stats.n_backend_sampled)
    run.accepted = int(stats.n_accepted)
    run.steps = int(stats.n_steps)
    run.strategies = strategy_metrics(ctx, wrapper)


def strategy_metrics(ctx: Context, wrapper: _MtpWrapper) -> tuple[StrategyMetrics, ...]:
    """Each strategy's drafts and tokens of the last generation (none from a first-release
    wrapper)."""
    try:
        for name in _STRATEGY_FUNCTIONS:
            getattr(wrapper, name)
    except SYMBOL_ERRORS:
        return ()  # a first-release wrapper (draft-mtp alone): no per-strategy counters
    kinds = {value: kind for kind, value in MTP_STRATEGY_TYPES.items()}
    stats = ctx.ffi.new("struct llama_mtp_strategy_stats *")
    found = []
    for index in range(int(wrapper.llama_mtp_n_strategies(ctx._mtp))):
        stats.struct_size = ctx.ffi.sizeof("struct llama_mtp_strategy_stats")
        status = wrapper.llama_mtp_get_strategy_stats(ctx._mtp, index, stats)
        ctx._mtp_check(wrapper, status, "get_strategy_stats")
        found.append(
            StrategyMetrics(
                kinds[int(stats.type)],
                int(stats.n_drafts),
                int(stats.n_drafted),
                int(stats.n_accepted),
            )
        )
    return tuple(found)


def generate_sequences(ctx: Context, plans: list[_Plan], room: int) -> list[GenerationResult]:
    """:meth:`Context.generate_batch`: the prompts, each its own sequence, then one batch per step
    with the next token of every sequence still going (``room``: cells per sequence)."""
    runs = [_Run(ctx, p.stop, None, p.cancel, p.max_tokens, p.logprobs) for p in plans]
    samplers: list[Any] = []
    n_batch = int(ctx.llama.llama_n_batch(ctx.handle))
    batch = ctx.llama.llama_batch_init(max(n_batch, len(plans)), 0, 1)
    memory = ctx.llama.llama_get_memory(ctx.handle)
    ctx._native.active_thread = threading.get_ident()
    try:
        for plan in plans:
            samplers.append(ctx._build_sampler(cast(Sampling, plan.sampling), plan.grammar))
        ctx.llama.llama_memory_clear(memory, True)
        ctx._history = []
        going: dict[int, tuple[int, int]] = {}  # sequence -> (next token to decode, its pos)
        for seq, plan in enumerate(plans):
            row = _decode_prompt(ctx, batch, plan.tokens, seq, n_batch, runs[seq])
            if row is not None and _take(
                ctx, runs[seq], samplers[seq], row, len(plan.tokens), room
            ):
                going[seq] = (runs[seq].tokens[-1], len(plan.tokens))
        while going:
            _decode_step(ctx, batch, going)
            for row, (seq, (_, pos)) in enumerate(list(going.items())):
                if _take(ctx, runs[seq], samplers[seq], row, pos + 1, room):
                    going[seq] = (runs[seq].tokens[-1], pos + 1)
                else:
                    del going[seq]
                    ctx.llama.llama_memory_seq_rm(memory, seq, -1, -1)
        seeds = [int(ctx.llama.llama_sampler_get_seed(sampler)) for sampler in samplers]
    finally:
        ctx._native.active_thread = None
        ctx.llama.llama_batch_free(batch)
        for sampler in samplers:
            ctx.llama.llama_sampler_free(sampler)
    for run in runs:
        run.end_text()
    return [
        run.result(False, len(plan.tokens), seed)
        for run, plan, seed in zip(runs, plans, seeds, strict=True)
    ]


def _decode_prompt(
    ctx: Context, batch: Any, tokens: list[int], seq: int, n_batch: int, run: _Run
) -> int | None:
    """``tokens`` decoded into sequence ``seq``; the batch row holding the last token's
    logits (None: cancelled)."""
    last = 0
    for start in range(0, len(tokens), n_batch):
        if run.cancelled():
            return None
        chunk = tokens[start : start + n_batch]
        _fill_batch(batch, chunk, start, seq=seq)
        status = ctx._decode(batch)
        if status != 0:
            if run.cancelled():
                return None
            raise LlamaRuntimeError(f"llama_decode failed ({status}) on prompt {seq}")
        last = len(chunk) - 1
    run.prompt_done()
    return last


def _decode_step(ctx: Context, batch: Any, going: dict[int, tuple[int, int]]) -> None:
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
    status = ctx._decode(batch)
    if status != 0:
        raise LlamaRuntimeError(f"llama_decode failed ({status}) on a batch of {n} sequences")


def _take(ctx: Context, run: _Run, sampler: Any, row: int, next_pos: int, room: int) -> bool:
    """Sample a sequence's next token from batch row ``row`` and record it; False when the
    sequence ends (``next_pos``: where that token would be decoded, in ``room`` cells)."""
    if run.cancelled():
        return False
    token = int(ctx.llama.llama_sampler_sample(sampler, ctx.handle, row))
    run.steps += 1
    if not run.emit(token, ctx._logprob(run, token, row)):
        return False
    if next_pos + 1 > room:
        run.finish(FinishReason.CONTEXT_FULL)
        return False
    return True
