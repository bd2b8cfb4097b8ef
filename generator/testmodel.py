"""Tiny synthetic qwen35 GGUF models for testing and benchmarking multi-token prediction (MTP).

The weights are random but shaped so that the model's behaviour is known in advance:

* The trunk predicts ``tok -> tok + 1`` (cyclic over the vocabulary). Token embeddings are random
  vectors ``e[t]`` of length ``sqrt(embd)`` (so their RMS is 1); the output head's row ``j`` is
  ``e[j - 1]``; every other matrix is small, so the residual stream stays close to the input
  embedding and the head picks the next token id by a wide margin.
* The NextN (MTP) block's ``eh_proj`` passes the token-embedding half of its input through, so the
  MTP head predicts the same rule from the token it is given.

Kinds:

``agree``
    One NextN block that reuses the trunk's output head: its drafts are accepted almost always.
``partial``
    One NextN block with its own token embeddings (``nextn.embed_tokens``) in which every token
    ``t`` with ``t % disagree_every == 0`` has the embedding of ``t + 1``, so the MTP head predicts
    ``t + 2`` for it: drafts are accepted only sometimes, while greedy output stays the trunk's.
``plain``
    No NextN block: the same trunk (for the same seed and sizes), which an MTP context refuses.
    It shares the vocabulary of the others, so it also serves as a draft model (draft-simple)
    whose drafts are always accepted.
``draft``
    A draft model for draft-simple: no NextN block, and token embeddings in which every token
    ``t`` with ``t % disagree_every == 0`` has the embedding of ``t + 1``, so it predicts ``t + 2``
    for those: its drafts are accepted only sometimes. Give it fewer ``layers`` to make it
    cheaper than the target.

Vocabularies (``vocabulary=``, any kind):

``test``
    llama.cpp's dummy "test" tokenizer: a token's text is its id in hex, so every piece is ASCII.
``bytes``
    A llama (SentencePiece) vocabulary of ``<unk>``, ``<s>``, ``</s>`` and the 256 byte-fallback
    tokens (type BYTE), any further ids unused. The bytes follow the ASCII ones in id order, then
    the bytes of :data:`SPLIT_TEXT` one character after another, then the rest: as the trunk
    predicts ``tok -> tok + 1``, greedy generation after ``~`` spells those multi-byte characters
    one byte per token. Any text tokenizes (byte fallback).

``chat_template=`` writes ``tokenizer.chat_template`` (none by default).

Files are deterministic: the same arguments give identical bytes. Each tensor draws its values
from a generator seeded by ``(seed, tensor name)``, so the trunk of all three kinds is identical
for one seed and set of sizes.
"""

from __future__ import annotations

import dataclasses
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import gguf
import numpy as np
import numpy.typing as npt

from generator.errors import UsageError

ARCH: Final = "qwen35"
KINDS: Final = ("agree", "partial", "plain", "draft")
VOCABULARIES: Final = ("test", "bytes")
# Multi-byte characters whose bytes (all distinct) follow each other in the ``bytes`` vocabulary.
SPLIT_TEXT: Final = "\u00e9\u20ac\U0001f600\u0436\u4e2d"
_BYTES_SPECIALS: Final = ("<unk>", "<s>", "</s>")
BYTES_VOCAB_MIN: Final = len(_BYTES_SPECIALS) + 256
WEIGHT_TYPES: Final = ("f32", "f16")

# Standard deviation of the small matrices, before dividing by sqrt(fan_in).
_SMALL_WEIGHT_SCALE: Final = 0.1

FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class ModelSizes:
    """Hyperparameters of a test model. Defaults give a file of about 0.6 MB.

    ``layers`` counts trunk layers; a model with MTP has ``nextn_layers`` more blocks (NextN
    blocks; llama.cpp's qwen35 MTP graph takes exactly one, so more makes a model it refuses).
    Trunk layer ``i`` is recurrent (gated delta net) unless
    ``(i + 1) % full_attention_interval == 0``.
    """

    embd: int = 64
    ff: int = 128
    layers: int = 2
    vocab: int = 256
    heads: int = 2
    kv_heads: int = 1
    head_dim: int = 32
    ssm_state: int = 16
    ssm_groups: int = 1
    ssm_v_heads: int = 2
    ssm_conv: int = 4
    full_attention_interval: int = 2
    context: int = 4096
    disagree_every: int = 5
    weight_type: str = "f32"
    nextn_layers: int = 1

    def validate(self) -> None:
        """Raise UsageError when llama.cpp could not load or run a model of these sizes."""
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, int) and value < 1:
                raise UsageError(f"test model size {field.name} must be positive, got {value}")
        if self.vocab < 8:
            raise UsageError(f"test model vocab must be at least 8, got {self.vocab}")
        if self.layers < 2:
            raise UsageError(f"test model needs at least 2 trunk layers, got {self.layers}")
        if self.full_attention_interval < 2:
            # With no recurrent layer, this llama.cpp architecture crashes on the first decode.
            raise UsageError(
                "full_attention_interval must be at least 2 (1 leaves no recurrent layer)"
            )
        if self.full_attention_interval > self.layers:
            raise UsageError(
                f"full_attention_interval {self.full_attention_interval} leaves no attention layer "
                f"among {self.layers} trunk layers"
            )
        if self.heads % self.kv_heads != 0:
            raise UsageError(
                f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})"
            )
        if self.head_dim % 8 != 0:
            raise UsageError(f"head_dim must be a multiple of 8, got {self.head_dim}")
        if self.ssm_v_heads % self.ssm_groups != 0:
            raise UsageError(
                f"ssm_v_heads ({self.ssm_v_heads}) must be a multiple of "
                f"ssm_groups ({self.ssm_groups})"
            )
        if self.disagree_every < 2:
            raise UsageError(f"disagree_every must be at least 2, got {self.disagree_every}")
        if self.weight_type not in WEIGHT_TYPES:
            raise UsageError(f"weight_type must be one of {', '.join(WEIGHT_TYPES)}")

    @property
    def rope_sections(self) -> tuple[int, int, int, int]:
        """Multi-rope sections (pairs of rotated dimensions) covering all of ``head_dim``."""
        pairs = self.head_dim // 2
        first = pairs // 4
        second = (pairs - first) // 2
        return (first, second, pairs - first - second, 0)

    @property
    def ssm_inner(self) -> int:
        return self.ssm_state * self.ssm_v_heads

    def is_recurrent(self, layer: int) -> bool:
        return layer < self.layers and (layer + 1) % self.full_attention_interval != 0


def sizes_from(**sizes: Any) -> ModelSizes:
    """Build ModelSizes from keyword arguments, rejecting unknown names."""
    known = {field.name for field in dataclasses.fields(ModelSizes)}
    unknown = sorted(set(sizes) - known)
    if unknown:
        raise UsageError(f"unknown test model size(s): {', '.join(unknown)}")
    result = ModelSizes(**sizes)
    result.validate()
    return result


@dataclass(frozen=True)
class Tokenizer:
    """The vocabulary (one of VOCABULARIES) and chat template a test model is written with."""

    vocabulary: str = "test"
    chat_template: str | None = None

    def validate(self, vocab: int) -> None:
        if self.vocabulary not in VOCABULARIES:
            raise UsageError(
                f"unknown test model vocabulary {self.vocabulary!r}; expected one of "
                f"{', '.join(VOCABULARIES)}"
            )
        if self.vocabulary == "bytes" and vocab < BYTES_VOCAB_MIN:
            raise UsageError(
                f"the bytes vocabulary needs vocab >= {BYTES_VOCAB_MIN} (3 special and 256 byte "
                f"tokens), got {vocab}"
            )


