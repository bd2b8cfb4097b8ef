"""Image input through libmtmd, driven by the generated bindings alone (``libs.llama`` and
``libs.mtmd``): the synthetic projector of generator/testvision.py on the ``bytes``-vocabulary
test model, with llama.cpp's own test image (tools/mtmd/test-1.jpeg) and solid images made here.

The projector turns a light 2x2 patch group into (nearly) the text model's embedding of
``BRIGHT_TOKEN`` and a dark one into that of ``DARK_TOKEN``; the text model predicts ``t + 1``
from ``e[t]``. So a greedy continuation taken right after an image starts from the token the
image's last group stands for, and one taken after text continues from the last text token.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from generator.testmodel import BYTES_VOCAB_MIN, ModelSizes, token_embeddings, write_test_model
from generator.testvision import (
    BRIGHT_TOKEN,
    DARK_TOKEN,
    IMAGE_BEGIN,
    IMAGE_END,
    IMAGE_MEAN,
    MAX_IMAGE_TOKENS,
    MIN_IMAGE_TOKENS,
    SPATIAL_MERGE,
    ProjectorSizes,
    write_test_projector,
)

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

TEXT_SIZES = ModelSizes(vocab=BYTES_VOCAB_MIN)
PATCH = ProjectorSizes().patch
# mtmd_context_params.image_max_tokens for most tests: test-1.jpeg becomes a handful of tokens.
FEW_TOKENS = 16
N_GENERATE = 8


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("vision")
    narrow = ModelSizes(embd=32, vocab=BYTES_VOCAB_MIN)
    return {
        "text": write_test_model(
            folder / "text.gguf", "agree", vocabulary="bytes", vocab=BYTES_VOCAB_MIN
        ),
        "projector": write_test_projector(folder / "mmproj.gguf", text_sizes=TEXT_SIZES),
        "narrow": write_test_projector(folder / "narrow.gguf", text_sizes=narrow),
    }


@pytest.fixture(scope="module")
def test_image(tree_pin: Path) -> Path:
    return tree_pin / "tools" / "mtmd" / "test-1.jpeg"


@dataclass
class Session:
    """A text model, a llama context and an mtmd context, all owned by one ``with`` block."""

    libs: Any
    model: Any
    ctx: Any
    mctx: Any
    enums: Any  # llama_bindings.enums

    @property
    def vocab(self) -> Any:
        return self.libs.llama.llama_model_get_vocab(self.model)


@contextlib.contextmanager
def session(
    libs: Any, text: Path, projector: Path, max_tokens: int = FEW_TOKENS
) -> Iterator[Session]:
    llama, mtmd, ffi = libs.llama, libs.mtmd, libs.ffi
    llama.llama_backend_init()
    with contextlib.ExitStack() as stack:
        model = llama.llama_model_load_from_file(os.fsencode(text), model_params(libs))
        assert model != ffi.NULL
        stack.callback(llama.llama_model_free, model)
        params = llama.llama_context_default_params()
        params.n_ctx, params.n_threads, params.n_threads_batch = 512, 2, 2
        ctx = llama.llama_init_from_model(model, params)
        assert ctx != ffi.NULL
        stack.callback(llama.llama_free, ctx)
        mctx = mtmd.mtmd_init_from_file(
            os.fsencode(projector), model, mtmd_params(libs, max_tokens)
        )
        assert mctx != ffi.NULL
        stack.callback(mtmd.mtmd_free, mctx)
        yield Session(libs, model, ctx, mctx, importlib.import_module("llama_bindings.enums"))


def model_params(libs: Any) -> Any:
    params = libs.llama.llama_model_default_params()
    params.n_gpu_layers = 0
    return params


def mtmd_params(libs: Any, max_tokens: int) -> Any:
    params = libs.mtmd.mtmd_context_params_default()
    params.use_gpu, params.print_timings, params.n_threads = False, False, 2
    params.image_max_tokens = max_tokens  # 0: the projector type's own bound
    return params


@contextlib.contextmanager
def owned_bitmap(libs: Any, bitmap: Any) -> Iterator[Any]:
    assert bitmap != libs.ffi.NULL
    try:
        yield bitmap
    finally:
        libs.mtmd.mtmd_bitmap_free(bitmap)


def file_bitmap(s: Session, path: Path) -> Any:
    mtmd = s.libs.mtmd
    opt = mtmd.mtmd_helper_init_opt_default()
    return mtmd.mtmd_helper_bitmap_init_from_file(s.mctx, os.fsencode(path), False, opt).bitmap


def buffer_bitmap(s: Session, data: bytes) -> Any:
    mtmd = s.libs.mtmd
    opt = mtmd.mtmd_helper_init_opt_default()
    buf = s.libs.ffi.from_buffer("unsigned char[]", data)
    return mtmd.mtmd_helper_bitmap_init_from_buf(s.mctx, buf, len(data), False, opt).bitmap


def solid_bitmap(libs: Any, value: int, nx: int = 64, ny: int = 48) -> Any:
    return libs.mtmd.mtmd_bitmap_init(nx, ny, bytes([value]) * (nx * ny * 3))


def pixels(libs: Any, bitmap: Any) -> np.ndarray[Any, np.dtype[np.uint8]]:
    mtmd, ffi = libs.mtmd, libs.ffi
    nx, ny = mtmd.mtmd_bitmap_get_nx(bitmap), mtmd.mtmd_bitmap_get_ny(bitmap)
    data = ffi.buffer(mtmd.mtmd_bitmap_get_data(bitmap), mtmd.mtmd_bitmap_get_n_bytes(bitmap))
    return np.frombuffer(bytes(data), dtype=np.uint8).reshape(ny, nx, 3)


@contextlib.contextmanager
def tokenized(s: Session, prompt: str, bitmaps: list[Any]) -> Iterator[Any]:
    mtmd, ffi = s.libs.mtmd, s.libs.ffi
    chunks = mtmd.mtmd_input_chunks_init()
    try:
        raw = prompt.encode()
        text = ffi.new("struct mtmd_input_text *")
        keep = ffi.new("char[]", raw)
        text.text, text.text_len, text.add_special, text.parse_special = keep, len(raw), True, True
        array = ffi.new("mtmd_bitmap *[]", bitmaps)
        assert mtmd.mtmd_tokenize(s.mctx, chunks, text, array, len(bitmaps)) == 0
        yield chunks
    finally:
        mtmd.mtmd_input_chunks_free(chunks)


def chunk_list(s: Session, chunks: Any) -> list[Any]:
    mtmd = s.libs.mtmd
    return [
        mtmd.mtmd_input_chunks_get(chunks, i) for i in range(mtmd.mtmd_input_chunks_size(chunks))
    ]


def chunk_tokens(s: Session, chunk: Any) -> list[int]:
    n = s.libs.ffi.new("size_t *")
    tokens = s.libs.mtmd.mtmd_input_chunk_get_tokens_text(chunk, n)
    return list(s.libs.ffi.unpack(tokens, n[0]))


def tokenize(s: Session, text: str) -> list[int]:
    raw = text.encode()
    out = s.libs.ffi.new("llama_token[]", len(raw) + 8)
    n = s.libs.llama.llama_tokenize(s.vocab, raw, len(raw), out, len(out), False, True)
    assert n >= 0
    return list(out[0:n])


def detokenize(s: Session, tokens: list[int]) -> str:
    buf = s.libs.ffi.new("char[]", 16 * len(tokens) + 16)
    array = s.libs.ffi.new("llama_token[]", tokens)
    n = s.libs.llama.llama_detokenize(s.vocab, array, len(tokens), buf, len(buf), True, True)
    assert n >= 0
    text: bytes = s.libs.ffi.unpack(buf, n)
    return text.decode("utf-8", "replace")


def words(text: str) -> list[str]:
    return text.replace("\u2581", " ").split()


def grid(width: int, height: int, max_tokens: int = MAX_IMAGE_TOKENS) -> tuple[int, int]:
    """Image tokens across and down for a ``width`` x ``height`` image: the resize rule of the
    qwen3vl projector type (sides made multiples of two patches, keeping the aspect ratio, then
    scaled into [MIN_IMAGE_TOKENS, max_tokens] tokens), in llama.cpp's float32 arithmetic."""
    f32 = np.float32
    align = SPATIAL_MERGE * PATCH
    min_pixels, max_pixels = MIN_IMAGE_TOKENS * align * align, max_tokens * align * align

    def by(x: np.float32, rounding: Any) -> int:
        return int(rounding(f32(x) / f32(align))) * align

    w = max(align, by(f32(width), lambda v: math.floor(v + f32(0.5))))
    h = max(align, by(f32(height), lambda v: math.floor(v + f32(0.5))))
    if w * h > max_pixels:
        beta = np.sqrt(f32(height) * f32(width) / f32(max_pixels))
        h = max(align, by(f32(height) / beta, math.floor))
        w = max(align, by(f32(width) / beta, math.floor))
    elif w * h < min_pixels:
        beta = np.sqrt(f32(min_pixels) / (f32(height) * f32(width)))
        h, w = by(f32(height) * beta, math.ceil), by(f32(width) * beta, math.ceil)
    return w // align, h // align


