"""A tiny synthetic vision projector ("mmproj") GGUF for the test models of :mod:`testmodel`.

llama.cpp's multimodal library (libmtmd) pairs a text model with a projector file that turns an
image into rows of the text model's input embeddings. This module writes such a file for the
synthetic qwen35 text models, so that image input can be tested end to end in milliseconds.

The projector type is ``qwen3vl_merger``, the one upstream's converter writes for Qwen3-VL and
Qwen3.5 checkpoints: a ViT whose patch grid is merged 2x2 into image tokens, each token a row of
width ``n_embd`` of the text model. Whether mtmd gives the image tokens M-RoPE positions depends on
the *text* model's rope type, not on the projector: qwen35 uses interleaved M-RoPE, so every image
token gets a (t, y, x) position and the image advances the sequence by ``max(nx, ny)`` positions,
not by its token count.

What the weights compute
------------------------
Pixels are normalised with mean 0.5 and std 0.5, so each lies in [-1, 1]. The patch convolution's
first output channel is ``gain`` times a patch's mean normalised value: its brightness, positive
for light patches and negative for dark ones. The other channels, the position embeddings and the
transformer block have small random weights, so the block barely moves the residual stream. The
merger's first layer has two designed units that sum the brightness of the four merged patches,
one with each sign; after its GELU only the unit matching the sign stays large. The second layer
maps those two units to the text model's token embedding of ``bright_token`` and of
``dark_token`` (recomputed with :func:`testmodel.token_embeddings`, hence ``text_sizes`` and
``seed`` must be the text model's), all other units to small random rows.

So a light 2x2 patch group becomes a row close to a multiple of ``e[bright_token]``, a dark one
close to ``e[dark_token]`` (a group near mid-grey gives a short row whose direction the small
random weights decide); as the text model predicts ``t + 1`` from (a multiple of) ``e[t]``,
a greedy continuation taken right after an image whose last group is light starts at
``bright_token + 1``. With the ``bytes`` vocabulary the defaults are the bytes ``a`` and ``A``:
a white image reads as ``a`` and continues ``bcd...``, a black one continues ``BCD...``.

Facts about the loader (llama.cpp b11312) this file depends on
--------------------------------------------------------------
* Required keys: ``clip.has_vision_encoder``, ``clip.projector_type``, and under
  ``clip.vision.``: ``embedding_length``, ``attention.head_count``, ``feed_forward_length``,
  ``block_count``, ``projection_dim``, ``attention.layer_norm_epsilon``, ``image_size``,
  ``patch_size``, ``image_mean`` and ``image_std`` (f32 arrays of at least 3). ``clip.use_gelu``
  picks GELU (else quick GELU); ``clip.vision.spatial_merge_size`` must be 2, as the qwen3vl graph
  merges 2x2 whatever it says.
* Tensors (numpy shapes): ``v.patch_embd.weight`` and ``v.patch_embd.weight.1`` (the two
  temporal halves of the 3D patch convolution; a still image goes through both and the results
  are added) of ``(embd, 3, patch, patch)``; ``v.patch_embd.bias`` ``(embd,)`` (required by this
  graph); ``v.position_embd.weight`` ``(g * g, embd)`` for a ``g x g`` grid, resized bilinearly to
  the patch grid; per block ``v.blk.N.``: ``ln1``/``ln2`` weight and bias, ``attn_qkv`` weight
  ``(3 * embd, embd)`` and bias (the bias is added unconditionally, so it must exist),
  ``attn_out``, ``ffn_up`` ``(ff, embd)``, ``ffn_down`` ``(embd, ff)``; then ``mm.0`` weight
  ``(4 * embd, 4 * embd)`` and ``mm.2`` weight ``(n_embd, 4 * embd)``, each with a bias. The
  projector's output width is the length of ``mm.2.bias``; mtmd refuses a text model whose
  ``llama_model_n_embd_inp`` differs (``mtmd_init_from_file`` returns NULL).
* Head size must be a multiple of 4: the vision rope splits it into four M-RoPE sections.
* Image size is not fixed: an image is resized (bicubic) keeping its aspect ratio so that each
  side is a multiple of ``2 * patch``: sides rounded to the nearest multiple, then scaled down
  when above 4096 tokens or up (rounding up) when below 8. These bounds are built into the loader
  for this projector type (the GGUF cannot change them; ``mtmd_context_params.image_min_tokens``
  and ``image_max_tokens`` can). The image gives ``(w / 2p) x (h / 2p)`` tokens, in rows.
  With the default 16-pixel patches llama.cpp's 640x488 test image becomes 640x480, 20 x 15 =
  300 tokens; with ``image_max_tokens = 16`` it becomes 128x96, 4 x 3 = 12 tokens.
* Loading sizes a dummy image of 46 x 46 tokens (``92 * patch`` pixels square) whatever the file
  says, and allocates its float pixels even with ``warmup`` off: 26 MB with 16-pixel patches,
  but 650 MB and seconds with 80-pixel ones. So the patch stays small, and tests cut the token
  count with ``image_max_tokens`` rather than with big patches.
* mtmd wraps the image in the text ``<|vision_start|>`` ... ``<|vision_end|>`` for this projector
  type; with the test vocabularies those are plain text tokens.

Files are deterministic: each tensor's random values come from a generator seeded by
``(seed, tensor name)``.
"""