def write_test_model(
    path: Path,
    kind: str,
    seed: int = 0,
    *,
    progress: bool = False,
    vocabulary: str = "test",
    chat_template: str | None = None,
    **sizes: Any,
) -> Path:
    """Write a test model of ``kind`` (one of KINDS) to ``path`` and return the path.

    ``sizes`` are ModelSizes fields; ``vocabulary`` is one of VOCABULARIES; ``chat_template``
    (text) is written as ``tokenizer.chat_template``. The file is written next to ``path`` and
    renamed into place.
    """
    if kind not in KINDS:
        raise UsageError(f"unknown test model kind {kind!r}; expected one of {', '.join(KINDS)}")
    if seed < 0:
        raise UsageError(f"seed must not be negative, got {seed}")
    shape = sizes_from(**sizes)
    tokenizer = Tokenizer(vocabulary, chat_template)
    tokenizer.validate(shape.vocab)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial_path = path.with_name(path.name + ".partial")
    try:
        _write(partial_path, kind, seed, shape, tokenizer, progress)
        os.replace(partial_path, path)
    finally:
        partial_path.unlink(missing_ok=True)
    return path


def _write(
    path: Path, kind: str, seed: int, sizes: ModelSizes, tokenizer: Tokenizer, progress: bool
) -> None:
    has_mtp = kind in ("agree", "partial")
    writer = gguf.GGUFWriter(path, ARCH)
    _add_metadata(writer, kind, sizes, has_mtp)
    add_tokenizer(writer, tokenizer, sizes.vocab)
    tensors = _TensorAdder(writer, seed, sizes.weight_type)

    embeddings = token_embeddings(sizes, seed)
    trunk_head = np.roll(embeddings, 1, axis=0)  # row j is e[j - 1]: the trunk predicts tok + 1
    if kind == "draft":  # disagreeing tokens read as the next one: the draft predicts tok + 2
        tensors.values(
            "token_embd.weight", partial_mtp_embeddings(embeddings, sizes.disagree_every)
        )
    else:
        tensors.values("token_embd.weight", embeddings)
    tensors.ones("output_norm.weight", sizes.embd)
    tensors.values("output.weight", trunk_head)

    for layer in range(sizes.layers):
        _add_common_block(tensors, sizes, layer)
        if sizes.is_recurrent(layer):
            _add_recurrent_attention(tensors, sizes, layer)
        else:
            _add_full_attention(tensors, sizes, layer)

    if has_mtp:
        for layer in range(sizes.layers, sizes.layers + sizes.nextn_layers):
            _add_common_block(tensors, sizes, layer)
            _add_full_attention(tensors, sizes, layer)
            _add_nextn(tensors, sizes, layer, embeddings, kind)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=progress)
    writer.close()


def _add_metadata(writer: gguf.GGUFWriter, kind: str, sizes: ModelSizes, has_mtp: bool) -> None:
    writer.add_name(f"llama-bindgen test model ({kind})")
    writer.add_context_length(sizes.context)
    writer.add_embedding_length(sizes.embd)
    writer.add_block_count(sizes.layers + (sizes.nextn_layers if has_mtp else 0))
    if has_mtp:
        writer.add_nextn_predict_layers(sizes.nextn_layers)
    writer.add_feed_forward_length(sizes.ff)
    writer.add_head_count(sizes.heads)
    writer.add_head_count_kv(sizes.kv_heads)
    writer.add_key_length(sizes.head_dim)
    writer.add_value_length(sizes.head_dim)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_dimension_count(sizes.head_dim)
    writer.add_rope_dimension_sections(list(sizes.rope_sections))
    writer.add_rope_freq_base(10000.0)
    writer.add_full_attention_interval(sizes.full_attention_interval)
    writer.add_ssm_conv_kernel(sizes.ssm_conv)
    writer.add_ssm_inner_size(sizes.ssm_inner)
    writer.add_ssm_state_size(sizes.ssm_state)
    writer.add_ssm_time_step_rank(sizes.ssm_v_heads)
    writer.add_ssm_group_count(sizes.ssm_groups)
    writer.add_file_type(
        gguf.LlamaFileType.MOSTLY_F16 if sizes.weight_type == "f16" else gguf.LlamaFileType.ALL_F32
    )


def byte_order() -> list[int]:
    """The byte values of the ``bytes`` vocabulary's byte tokens, in id order."""
    split = list(SPLIT_TEXT.encode("utf-8"))
    rest = [b for b in range(128, 256) if b not in split]
    return list(range(128)) + split + rest


