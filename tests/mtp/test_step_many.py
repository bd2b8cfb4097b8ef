"""``llama_mtp_step_many`` called directly (its use by the slots is test_slots.py's and
test_speculation_composes.py's: every mode's replies equal alone): every sequence's step in one
call, each item with its own status; an item refused (its sequence twice, out of range, at a
wrong position, a sampler that selects nothing, an old struct) takes no part and leaves its
sequence's cells as they were, while the others step."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.mtp.test_speculation_composes import context_factory

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

PROMPTS = [[3, 4, 5, 6], [10, 11, 12]]


@contextmanager
def _two_sequences(runtime: Any, libs: Any, models: dict[str, Path], mode: str) -> Iterator[Any]:
    """A context of two sequences after a generation in each (their sidecar between steps)."""
    with context_factory(runtime, libs, models, mode, n_seq=2) as make:
        ctx = make()
        ctx.results = ctx.generate_batch(PROMPTS, max_tokens=3)
        yield ctx


def _items(ctx: Any, parts: list[tuple[int, Any, int, int]]) -> Any:
    """(seq, sampler, id_last, n_past) per item, each with a buffer of 8 tokens."""
    ffi = ctx.ffi
    items = ffi.new("struct llama_mtp_step_item[]", len(parts))
    buffers = []
    for item, (seq, sampler, id_last, n_past) in zip(items, parts, strict=True):
        buffers.append(ffi.new("llama_token[]", 8))
        item.struct_size = ffi.sizeof("struct llama_mtp_step_item")
        item.seq_id, item.smpl, item.id_last, item.n_past = seq, sampler, id_last, n_past
        item.tokens, item.capacity = buffers[-1], 8
    return items, buffers


def _next(ctx: Any, seq: int) -> tuple[int, int]:
    """The step a sequence is at: (id_last, n_past): its last token, sampled and not decoded,
    after what it holds."""
    return ctx.results[seq].tokens[-1], len(ctx._session.sequences[seq].tokens)


def _name(ctx: Any, status: int) -> str:
    """A status's name: ``ok``, ``invalid_argument``, ..."""
    name = ctx.ffi.typeof("enum llama_mtp_status").elements[status]
    return str(name).removeprefix("LLAMA_MTP_STATUS_").lower()


def _pos_max(ctx: Any, seq: int) -> int:
    return int(ctx.llama.llama_memory_seq_pos_max(ctx.llama.llama_get_memory(ctx.handle), seq))


@pytest.mark.parametrize("mode", ["ngram-mod", "draft-mtp", "ngram-mod+draft-mtp"])
def test_refused_items_are_statuses_and_the_others_step(
    runtime: Any, libs: Any, models: dict[str, Path], mode: str
) -> None:
    with _two_sequences(runtime, libs, models, mode) as ctx:
        sidecar, llama = ctx._sidecar, ctx.llama
        assert sidecar.steps_many
        greedy = llama.llama_sampler_init_greedy()
        empty = llama.llama_sampler_chain_init(llama.llama_sampler_chain_default_params())
        try:
            (last0, past0), (last1, past1) = _next(ctx, 0), _next(ctx, 1)
            before1 = _pos_max(ctx, 1)
            items, _ = _items(ctx, [
                (0, greedy, last0, past0),        # steps
                (0, greedy, last0, past0),        # its sequence twice
                (1, greedy, last1, past1 - 2),    # a wrong position
                (5, greedy, last1, past1),        # no such sequence
                (1, empty, last1, past1),         # a sampler that selects nothing
            ])  # fmt: skip
            status = sidecar.wrapper.llama_mtp_step_many(sidecar.handle, items, 5)
            statuses = [_name(ctx, int(item.status)) for item in items]
            assert statuses == [
                "ok", "invalid_argument", "bad_state", "invalid_argument", "invalid_argument",
            ]  # fmt: skip
            assert _name(ctx, int(status)) == "invalid_argument"
            assert "item 1" in sidecar.error() and "earlier item" in sidecar.error()
            assert items[0].n_tokens >= 1 and items[0].first_row == 0
            refused = [items[i] for i in range(1, 5)]
            assert all(item.n_tokens == 0 and item.first_row == -1 for item in refused)
            assert _pos_max(ctx, 1) == before1  # refused: sequence 1 kept its cells
            assert _pos_max(ctx, 0) == past0 + items[0].n_tokens - 1
        finally:
            llama.llama_sampler_free(greedy)
            llama.llama_sampler_free(empty)


def test_both_sequences_in_one_call_and_an_old_struct_refused(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    with _two_sequences(runtime, libs, models, "draft-mtp") as ctx:
        sidecar, llama = ctx._sidecar, ctx.llama
        greedy = llama.llama_sampler_init_greedy()
        try:
            parts = [(seq, greedy, *_next(ctx, seq)) for seq in (1, 0)]
            items, _ = _items(ctx, parts)
            items[0].struct_size = 8  # older than this library: refused whole
            status = sidecar.wrapper.llama_mtp_step_many(sidecar.handle, items, 2)
            assert _name(ctx, int(status)) == "unsupported_version"
            items, _ = _items(ctx, parts)
            status = sidecar.wrapper.llama_mtp_step_many(sidecar.handle, items, 2)
            assert _name(ctx, int(status)) == "ok"
            # one decode: item 0's rows first, then item 1's
            assert items[0].first_row == 0
            assert items[1].first_row == 1 + items[0].n_drafted
            assert all(item.n_drafted > 0 and item.strategy == 0 for item in items)
            for item in items:
                assert 1 <= item.n_tokens <= item.n_drafted + 1
        finally:
            llama.llama_sampler_free(greedy)