from __future__ import annotations

import dataclasses
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import gguf
import numpy as np
import numpy.typing as npt

from generator.errors import UsageError
from generator.testmodel import BYTES_VOCAB_MIN, ModelSizes, byte_order, token_embeddings

PROJECTOR_TYPE: Final = "qwen3vl_merger"
SPATIAL_MERGE: Final = 2
# The image token bounds the loader sets for this projector type (not stored in the file).
MIN_IMAGE_TOKENS: Final = 8
MAX_IMAGE_TOKENS: Final = 4096
IMAGE_MEAN: Final = (0.5, 0.5, 0.5)
IMAGE_STD: Final = (0.5, 0.5, 0.5)
# What mtmd puts around an image's tokens for this projector type.
IMAGE_BEGIN: Final = "<|vision_start|>"
IMAGE_END: Final = "<|vision_end|>"


def bytes_vocab_token(value: int) -> int:
    """The id of the byte token for ``value`` in testmodel's ``bytes`` vocabulary."""
    return BYTES_VOCAB_MIN - 256 + byte_order().index(value)


BRIGHT_TOKEN: Final = bytes_vocab_token(ord("a"))
DARK_TOKEN: Final = bytes_vocab_token(ord("A"))

DEFAULT_TEXT_SIZES: Final = ModelSizes()

# Standard deviation of the small matrices, before dividing by sqrt(fan_in).
_SMALL_WEIGHT_SCALE: Final = 0.1
_POSITION_SCALE: Final = 0.02

FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class ProjectorSizes:
    """Hyperparameters of a test projector. Defaults give a file of about 0.14 MB.

    ``embd`` is the vision tower's width, ``patch`` the side of a patch in pixels (an image token
    covers ``2 * patch`` pixels square), ``position_grid`` the side of the learned position
    embedding grid, ``gain`` the brightness channel's scale.
    """

    embd: int = 16
    heads: int = 2
    ff: int = 32
    layers: int = 1
    patch: int = 16
    position_grid: int = 4
    gain: float = 4.0

    def validate(self) -> None:
        """Raise UsageError when llama.cpp could not load or run a projector of these sizes."""
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value <= 0:
                raise UsageError(f"test projector size {field.name} must be positive, got {value}")
        if self.embd % self.heads != 0:
            raise UsageError(f"embd ({self.embd}) must be a multiple of heads ({self.heads})")
        if self.head_dim % 4 != 0:
            raise UsageError(
                f"head size (embd / heads) must be a multiple of 4, got {self.head_dim}"
            )

    @property
    def head_dim(self) -> int:
        return self.embd // self.heads

    @property
    def image_size(self) -> int:
        """The ``clip.vision.image_size`` written: the position grid's side in pixels."""
        return self.position_grid * self.patch

    @property
    def merged_width(self) -> int:
        """Width of a merged 2x2 patch group, the merger's input."""
        return SPATIAL_MERGE * SPATIAL_MERGE * self.embd