def add_tokenizer(writer: gguf.GGUFWriter, tokenizer: Tokenizer, vocab: int) -> None:
    if tokenizer.vocabulary == "test":
        # llama.cpp's "test" vocabulary: token text is the hex id, text is hashed in chunks of 5.
        writer.add_tokenizer_model("test")
        writer.add_token_list([f"<t{i}>" for i in range(vocab)])
        writer.add_token_scores([0.0] * vocab)
    else:
        tokens = list(_BYTES_SPECIALS) + [f"<0x{b:02X}>" for b in byte_order()]
        types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
        types += [gguf.TokenType.BYTE] * 256
        unused = vocab - len(tokens)
        tokens += [f"<unused{i}>" for i in range(unused)]
        types += [gguf.TokenType.UNUSED] * unused
        writer.add_tokenizer_model("llama")
        writer.add_token_list(tokens)
        writer.add_token_scores([0.0] * vocab)
        writer.add_token_types([int(t) for t in types])
        writer.add_unk_token_id(0)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
    if tokenizer.chat_template is not None:
        writer.add_chat_template(tokenizer.chat_template)


def _add_common_block(tensors: _TensorAdder, sizes: ModelSizes, layer: int) -> None:
    """Norms and the SiLU-gated feed-forward part every block has."""
    blk = f"blk.{layer}"
    tensors.ones(f"{blk}.attn_norm.weight", sizes.embd)
    tensors.ones(f"{blk}.post_attention_norm.weight", sizes.embd)
    tensors.small(f"{blk}.ffn_gate.weight", sizes.ff, sizes.embd)
    tensors.small(f"{blk}.ffn_up.weight", sizes.ff, sizes.embd)
    tensors.small(f"{blk}.ffn_down.weight", sizes.embd, sizes.ff)


def _add_full_attention(tensors: _TensorAdder, sizes: ModelSizes, layer: int) -> None:
    """Gated multi-head attention: attn_q holds query and gate, q/k are RMS-normed per head."""
    blk = f"blk.{layer}"
    kv_out = sizes.head_dim * sizes.kv_heads
    tensors.small(f"{blk}.attn_q.weight", 2 * sizes.head_dim * sizes.heads, sizes.embd)
    tensors.small(f"{blk}.attn_k.weight", kv_out, sizes.embd)
    tensors.small(f"{blk}.attn_v.weight", kv_out, sizes.embd)
    tensors.small(f"{blk}.attn_output.weight", sizes.embd, sizes.head_dim * sizes.heads)
    tensors.ones(f"{blk}.attn_q_norm.weight", sizes.head_dim)
    tensors.ones(f"{blk}.attn_k_norm.weight", sizes.head_dim)


def _add_recurrent_attention(tensors: _TensorAdder, sizes: ModelSizes, layer: int) -> None:
    """Gated delta net (linear attention) tensors."""
    blk = f"blk.{layer}"
    key_dim = sizes.ssm_state * sizes.ssm_groups
    value_dim = sizes.ssm_inner
    conv_dim = 2 * key_dim + value_dim
    tensors.small(f"{blk}.attn_qkv.weight", conv_dim, sizes.embd)
    tensors.small(f"{blk}.attn_gate.weight", value_dim, sizes.embd)
    tensors.f32_only.add(f"{blk}.ssm_conv1d.weight")
    tensors.small(f"{blk}.ssm_conv1d.weight", conv_dim, sizes.ssm_conv)
    tensors.values(f"{blk}.ssm_dt.bias", np.zeros(sizes.ssm_v_heads, dtype=np.float32))
    # ssm_a is -exp(A_log): negative, so the recurrent state decays.
    tensors.values(f"{blk}.ssm_a", np.full(sizes.ssm_v_heads, -1.0, dtype=np.float32))
    tensors.small(f"{blk}.ssm_beta.weight", sizes.ssm_v_heads, sizes.embd)
    tensors.small(f"{blk}.ssm_alpha.weight", sizes.ssm_v_heads, sizes.embd)
    tensors.ones(f"{blk}.ssm_norm.weight", sizes.ssm_state)
    tensors.small(f"{blk}.ssm_out.weight", sizes.embd, value_dim)


