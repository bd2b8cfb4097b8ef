"""Tiny EAGLE-3, DFlash and DSpark draft GGUFs matched to the synthetic qwen35 targets of
:mod:`testmodel`.

These draft kinds read the *target's* hidden states: EAGLE-3 the inputs of three target layers
(through an ``fc`` of three times the target's width), DFlash and DSpark the inputs of the layers
they list (injected into the draft's KV cache), and all three may share the target's token
embeddings and output head (llama.cpp's draft context then needs ``ctx_other``). The weights here
are designed, not trained, so that each draft predicts what the target does (``t -> t + 1``)
from the token it is given, and ignores the target's features by construction: the features
still travel (capture, widths, layer ids), which is what a binding has to get right.

Kinds (:data:`DRAFT_KINDS`; ``-partial`` ones disagree for every token ``t`` with
``t % disagree_every == 0`` and predict ``t + 2`` there, so acceptance is neither 0 nor 1):

``eagle3``, ``eagle3-partial``
    One decoder block (EAGLE-3 allows exactly one). Queries and keys are ``5 * e[token]``, so
    each draft row attends (almost) only to rows of its own token and reads ``e[token]`` back;
    the hidden-state half of the block's input is scaled by a zero norm. The output head and
    (for ``eagle3``) the token embeddings are the target's, through ``ctx_other``; the partial
    kind carries its own embeddings with the disagreeing rows swapped.
``dflash``, ``dflash-partial``
    One layer, ``block_size`` 2 (one drafted token per step; upstream clamps ``n_max`` to
    ``block_size - 1``), non-causal attention. ``fc`` is zero, so the injected target rows add
    keys and values of 0; queries and keys are zero, so attention is uniform, and the value
    projection removes the mask token's direction: the mask row's attention output is the
    anchor's embedding divided by the number of visible rows, which ``post_attention_norm``
    scales back up, so the mask row predicts ``anchor + 1``. The RMS epsilon is ``1e-12`` so
    that this holds past 20000 positions. The partial kind owns token embeddings (disagreeing
    rows swapped; the mask token's row kept) and an output head (b11312 ties a missing head to
    a draft's own embeddings, b11549 takes the target's: writing both keeps the trees equal).
``dspark``, ``dspark-partial``
    The DFlash layout with ``block_size`` 4 and a Markov head: ``markov_w1`` holds ``e`` and
    ``markov_w2`` the target's head rows, so the in-graph bigram chain predicts ``prev + 1`` at
    every block position; ``output_norm`` is zero, so the base logits are 0 and the chain alone
    decides: a whole block of 4 is right. The partial kind's ``markov_w1`` has the disagreeing
    rows swapped. No confidence head (``dflash.has_confidence_head`` false): ``p_min`` must be 0.

Facts about the loader and upstream's drivers (llama.cpp b11312 and b11549; see
``design/issue-52-eagle3-dflash-dspark.md`` for every citation):

* ``general.architecture`` is ``eagle3`` or ``dflash``; DSpark is a ``dflash`` file that has
  ``markov_w1.weight`` (upstream's own autodetection rule). The loader refuses any tensor it
  does not expect ("wrong number of tensors").
* ``<arch>.target_layers`` (int32 array) is required. EAGLE-3 needs exactly 3 ids and
  ``eagle3.target_hidden_size`` (the target's width); an id may equal the target's layer count
  (then the target's final hidden state is read). DFlash's ids must be below it (qwen35 exports
  the inputs of its trunk layers only).
* DFlash and DSpark need ``tokenizer.ggml.mask_token_id`` (upstream aborts without one) and a
  draft width equal to the target's; all three need the target's vocabulary, token for token.
* Attention key and value lengths must be equal; EAGLE-3's projections take ``2 * n_embd``
  inputs (token embedding and hidden state concatenated); DFlash needs per-head Q/K norms.

Files are deterministic: the same arguments give identical bytes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import gguf
import numpy as np

from generator.errors import UsageError
from generator.testmodel import (
    FloatArray,
    ModelSizes,
    Tokenizer,
    add_tokenizer,
    partial_mtp_embeddings,
    sizes_from,
    token_embeddings,
)

DRAFT_KINDS: Final = (
    "eagle3",
    "eagle3-partial",
    "dflash",
    "dflash-partial",
    "dspark",
    "dspark-partial",
)
# The strategy (llama_mtp.h's name) each draft kind is for.
STRATEGY_OF_KIND: Final = {kind: "draft-" + kind.removesuffix("-partial") for kind in DRAFT_KINDS}
EAGLE3_LAYERS: Final = (0, 1, 2)  # 2 = the target's layer count: its final hidden state
DFLASH_LAYERS: Final = (0, 1)
MASK_TOKEN: Final = 1
BLOCK_SIZE: Final = {"dflash": 2, "dspark": 4}
_HEADS: Final = 2
_SHARP: Final = 5.0  # EAGLE-3's query/key scale: attention to the row's own token
_POST_ATTENTION_SCALE: Final = 4.0  # DFlash: the anchor's share against the mask embedding


def write_test_draft(
    path: Path,
    kind: str,
    seed: int = 0,
    *,
    vocabulary: str = "test",
    target_layers: Sequence[int] | None = None,
    draft_embd: int | None = None,
    mask_token: int | None = MASK_TOKEN,
    **target_sizes: int | str,
) -> Path:
    """Write a draft of ``kind`` (one of DRAFT_KINDS) for the test target of ``seed``,
    ``vocabulary`` and ``target_sizes`` (ModelSizes fields: the target's) to ``path``.

    ``target_layers``, ``draft_embd`` (the draft's width; default the target's) and ``mask_token``
    (None: no mask token) exist to make drafts a binding must refuse; their defaults make the
    draft that matches.
    """
    if kind not in DRAFT_KINDS:
        raise UsageError(
            f"unknown test draft kind {kind!r}; expected one of {', '.join(DRAFT_KINDS)}"
        )
    sizes = sizes_from(**target_sizes)
    tokenizer = Tokenizer(vocabulary)
    tokenizer.validate(sizes.vocab)
    family = kind.removesuffix("-partial")
    layers = tuple(target_layers) if target_layers is not None else (
        EAGLE3_LAYERS if family == "eagle3" else DFLASH_LAYERS
    )  # fmt: skip
    _check_options(sizes, layers, draft_embd, mask_token)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial_path = path.with_name(path.name + ".partial")
    embd = draft_embd if draft_embd is not None else sizes.embd
    spec = _Draft(kind, seed, sizes, layers, embd, mask_token)
    try:
        writer = gguf.GGUFWriter(partial_path, "eagle3" if family == "eagle3" else "dflash")
        spec.write(writer, tokenizer)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(partial_path, path)
    finally:
        partial_path.unlink(missing_ok=True)
    return path


def _check_options(
    sizes: ModelSizes, layers: tuple[int, ...], draft_embd: int | None, mask_token: int | None
) -> None:
    """Raise UsageError for options no GGUF file or no llama.cpp model could hold (the layer
    ids may be any int32: ids out of the target's range make a draft a binding must refuse)."""
    if any(not -(2**31) <= layer < 2**31 for layer in layers):
        raise UsageError(f"target layer ids must be int32 values, got {list(layers)}")
    if draft_embd is not None and (draft_embd < 1 or draft_embd % (2 * _HEADS) != 0):
        raise UsageError(
            f"draft_embd must be a positive multiple of {2 * _HEADS} ({_HEADS} heads of an even "
            f"size), got {draft_embd}"
        )
    if mask_token is None:
        return
    if not 0 <= mask_token < sizes.vocab:
        raise UsageError(f"mask token {mask_token} is outside the vocabulary [0, {sizes.vocab})")
    if mask_token % sizes.disagree_every == 0:
        raise UsageError(f"mask token {mask_token} must not be a disagreeing token")


class _Draft:
    """One draft's keys and tensors (numpy shapes: rows, cols = ggml {cols, rows})."""

    def __init__(
        self,
        kind: str,
        seed: int,
        sizes: ModelSizes,
        layers: tuple[int, ...],
        embd: int,
        mask_token: int | None,
    ) -> None:
        self.kind = kind
        self.family = kind.removesuffix("-partial")
        self.partial = kind.endswith("-partial")
        self.sizes = sizes
        self.layers = layers
        self.embd = embd
        self.mask_token = mask_token
        target = token_embeddings(sizes, seed)
        rng = np.random.default_rng([seed, embd])
        # A draft of another width than the target's cannot share its rows: random ones.
        self.e: FloatArray = target if embd == sizes.embd else (
            rng.standard_normal((sizes.vocab, embd), dtype=np.float32)
        )  # fmt: skip
        self.head: FloatArray = np.roll(self.e, 1, axis=0)
        self.tensors: dict[str, FloatArray] = {}

    def write(self, writer: gguf.GGUFWriter, tokenizer: Tokenizer) -> None:
        arch = "eagle3" if self.family == "eagle3" else "dflash"
        head_dim = self.embd // _HEADS
        writer.add_name(f"llama-bindgen test draft ({self.kind})")
        writer.add_context_length(self.sizes.context)
        writer.add_embedding_length(self.embd)
        writer.add_block_count(1)
        writer.add_feed_forward_length(self.embd)
        writer.add_head_count(_HEADS)
        writer.add_head_count_kv(_HEADS)
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
        writer.add_rope_dimension_count(head_dim)
        writer.add_rope_freq_base(10000.0)
        writer.add_file_type(gguf.LlamaFileType.ALL_F32)
        writer.add_array(f"{arch}.target_layers", list(self.layers))
        add_tokenizer(writer, tokenizer, self.sizes.vocab)
        if self.family == "eagle3":
            writer.add_layer_norm_rms_eps(1e-6)
            writer.add_uint32("eagle3.target_hidden_size", self.sizes.embd)
            writer.add_bool("eagle3.norm_before_residual", True)
            self._eagle3()
        else:
            writer.add_layer_norm_rms_eps(1e-12)
            writer.add_uint32("dflash.block_size", BLOCK_SIZE[self.family])
            if self.mask_token is not None:
                writer.add_mask_token_id(self.mask_token)
            if self.family == "dspark":
                writer.add_bool("dflash.has_confidence_head", False)
            self._dflash()
        for name in sorted(self.tensors):
            writer.add_tensor(name, self.tensors[name].astype(np.float32))

    def _eagle3(self) -> None:
        n = self.embd
        eye = np.eye(n, dtype=np.float32)
        zero = np.zeros((n, n), dtype=np.float32)
        t = self.tensors
        t["fc.weight"] = np.zeros((n, len(self.layers) * self.sizes.embd), dtype=np.float32)
        t["output_norm.weight"] = np.ones(n, dtype=np.float32)
        t["blk.0.attn_norm.weight"] = np.ones(n, dtype=np.float32)
        t["blk.0.attn_norm_2.weight"] = np.zeros(n, dtype=np.float32)
        t["blk.0.attn_q.weight"] = np.concatenate([_SHARP * eye, zero], axis=1)
        t["blk.0.attn_k.weight"] = np.concatenate([_SHARP * eye, zero], axis=1)
        t["blk.0.attn_v.weight"] = np.concatenate([eye, zero], axis=1)
        t["blk.0.attn_output.weight"] = eye
        self._zero_ffn()
        if self.partial:
            t["token_embd.weight"] = partial_mtp_embeddings(self.e, self.sizes.disagree_every)

    def _dflash(self) -> None:
        n = self.embd
        t = self.tensors
        mask = self.mask_token if self.mask_token is not None else MASK_TOKEN
        unit = self.e[mask] / np.linalg.norm(self.e[mask])
        t["fc.weight"] = np.zeros((n, len(self.layers) * n), dtype=np.float32)
        t["enc.output_norm.weight"] = np.ones(n, dtype=np.float32)
        base_logits = 0.0 if self.family == "dspark" else 1.0
        t["output_norm.weight"] = np.full(n, base_logits, dtype=np.float32)
        t["blk.0.attn_norm.weight"] = np.ones(n, dtype=np.float32)
        t["blk.0.attn_q.weight"] = np.zeros((n, n), dtype=np.float32)
        t["blk.0.attn_k.weight"] = np.zeros((n, n), dtype=np.float32)
        t["blk.0.attn_v.weight"] = np.eye(n, dtype=np.float32) - np.outer(unit, unit)
        t["blk.0.attn_output.weight"] = np.eye(n, dtype=np.float32)
        t["blk.0.attn_q_norm.weight"] = np.ones(n // _HEADS, dtype=np.float32)
        t["blk.0.attn_k_norm.weight"] = np.ones(n // _HEADS, dtype=np.float32)
        t["blk.0.post_attention_norm.weight"] = np.full(n, _POST_ATTENTION_SCALE, dtype=np.float32)
        self._zero_ffn()
        swapped = partial_mtp_embeddings(self.e, self.sizes.disagree_every)
        if self.family == "dspark":
            t["markov_w1.weight"] = swapped if self.partial else self.e
            t["markov_w2.weight"] = self.head
        elif self.partial:
            t["token_embd.weight"] = swapped
            t["output.weight"] = self.head

    def _zero_ffn(self) -> None:
        n = self.embd
        self.tensors["blk.0.ffn_norm.weight"] = np.ones(n, dtype=np.float32)
        for name in ("ffn_gate", "ffn_up", "ffn_down"):
            self.tensors[f"blk.0.{name}.weight"] = np.zeros((n, n), dtype=np.float32)