def write_test_projector(
    path: Path,
    *,
    text_sizes: ModelSizes = DEFAULT_TEXT_SIZES,
    seed: int = 0,
    sizes: ProjectorSizes = ProjectorSizes(),
    bright_token: int = BRIGHT_TOKEN,
    dark_token: int = DARK_TOKEN,
) -> Path:
    """Write a test projector for the text model of ``text_sizes`` and ``seed`` to ``path`` and
    return the path. Its output width is ``text_sizes.embd``. Light 2x2 patch groups map near the
    embedding of ``bright_token``, dark ones near that of ``dark_token``. The file is written
    next to ``path`` and renamed into place."""
    if seed < 0:
        raise UsageError(f"seed must not be negative, got {seed}")
    text_sizes.validate()
    sizes.validate()
    for name, token in (("bright_token", bright_token), ("dark_token", dark_token)):
        if not 0 <= token < text_sizes.vocab:
            raise UsageError(f"{name} {token} is not a token of a vocab of {text_sizes.vocab}")
    if bright_token == dark_token:
        raise UsageError("bright_token and dark_token must differ")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial_path = path.with_name(path.name + ".partial")
    try:
        embeddings = token_embeddings(text_sizes, seed)
        rows = (embeddings[bright_token], embeddings[dark_token])
        _write(partial_path, seed, sizes, text_sizes.embd, rows)
        os.replace(partial_path, path)
    finally:
        partial_path.unlink(missing_ok=True)
    return path


def _write(
    path: Path, seed: int, sizes: ProjectorSizes, n_embd: int, rows: tuple[FloatArray, FloatArray]
) -> None:
    writer = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.MMPROJ])
    _add_metadata(writer, sizes, n_embd)
    tensors = _Tensors(writer, seed)
    _add_patch_embedding(tensors, sizes)
    for layer in range(sizes.layers):
        _add_block(tensors, sizes, layer)
    _add_merger(tensors, sizes, n_embd, rows)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _add_metadata(writer: gguf.GGUFWriter, sizes: ProjectorSizes, n_embd: int) -> None:
    writer.add_type(gguf.GGUFType.MMPROJ)
    writer.add_name("llama-bindgen test projector")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_clip_has_vision_encoder(True)
    writer.add_clip_projector_type(PROJECTOR_TYPE)
    writer.add_vision_projection_dim(n_embd)
    writer.add_vision_image_size(sizes.image_size)
    writer.add_vision_patch_size(sizes.patch)
    writer.add_vision_embedding_length(sizes.embd)
    writer.add_vision_feed_forward_length(sizes.ff)
    writer.add_vision_block_count(sizes.layers)
    writer.add_vision_head_count(sizes.heads)
    writer.add_vision_image_mean(list(IMAGE_MEAN))
    writer.add_vision_image_std(list(IMAGE_STD))
    writer.add_vision_use_gelu(True)
    writer.add_vision_spatial_merge_size(SPATIAL_MERGE)
    writer.add_vision_attention_layernorm_eps(1e-6)


