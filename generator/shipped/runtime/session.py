"""The native side of one :class:`Context`'s generations: its llama.cpp handle, the tokens its
memory holds for each sequence, prompt decoding in batches (the one chunk loop every decode loop
uses), log-probabilities of a decoded row, prompt-prefix reuse and per-sequence state.

Prefix reuse keeps the longest common prefix of what a sequence holds and its next prompt, in
the target's memory and in the speculative sidecar's (its draft or MTP context, trimmed to the
same position by ``llama_mtp_seq_rm``; the n-gram strategies start again from the whole prompt at
``llama_mtp_begin``). Memory that cannot be cut at an arbitrary position (the recurrent layers of
hybrid models such as qwen35, a sliding-window cache without ``swa_full``) is restored from a
checkpoint instead: the part of the state llama.cpp cannot roll back
(``LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY``), saved where a prompt and where a reply ends, as
llama.cpp's server does with its context checkpoints. Where no checkpoint covers the common
prefix the prompt is decoded in full, and the result's metrics say so (:class:`PromptReuse`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from .. import constants
from .._ffi import SYMBOL_ERRORS
from ..errors import LlamaRuntimeError
from ..lifetimes import NativeObject
from ..outputs import TokenLogprob, token_logprob
from .media import media_start, pieces
from .results import PromptReuse

if TYPE_CHECKING:
    from .media import MediaPrompt
    from .model import Model
    from .results import Cancellation
    from .speculative import Sidecar

# Checkpoints kept per context (the newest; two are taken per generation).
MAX_CHECKPOINTS: Final = 8


@dataclass(frozen=True)
class _Checkpoint:
    """The partial state of a sequence after its first ``n_tokens`` tokens: the target's and,
    with a draft-context strategy, the sidecar's draft context's (empty: none)."""

    n_tokens: int
    target: bytes
    draft: bytes


@dataclass
class SequenceMemory:
    """What one sequence of the context holds: its tokens from position 0, and checkpoints of
    its partial state (the newest last)."""

    tokens: list[int] = field(default_factory=list)
    checkpoints: list[_Checkpoint] = field(default_factory=list)
    # media it holds: (first index, positions, KV cells beyond the positions)
    spans: list[tuple[int, int, int]] = field(default_factory=list)
    # the first position computed with the context's LoRA adapters (an aLoRA's boundary;
    # 0 without one): the positions before it were computed without them
    lora_from: int = 0

    def forget(self, keep: int = 0) -> None:
        del self.tokens[keep:]
        self.checkpoints = [c for c in self.checkpoints if c.n_tokens <= keep]
        self.spans = [s for s in self.spans if s[0] < keep]
        if keep == 0:
            self.lora_from = 0

    def reusable(self, common: int, lora_from: int) -> int:
        """How much of a common prefix of ``common`` tokens a generation whose adapters apply
        from ``lora_from`` can keep: all of it where the held positions were computed the same
        way, else only the positions computed without adapters on both sides."""
        if lora_from == self.lora_from:
            return common
        return min(common, lora_from, self.lora_from)

    @property
    def extra_cells(self) -> int:
        """KV cells its media fill beyond the positions they advance (see ``media.py``)."""
        return sum(extra for _, _, extra in self.spans)

    def cut_point(self, n: int) -> int:
        """``n``, or the first index of the media item ``n`` would cut through."""
        return media_start(n, ((first, n_pos) for first, n_pos, _ in self.spans))


def fill_batch(
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


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class NativeSession:
    """What a context's memory holds and the calls that change it; every decode loop goes
    through one (see the module's text)."""

    def __init__(self, model: Model, native: NativeObject, params: Any) -> None:
        """``params``: the ``llama_context_params`` the context was created with."""
        self.llama = model.llama
        self.ffi: Any = model.ffi
        self.native = native
        self.n_vocab = model.n_vocab
        handle, llama = model.handle, self.llama
        n_seq = int(llama.llama_n_seq_max(native.pointer))
        self.sequences = [SequenceMemory() for _ in range(n_seq)]
        try:  # the cells one sequence can hold
            self.room = int(llama.llama_n_ctx_seq(native.pointer))
        except SYMBOL_ERRORS:  # releases before llama_n_ctx_seq
            self.room = int(llama.llama_n_ctx(native.pointer)) // n_seq
        # llama.cpp keeps a KV stream per sequence unless kv_unified (None: a release before
        # streams); a saved state loads only where the count is the same
        unified = getattr(params, "kv_unified", None)
        self.kv_streams = None if unified is None else 1 if unified else n_seq
        swa_full = bool(getattr(params, "swa_full", True))
        try:
            recurrent = bool(llama.llama_model_is_recurrent(handle)) or bool(
                llama.llama_model_is_hybrid(handle)
            )
            n_swa = int(llama.llama_model_n_swa(handle))
        except SYMBOL_ERRORS:  # a release before these queries: memory that trims anywhere
            recurrent, n_swa = False, 0
        self.n_swa = 0 if swa_full else n_swa  # > 0: a sliding-window cache that forgets
        self.partial_flag: int | None = getattr(
            constants, "LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY", None
        )
        self.needs_checkpoints = recurrent or self.n_swa > 0
        self.cancel: Cancellation | None = None  # the running generation's
        # C keeps this pointer while it is registered, so it lives as long as the session (peers'
        # failure: a collected callback called from C). It is registered only while a generation
        # with a Cancellation runs: llama.cpp calls it many times per token, which costs time.
        self.abort_callback: Any = self.ffi.callback("bool(void *)", self._should_abort)

    def _should_abort(self, _data: Any) -> bool:
        cancel = self.cancel
        return cancel is not None and cancel.cancelled

    @property
    def handle(self) -> Any:
        return self.native.pointer

    @property
    def n_ctx(self) -> int:
        return int(self.llama.llama_n_ctx(self.handle))

    @property
    def history(self) -> list[int]:
        """The tokens sequence 0 holds (what :meth:`Context.generate` continues)."""
        return self.sequences[0].tokens

    def memory(self) -> Any:
        return self.llama.llama_get_memory(self.handle)

    def decode(self, batch: Any) -> int:
        return int(self.llama.llama_decode(self.handle, batch))

    def decode_prompt(
        self,
        batch: Any,
        tokens: Sequence[int],
        start: int,
        cancelled: Callable[[], bool],
        *,
        seq: int = 0,
        mirror: Callable[[Any], None] | None = None,
        media: MediaPrompt | None = None,
        mirror_rows: Callable[[Any], None] | None = None,
    ) -> int | None:
        """``tokens[start:]`` at positions ``start``.. of sequence ``seq``, one ``n_batch`` chunk
        per ``llama_decode`` (each mirrored into the sidecar when ``mirror``), and the media
        spans of ``media`` through its projector (each batch of rows to ``mirror_rows``); the
        batch row of the last token's outputs, or None when ``cancelled()`` says the generation
        was cancelled. The sequence's tokens follow."""
        n_batch = int(self.llama.llama_n_batch(self.handle))
        spans = media.spans if media is not None else {}
        held = self.sequences[seq]
        last = 0
        for begin, end, span in pieces(tokens, start, spans, n_batch):
            if cancelled():
                return None
            if span is not None:
                assert media is not None
                try:
                    media.projector.decode(self.handle, span, begin, seq, mirror_rows)
                except LlamaRuntimeError:
                    if cancelled():  # llama.cpp's decode stopped by the abort callback
                        return None
                    raise
                held.spans.append((begin, span.n_pos, span.extra_cells))
                held.tokens.extend(tokens[begin:end])
                continue
            chunk = tokens[begin:end]
            fill_batch(batch, chunk, begin, seq=seq)
            status = self.decode(batch)
            if status != 0:
                if cancelled():
                    return None
                raise LlamaRuntimeError(f"llama_decode failed ({status}) on prompt {seq}")
            if mirror is not None:
                mirror(batch)
            self.sequences[seq].tokens.extend(chunk)
            last = len(chunk) - 1
        return last

    def logprob(self, top: int | None, token: int, row: int) -> TokenLogprob | None:
        """``token``'s log-probability and its ``top`` most likely alternatives from the logits
        of batch row ``row`` (None: not asked for)."""
        if top is None:
            return None
        logits = self.llama.llama_get_logits_ith(self.handle, row)
        return token_logprob(self.ffi, logits, self.n_vocab, token, top)

    # ---- prefix reuse ---------------------------------------------------------------------

    def reuse(
        self,
        tokens: Sequence[int],
        limit: int,
        wanted: bool,
        sidecar: Sidecar | None,
        seq: int = 0,
        lora_from: int = 0,
    ) -> tuple[int, PromptReuse]:
        """Keep the longest common prefix (at most ``limit`` tokens) of what sequence ``seq``
        holds and ``tokens``, in the target and the sidecar, drop the rest; how many are kept
        and how. ``lora_from``: where this generation's LoRA adapters apply from (an aLoRA)."""
        if not wanted:
            self.clear(sidecar, seq)
            return 0, PromptReuse.OFF
        held = self.sequences[seq]
        common = min(common_prefix(held.tokens, tokens), limit)
        common = held.cut_point(held.reusable(common, lora_from))
        if common == 0:
            self.clear(sidecar, seq)
            return 0, PromptReuse.NONE
        if self._trim(common, sidecar, seq):
            return common, PromptReuse.KEPT
        for checkpoint in reversed(held.checkpoints):
            if 0 < checkpoint.n_tokens <= common:
                n = checkpoint.n_tokens
                if self._restore(checkpoint, sidecar, seq) and self._trim(n, sidecar, seq):
                    return n, PromptReuse.CHECKPOINT
                break
        self.clear(sidecar, seq)
        return 0, PromptReuse.FULL

    def _trim(self, keep: int, sidecar: Sidecar | None, seq: int) -> bool:
        """Cut sequence ``seq`` (and the sidecar's) after ``keep`` tokens; False when llama.cpp
        refuses, or when a sliding-window cache no longer holds the window position ``keep``
        attends to."""
        if self.n_swa > 0:
            pos_min = int(self.llama.llama_memory_seq_pos_min(self.memory(), seq))
            if pos_min > max(0, keep - self.n_swa):
                return False
        if sidecar is not None:
            done = sidecar.seq_rm(keep, seq)
        else:
            done = bool(self.llama.llama_memory_seq_rm(self.memory(), seq, keep, -1))
        if done:
            self.sequences[seq].forget(keep)
        return done

    def clear(self, sidecar: Sidecar | None, seq: int = 0) -> None:
        """Empty sequence ``seq`` in the target and the sidecar."""
        if sidecar is not None:
            status = sidecar.wrapper.llama_mtp_seq_rm(sidecar.handle, seq, 0, -1)
            sidecar.check(status, "seq_rm")
        else:
            self.llama.llama_memory_seq_rm(self.memory(), seq, 0, -1)
        self.sequences[seq].forget()

    def clear_all(self) -> None:
        """Empty every sequence (a context without a sidecar)."""
        self.llama.llama_memory_clear(self.memory(), True)
        self.forget_held()

    def forget_held(self) -> None:
        """Every sequence's tokens and checkpoints forgotten, the memory left as it is: the next
        generation decodes its prompt again (its reuse finds nothing in common and clears it)."""
        for held in self.sequences:
            held.forget()

    def checkpoint(self, sidecar: Sidecar | None, seq: int = 0) -> None:
        """Save the partial state after what sequence ``seq`` holds (where it cannot be trimmed
        back to)."""
        held = self.sequences[seq]
        n = len(held.tokens)
        if not self.needs_checkpoints or self.partial_flag is None or n == 0:
            return
        if held.checkpoints and held.checkpoints[-1].n_tokens == n:
            return
        draft = sidecar.draft_context() if sidecar is not None else self.ffi.NULL
        flag = self.partial_flag
        try:
            target = self.seq_state(self.handle, seq, flag)
            drafted = self.seq_state(draft, seq, flag) if draft != self.ffi.NULL else b""
        except SYMBOL_ERRORS:  # a release without llama_state_seq_*_ext: no checkpoints
            self.partial_flag = None
            return
        held.checkpoints.append(_Checkpoint(n, target, drafted))
        del held.checkpoints[:-MAX_CHECKPOINTS]

    def seq_state(self, ctx: Any, seq: int, flags: int = 0) -> bytes:
        """Sequence ``seq``'s state in context ``ctx`` (``flags``: ``llama_state_seq_flags``)."""
        llama = self.llama
        if flags:
            size = int(llama.llama_state_seq_get_size_ext(ctx, seq, flags))
            buf = self.ffi.new("uint8_t[]", max(size, 1))
            written = int(llama.llama_state_seq_get_data_ext(ctx, buf, size, seq, flags))
        else:
            size = int(llama.llama_state_seq_get_size(ctx, seq))
            buf = self.ffi.new("uint8_t[]", max(size, 1))
            written = int(llama.llama_state_seq_get_data(ctx, buf, size, seq))
        return bytes(self.ffi.buffer(buf, written))

    def restore_seq_state(self, ctx: Any, data: bytes, seq: int, flags: int = 0) -> bool:
        """Sequence ``seq`` of context ``ctx`` from :meth:`seq_state`'s bytes; False when
        llama.cpp rejects them."""
        if ctx == self.ffi.NULL:
            return False
        src = self.ffi.from_buffer(data)
        if flags:
            read = int(self.llama.llama_state_seq_set_data_ext(ctx, src, len(data), seq, flags))
        else:
            read = int(self.llama.llama_state_seq_set_data(ctx, src, len(data), seq))
        return read != 0

    def full_state(self, ctx: Any) -> bytes:
        """Everything llama.cpp keeps of context ``ctx`` (every sequence, its outputs)."""
        size = int(self.llama.llama_state_get_size(ctx))
        buf = self.ffi.new("uint8_t[]", max(size, 1))
        written = int(self.llama.llama_state_get_data(ctx, buf, size))
        return bytes(self.ffi.buffer(buf, written))

    def restore_full_state(self, ctx: Any, data: bytes) -> bool:
        """Context ``ctx`` as :meth:`full_state` saw it; False when llama.cpp rejects it."""
        if ctx == self.ffi.NULL:
            return False
        read = int(self.llama.llama_state_set_data(ctx, self.ffi.from_buffer(data), len(data)))
        return read == len(data)

    def _restore(self, checkpoint: _Checkpoint, sidecar: Sidecar | None, seq: int) -> bool:
        parts = [(self.handle, checkpoint.target)]
        if checkpoint.draft:
            if sidecar is None:
                return False
            parts.append((sidecar.draft_context(), checkpoint.draft))
        flag = self.partial_flag or 0
        return all(self.restore_seq_state(ctx, data, seq, flag) for ctx, data in parts)