def greedy(s: Session, first_pos: int, n: int = N_GENERATE) -> list[int]:
    """Sample greedily from the last logits, then decode each token at the next position."""
    llama = s.libs.llama
    sampler = llama.llama_sampler_init_greedy()
    batch = llama.llama_batch_init(1, 0, 1)
    out: list[int] = []
    try:
        for i in range(n):
            token = llama.llama_sampler_sample(sampler, s.ctx, -1)
            out.append(token)
            batch.n_tokens, batch.token[0], batch.pos[0] = 1, token, first_pos + i
            batch.n_seq_id[0], batch.seq_id[0][0], batch.logits[0] = 1, 0, 1
            assert llama.llama_decode(s.ctx, batch) == 0
    finally:
        llama.llama_batch_free(batch)
        llama.llama_sampler_free(sampler)
    return out


def image_rows(s: Session, chunk: Any) -> np.ndarray[Any, np.dtype[np.float32]]:
    """Encode an image chunk; its rows of text-model embeddings (a copy)."""
    mtmd, ffi = s.libs.mtmd, s.libs.ffi
    assert mtmd.mtmd_encode_chunk(s.mctx, chunk) == 0
    n, width = mtmd.mtmd_input_chunk_get_n_tokens(chunk), TEXT_SIZES.embd
    data = ffi.buffer(mtmd.mtmd_get_output_embd(s.mctx), n * width * 4)
    return np.frombuffer(bytes(data), dtype=np.float32).reshape(n, width).copy()