def _add_nextn(
    tensors: _TensorAdder,
    sizes: ModelSizes,
    layer: int,
    embeddings: FloatArray,
    kind: str,
) -> None:
    """The NextN projection, its norms and (for ``partial``) its own token embeddings."""
    blk = f"blk.{layer}"
    # eh_proj maps concat(enorm(embedding), hnorm(hidden)) to the block input: identity on the
    # embedding half, small weights on the hidden half.
    eh_name = f"{blk}.nextn.eh_proj.weight"
    hidden_half = tensors.random(eh_name, (sizes.embd, sizes.embd), _small_scale(sizes.embd))
    eh_proj = np.concatenate([np.eye(sizes.embd, dtype=np.float32), hidden_half], axis=1)
    tensors.values(eh_name, eh_proj)
    tensors.ones(f"{blk}.nextn.enorm.weight", sizes.embd)
    tensors.ones(f"{blk}.nextn.hnorm.weight", sizes.embd)
    if kind == "partial":
        mtp_embeddings = partial_mtp_embeddings(embeddings, sizes.disagree_every)
        tensors.values(f"{blk}.nextn.embed_tokens.weight", mtp_embeddings)


def token_embeddings(sizes: ModelSizes, seed: int = 0) -> FloatArray:
    """The trunk's token embeddings ``e[t]`` (one row per token, of length ``sqrt(embd)``) for
    ``sizes`` and ``seed``, in f32: what ``token_embd.weight`` holds before the weight type is
    applied (for ``draft``, before its disagreeing rows are replaced)."""
    embeddings = _random(seed, "token_embd.weight", (sizes.vocab, sizes.embd), 1.0)
    embeddings *= np.float32(np.sqrt(sizes.embd)) / np.linalg.norm(
        embeddings, axis=1, keepdims=True
    )
    return embeddings


def disagreeing_tokens(vocab: int, disagree_every: int) -> list[int]:
    """Tokens for which the ``partial`` MTP head predicts ``t + 2`` (mod vocab), not ``t + 1``."""
    return list(range(0, vocab, disagree_every))


def partial_mtp_embeddings(embeddings: FloatArray, disagree_every: int) -> FloatArray:
    """The trunk's embeddings, with token ``t`` given ``e[t + 1]`` for each disagreeing ``t``."""
    vocab = len(embeddings)
    result = embeddings.copy()
    for t in disagreeing_tokens(vocab, disagree_every):
        result[t] = embeddings[(t + 1) % vocab]
    return result


def _small_scale(fan_in: int) -> float:
    return _SMALL_WEIGHT_SCALE / float(np.sqrt(fan_in))


def _random(seed: int, name: str, shape: tuple[int, ...], scale: float) -> FloatArray:
    """Normal values with standard deviation ``scale``, seeded by (seed, name)."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)


class _TensorAdder:
    """Adds tensors with deterministic values to a writer, in the chosen weight type.

    Shapes are numpy order (rows, cols), which is ggml order {cols, rows}.
    """

    def __init__(self, writer: gguf.GGUFWriter, seed: int, weight_type: str) -> None:
        self.writer = writer
        self.seed = seed
        self.weight_type = weight_type
        self.f32_only: set[str] = set()

    def random(self, name: str, shape: tuple[int, ...], scale: float) -> FloatArray:
        """Normal values with standard deviation ``scale``, seeded by (seed, name)."""
        return _random(self.seed, name, shape, scale)

    def small(self, name: str, rows: int, cols: int) -> None:
        self.values(name, self.random(name, (rows, cols), _small_scale(cols)))

    def ones(self, name: str, n: int) -> None:
        self.values(name, np.ones(n, dtype=np.float32))

    def values(self, name: str, values: FloatArray) -> None:
        """Matrices are stored in the weight type; vectors (norms, biases) stay f32, and so does
        the convolution kernel (ggml's CPU ssm_conv asserts f32 weights)."""
        if values.ndim >= 2 and self.weight_type == "f16" and name not in self.f32_only:
            self.writer.add_tensor(name, values.astype(np.float16))
        else:
            self.writer.add_tensor(name, values.astype(np.float32))