def _add_patch_embedding(tensors: _Tensors, sizes: ProjectorSizes) -> None:
    """The two temporal halves of the patch kernel: channel 0 of their sum averages the patch
    (times ``gain``); the other channels are small and random."""
    shape = (sizes.embd, 3, sizes.patch, sizes.patch)
    fan_in = 3 * sizes.patch * sizes.patch
    for name in ("v.patch_embd.weight", "v.patch_embd.weight.1"):
        kernel = tensors.random(name, shape, _small_scale(fan_in))
        kernel[0] = sizes.gain / (2 * fan_in)  # each half carries half of the mean
        tensors.add(name, kernel)
    tensors.zeros("v.patch_embd.bias", sizes.embd)
    grid = sizes.position_grid * sizes.position_grid
    name = "v.position_embd.weight"
    tensors.add(name, tensors.random(name, (grid, sizes.embd), _POSITION_SCALE))


def _add_block(tensors: _Tensors, sizes: ProjectorSizes, layer: int) -> None:
    """One pre-norm transformer block with small random weights and zero biases."""
    blk = f"v.blk.{layer}"
    for norm in ("ln1", "ln2"):
        tensors.add(f"{blk}.{norm}.weight", np.ones(sizes.embd, dtype=np.float32))
        tensors.zeros(f"{blk}.{norm}.bias", sizes.embd)
    tensors.small(f"{blk}.attn_qkv.weight", 3 * sizes.embd, sizes.embd)
    tensors.zeros(f"{blk}.attn_qkv.bias", 3 * sizes.embd)
    tensors.small(f"{blk}.attn_out.weight", sizes.embd, sizes.embd)
    tensors.zeros(f"{blk}.attn_out.bias", sizes.embd)
    tensors.small(f"{blk}.ffn_up.weight", sizes.ff, sizes.embd)
    tensors.zeros(f"{blk}.ffn_up.bias", sizes.ff)
    tensors.small(f"{blk}.ffn_down.weight", sizes.embd, sizes.ff)
    tensors.zeros(f"{blk}.ffn_down.bias", sizes.embd)


def _add_merger(
    tensors: _Tensors, sizes: ProjectorSizes, n_embd: int, rows: tuple[FloatArray, FloatArray]
) -> None:
    """The 2-layer merger: units 0 and 1 of ``mm.0`` read the summed brightness of the four
    patches with either sign; ``mm.2`` sends them to the bright and dark token embeddings."""
    width = sizes.merged_width
    brightness = np.arange(0, width, sizes.embd)  # channel 0 of each of the four patches
    first = tensors.random("mm.0.weight", (width, width), _small_scale(width))
    first[0:2] = 0.0
    first[0, brightness] = 1.0
    first[1, brightness] = -1.0
    tensors.add("mm.0.weight", first)
    tensors.zeros("mm.0.bias", width)
    second = tensors.random("mm.2.weight", (n_embd, width), _small_scale(width))
    second[:, 0] = rows[0] / np.linalg.norm(rows[0])
    second[:, 1] = rows[1] / np.linalg.norm(rows[1])
    tensors.add("mm.2.weight", second)
    tensors.zeros("mm.2.bias", n_embd)


def _small_scale(fan_in: int) -> float:
    return _SMALL_WEIGHT_SCALE / float(np.sqrt(fan_in))


class _Tensors:
    """Adds f32 tensors to a writer; random values are seeded by (seed, tensor name).

    Shapes are numpy order, the reverse of ggml's ``ne``.
    """

    def __init__(self, writer: gguf.GGUFWriter, seed: int) -> None:
        self.writer = writer
        self.seed = seed

    def random(self, name: str, shape: tuple[int, ...], scale: float) -> FloatArray:
        rng = np.random.default_rng([self.seed, zlib.crc32(name.encode())])
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)

    def small(self, name: str, rows: int, cols: int) -> None:
        self.add(name, self.random(name, (rows, cols), _small_scale(cols)))

    def zeros(self, name: str, n: int) -> None:
        self.add(name, np.zeros(n, dtype=np.float32))

    def add(self, name: str, values: FloatArray) -> None:
        self.writer.add_tensor(name, values.astype(np.float32))