def decode_image_for_logits(s: Session, chunk: Any, n_past: int) -> int:
    """Decode an image chunk's rows at mtmd's M-RoPE positions, as mtmd_helper_decode_image_chunk
    does, but asking for the logits after the last row; the position after the image."""
    llama, mtmd, ffi = s.libs.llama, s.libs.mtmd, s.libs.ffi
    image_rows(s, chunk)
    embd, width = mtmd.mtmd_get_output_embd(s.mctx), TEXT_SIZES.embd
    image = mtmd.mtmd_input_chunk_get_tokens_image(chunk)
    n = mtmd.mtmd_image_tokens_get_n_tokens(image)
    pos = ffi.new("struct mtmd_decoder_pos[]", n)
    mtmd.mtmd_helper_image_get_decoder_pos(image, n_past, pos)
    batch = llama.llama_batch_ext_init(s.ctx)
    try:
        for i in range(n):
            row = ffi.new("struct llama_embd *", {"data": embd + i * width, "n_rows": 1})
            row.n_embd = width
            idx = llama.llama_batch_ext_add_embd(batch, 0, row[0])
            assert idx >= 0
            # sections t, y, x, z: the order mtmd's helper gives an M-RoPE text model
            sections = ffi.new("llama_pos[4]", [pos[i].t, pos[i].y, pos[i].x, pos[i].z])
            assert llama.llama_batch_ext_set_pos(batch, idx, sections)
        assert llama.llama_batch_ext_set_output_logits(batch, idx, True)
        assert llama.llama_process(s.ctx, s.enums.LLAMA_PROCESS_TYPE_DECODE, batch) == 0
    finally:
        llama.llama_batch_ext_free(batch)
    return n_past + int(mtmd.mtmd_input_chunk_get_n_pos(chunk))


def chunk_types(s: Session, chunks: Any) -> list[int]:
    return [s.libs.mtmd.mtmd_input_chunk_get_type(c) for c in chunk_list(s, chunks)]


def image_chunk(s: Session, chunks: Any) -> Any:
    (index,) = [
        i for i, t in enumerate(chunk_types(s, chunks)) if t == s.enums.MTMD_INPUT_CHUNK_TYPE_IMAGE
    ]
    return chunk_list(s, chunks)[index]


def last_group_mean(image: np.ndarray[Any, np.dtype[np.uint8]], nx: int, ny: int) -> float:
    """The mean pixel value of the part of ``image`` the last image token (bottom right) covers,
    the resize being a plain scale of the whole image."""
    height, width, _ = image.shape
    return float(image[height * (ny - 1) // ny :, width * (nx - 1) // nx :].mean())


def jpeg_size(data: bytes) -> tuple[int, int]:
    """Width and height from a baseline or progressive JPEG's frame header."""
    at = 2
    while at + 9 < len(data):
        marker, length = data[at + 1], int.from_bytes(data[at + 2 : at + 4], "big")
        if marker in (0xC0, 0xC2):
            height = int.from_bytes(data[at + 5 : at + 7], "big")
            return int.from_bytes(data[at + 7 : at + 9], "big"), height
        at += 2 + length
    raise AssertionError("no JPEG frame header")


# --- loading ---------------------------------------------------------------------------------


def test_projector_loads_for_the_text_model(libs: Any, files: dict[str, Path]) -> None:
    with session(libs, files["text"], files["projector"]) as s:
        mtmd, ffi = libs.mtmd, libs.ffi
        assert mtmd.mtmd_support_vision(s.mctx) and not mtmd.mtmd_support_audio(s.mctx)
        # M-RoPE positions follow from the text model's rope type (qwen35: interleaved M-RoPE)
        rope = libs.llama.llama_model_rope_type(s.model)
        assert rope == s.enums.LLAMA_ROPE_TYPE_IMROPE
        assert mtmd.mtmd_decode_use_mrope(s.mctx)
        assert libs.llama.llama_model_n_embd_inp(s.model) == TEXT_SIZES.embd
        marker = ffi.string(mtmd.mtmd_get_marker(s.mctx))
        assert marker == ffi.string(mtmd.mtmd_default_marker()) == b"<__media__>"


def test_projector_of_another_width_is_refused(libs: Any, files: dict[str, Path]) -> None:
    """A projector whose rows are 32 wide does not fit the 64-wide text model: NULL, no crash;
    nor does a file that is not there."""
    llama, mtmd, ffi = libs.llama, libs.mtmd, libs.ffi
    model = llama.llama_model_load_from_file(os.fsencode(files["text"]), model_params(libs))
    assert model != ffi.NULL
    try:
        for path in (files["narrow"], files["narrow"].with_name("absent.gguf")):
            mctx = mtmd.mtmd_init_from_file(os.fsencode(path), model, mtmd_params(libs, 0))
            assert mctx == ffi.NULL, path
        ok = mtmd.mtmd_init_from_file(os.fsencode(files["projector"]), model, mtmd_params(libs, 0))
        assert ok != ffi.NULL
        mtmd.mtmd_free(ok)
    finally:
        llama.llama_model_free(model)


def test_unreadable_images_give_no_bitmap(
    libs: Any, files: dict[str, Path], test_image: Path, tmp_path: Path
) -> None:
    """An absent file, a JPEG start marker followed by zeros, text: no bitmap (NULL). (A merely
    truncated JPEG is not refused: the decoder fills in what is missing.)"""
    corrupt = tmp_path / "corrupt.jpeg"
    corrupt.write_bytes(test_image.read_bytes()[:2] + bytes(300))
    with session(libs, files["text"], files["projector"]) as s:
        assert file_bitmap(s, tmp_path / "absent.jpeg") == libs.ffi.NULL
        assert file_bitmap(s, corrupt) == libs.ffi.NULL
        assert buffer_bitmap(s, b"not an image at all") == libs.ffi.NULL
        with owned_bitmap(libs, file_bitmap(s, test_image)):  # the same session still reads one
            pass


def test_file_and_buffer_give_the_same_bitmap(
    libs: Any, files: dict[str, Path], test_image: Path
) -> None:
    data = test_image.read_bytes()
    mtmd, ffi = libs.mtmd, libs.ffi
    with session(libs, files["text"], files["projector"]) as s:
        with owned_bitmap(libs, file_bitmap(s, test_image)) as a:
            with owned_bitmap(libs, buffer_bitmap(s, data)) as b:
                size = (mtmd.mtmd_bitmap_get_nx(a), mtmd.mtmd_bitmap_get_ny(a))
                assert size == jpeg_size(data)
                assert np.array_equal(pixels(libs, a), pixels(libs, b))
                ids = {ffi.string(mtmd.mtmd_bitmap_get_id(x)).decode() for x in (a, b)}
                assert ids == {hashlib.sha256(data).hexdigest()}


# --- tokenizing ------------------------------------------------------------------------------


@pytest.mark.parametrize("max_tokens", [0, FEW_TOKENS])
def test_marker_becomes_an_image_chunk_of_the_computed_size(
    libs: Any, files: dict[str, Path], test_image: Path, max_tokens: int
) -> None:
    """``describe <marker> now`` gives text, image, text; the image chunk has the token grid the
    resize rule gives for the bitmap's size, and takes max(nx, ny) positions (M-RoPE)."""
    mtmd = libs.mtmd
    with session(libs, files["text"], files["projector"], max_tokens) as s:
        marker = libs.ffi.string(mtmd.mtmd_default_marker()).decode()
        with owned_bitmap(libs, file_bitmap(s, test_image)) as bitmap:
            size = (mtmd.mtmd_bitmap_get_nx(bitmap), mtmd.mtmd_bitmap_get_ny(bitmap))
            with tokenized(s, f"describe {marker} now", [bitmap]) as chunks:
                text, image = (
                    s.enums.MTMD_INPUT_CHUNK_TYPE_TEXT,
                    s.enums.MTMD_INPUT_CHUNK_TYPE_IMAGE,
                )
                assert chunk_types(s, chunks) == [text, image, text]
                first, middle, last = chunk_list(s, chunks)
                tokens = mtmd.mtmd_input_chunk_get_tokens_image(middle)
                nx, ny = grid(*size, max_tokens or MAX_IMAGE_TOKENS)
                assert (
                    mtmd.mtmd_image_tokens_get_nx(tokens),
                    mtmd.mtmd_image_tokens_get_ny(tokens),
                ) == (nx, ny)
                assert mtmd.mtmd_input_chunk_get_n_tokens(middle) == nx * ny
                assert mtmd.mtmd_input_chunk_get_n_pos(middle) == max(nx, ny) < nx * ny
                before, after = chunk_tokens(s, first), chunk_tokens(s, last)
                n_text = len(before) + len(after)
                assert mtmd.mtmd_helper_get_n_tokens(chunks) == n_text + nx * ny
                assert mtmd.mtmd_helper_get_n_pos(chunks) == n_text + max(nx, ny)
        # the marker is cut out before tokenizing: its byte tokens appear in no chunk
        marker_tokens = tokenize(s, marker)
        assert len(marker_tokens) >= len(marker)
        for part in (before, after):
            assert not any(
                part[i : i + len(marker_tokens)] == marker_tokens for i in range(len(part))
            )
        assert before[0] == libs.llama.llama_vocab_bos(s.vocab)
        # each text part is tokenized on its own (with its own space prefix, spelled U+2581)
        assert words(detokenize(s, before)) == ["describe", IMAGE_BEGIN]
        assert words(detokenize(s, after)) == [IMAGE_END, "now"]


def test_small_images_are_scaled_up_to_the_minimum(libs: Any, files: dict[str, Path]) -> None:
    """A 64x48 image would be 2 x 2 tokens; the projector type's minimum is MIN_IMAGE_TOKENS."""
    mtmd = libs.mtmd
    with session(libs, files["text"], files["projector"]) as s:
        with owned_bitmap(libs, solid_bitmap(libs, 255)) as bitmap:
            with tokenized(s, "<__media__>", [bitmap]) as chunks:
                image = image_chunk(s, chunks)
                nx, ny = grid(64, 48)
                assert mtmd.mtmd_input_chunk_get_n_tokens(image) == nx * ny >= MIN_IMAGE_TOKENS
        align = SPATIAL_MERGE * PATCH
        rounded = [math.floor(side / align + 0.5) for side in (64, 48)]
        assert rounded[0] * rounded[1] < MIN_IMAGE_TOKENS  # so the scaling up was needed


# --- evaluating ------------------------------------------------------------------------------


@dataclass
class Run:
    tokens: list[int]  # the greedy continuation
    rows: np.ndarray[Any, np.dtype[np.float32]]  # the image's embeddings
    last_prompt_token: int
    n_past: int  # the position after the prompt


def describe_and_generate(libs: Any, files: dict[str, Path], make_bitmap: Any) -> Run:
    """``describe <image> now`` evaluated with mtmd_helper_eval_chunks (batches of 64), then 8
    greedy tokens."""
    mtmd, ffi = libs.mtmd, libs.ffi
    with session(libs, files["text"], files["projector"]) as s:
        with owned_bitmap(libs, make_bitmap(s)) as bitmap:
            with tokenized(s, "describe <__media__> now", [bitmap]) as chunks:
                rows = image_rows(s, image_chunk(s, chunks))
                n_past = ffi.new("llama_pos *")
                assert (
                    mtmd.mtmd_helper_eval_chunks(s.mctx, s.ctx, chunks, 0, 0, 64, True, n_past) == 0
                )
                assert n_past[0] == mtmd.mtmd_helper_get_n_pos(chunks)
                last = chunk_tokens(s, chunk_list(s, chunks)[-1])[-1]
        memory = libs.llama.llama_get_memory(s.ctx)
        assert libs.llama.llama_memory_seq_pos_max(memory, 0) == n_past[0] - 1
        return Run(greedy(s, n_past[0]), rows, last, n_past[0])


def test_eval_chunks_then_greedy_generation(
    libs: Any, files: dict[str, Path], test_image: Path
) -> None:
    """After the closing text the model continues from its last token (``t + 1`` each step):
    the image in between neither breaks the positions nor the state. Two fresh runs, one with
    the image read from its file and one from its bytes, agree, embeddings included."""
    first = describe_and_generate(libs, files, lambda s: file_bitmap(s, test_image))
    vocab = TEXT_SIZES.vocab
    assert first.tokens == [(first.last_prompt_token + k) % vocab for k in range(1, N_GENERATE + 1)]
    data = test_image.read_bytes()
    second = describe_and_generate(libs, files, lambda s: buffer_bitmap(s, data))
    assert second.tokens == first.tokens and second.n_past == first.n_past
    assert np.array_equal(second.rows, first.rows)


def continue_after_image(libs: Any, files: dict[str, Path], make_bitmap: Any) -> list[int]:
    """``describe <image>``: the text before the image with mtmd's helper, the image rows with
    logits after the last one, then 8 greedy tokens."""
    mtmd, ffi = libs.mtmd, libs.ffi
    with session(libs, files["text"], files["projector"]) as s:
        with owned_bitmap(libs, make_bitmap(s)) as bitmap:
            with tokenized(s, "describe <__media__>", [bitmap]) as chunks:
                opening = chunk_list(s, chunks)[0]
                n_past = ffi.new("llama_pos *")
                status = mtmd.mtmd_helper_eval_chunk_single(
                    s.mctx, s.ctx, opening, 0, 0, 64, False, n_past
                )
                assert status == 0
                after = decode_image_for_logits(s, image_chunk(s, chunks), n_past[0])
        # every image row sits at t = n_past, so the memory's last position is that one, not
        # after - 1: positions after an image must be given (automatic ones would be too low)
        memory = libs.llama.llama_get_memory(s.ctx)
        assert libs.llama.llama_memory_seq_pos_max(memory, 0) == n_past[0] < after - 1
        return greedy(s, after)


def test_the_image_decides_the_continuation(
    libs: Any, files: dict[str, Path], test_image: Path
) -> None:
    """Right after an image the model continues from the token its last 2x2 patch group stands
    for: ``BRIGHT_TOKEN + 1, + 2, ...`` after a light group, from ``DARK_TOKEN`` after a dark
    one. For test-1.jpeg the expected side is read from the pixels of that group."""
    vocab = TEXT_SIZES.vocab

    def after(token: int) -> list[int]:
        return [(token + k) % vocab for k in range(1, N_GENERATE + 1)]

    white = continue_after_image(libs, files, lambda s: solid_bitmap(s.libs, 255))
    black = continue_after_image(libs, files, lambda s: solid_bitmap(s.libs, 0))
    assert white == after(BRIGHT_TOKEN) and black == after(DARK_TOKEN)
    assert white != black

    threshold = 255 * IMAGE_MEAN[0]
    with session(libs, files["text"], files["projector"]) as s:
        with owned_bitmap(libs, file_bitmap(s, test_image)) as bitmap:
            image = pixels(libs, bitmap)
    nx, ny = grid(image.shape[1], image.shape[0], FEW_TOKENS)
    mean = last_group_mean(image, nx, ny)
    assert abs(mean - threshold) > 16  # clearly light or dark, so the expectation is sound
    photo = continue_after_image(libs, files, lambda s: file_bitmap(s, test_image))
    assert photo == after(BRIGHT_TOKEN if mean > threshold else DARK_TOKEN)
    assert photo == continue_after_image(libs, files, lambda s: file_bitmap(s, test_image))


def test_post_decode_callback_sees_rows_and_mrope_positions(
    libs: Any, files: dict[str, Path]
) -> None:
    """mtmd_helper_decode_image_chunk hands each decoded batch to the callback: rows as wide as
    the text model's input embeddings, 4 position sections (t, y, x, z) per row, with
    t = n_past, y = n_past + row, x = n_past + column. A white image's rows all point at the
    bright token's embedding."""
    mtmd, ffi = libs.mtmd, libs.ffi
    seen: list[dict[str, Any]] = []

    def on_batch(view: Any, _data: Any) -> int:
        n, sections = view.n_tokens, view.n_pos
        positions = list(ffi.unpack(view.pos, n * sections))
        rows = np.frombuffer(bytes(ffi.buffer(view.embd, n * view.n_embd * 4)), np.float32)
        seen.append(
            {"n": n, "n_embd": view.n_embd, "sections": sections, "seq": view.seq_id}
            | {"pos": positions, "rows": rows.reshape(n, view.n_embd)}
        )
        return 0

    callback = ffi.callback("mtmd_helper_post_decode_callback", on_batch)
    n_past = 5
    with session(libs, files["text"], files["projector"]) as s:
        with owned_bitmap(libs, solid_bitmap(libs, 255)) as bitmap:
            with tokenized(s, "<__media__>", [bitmap]) as chunks:
                chunk = image_chunk(s, chunks)
                rows = image_rows(s, chunk)
                tokens = mtmd.mtmd_input_chunk_get_tokens_image(chunk)
                nx = mtmd.mtmd_image_tokens_get_nx(tokens)
                n = mtmd.mtmd_input_chunk_get_n_tokens(chunk)
                new_n_past = ffi.new("llama_pos *")
                embd = mtmd.mtmd_get_output_embd(s.mctx)
                status = mtmd.mtmd_helper_decode_image_chunk(
                    s.mctx, s.ctx, chunk, embd, n_past, 0, 64, new_n_past, callback, ffi.NULL
                )
                assert status == 0
                assert new_n_past[0] == n_past + mtmd.mtmd_input_chunk_get_n_pos(chunk)
        n_embd = libs.llama.llama_model_n_embd_inp(s.model)
    assert len(seen) == 1
    (batch,) = seen
    assert (batch["n"], batch["n_embd"], batch["sections"], batch["seq"]) == (n, n_embd, 4, 0)
    assert np.array_equal(batch["rows"], rows)
    t, y, x, z = (batch["pos"][k * n : (k + 1) * n] for k in range(4))
    assert t == [n_past] * n and z == [0] * n
    assert y == [n_past + i // nx for i in range(n)] and x == [n_past + i % nx for i in range(n)]
    bright = token_embeddings(TEXT_SIZES)[BRIGHT_TOKEN]
    cosines = rows @ bright / (np.linalg.norm(rows, axis=1) * np.linalg.norm(bright))
    assert cosines.min() > 0.99
