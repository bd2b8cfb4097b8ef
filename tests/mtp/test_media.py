"""Images in prompts through the runtime (``Model.load_projector``, ``generate(..., media=)``,
content parts in ``chat``), on the synthetic qwen35 models and the synthetic qwen3vl projector
(``generator/testvision.py``), with libmtmd of the host build: the runtime's result equals
libmtmd's own evaluation, images reach the model, every speculative mode gives plain greedy
output after an image (the wrapper's ``llama_mtp_process_embd``), a second chat turn keeps the
image, and misuse is refused with typed errors."""

from __future__ import annotations

import base64
import json
import math
import os
import random
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from generator.testdrafts import write_test_draft
from generator.testimage import solid_png
from generator.testmodel import BYTES_VOCAB_MIN, sizes_from, write_test_model
from generator.testvision import write_test_projector
from tests.mtp.conftest import CHATML_JINJA
from tests.mtp.test_projector import grid
from tests.repo import REPO_ROOT
from tests.runtime.test_media_formats import (
    NOT_SUPPORTED,
    jpeg_declaring,
    png_declaring,
)

N_CTX = 1024


WHITE = solid_png(64, 64, (255, 255, 255))
BLACK = solid_png(64, 64, (0, 0, 0))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Byte-vocabulary models (``agree`` with the chatml template, ``draft``) and a projector
    matched to them."""
    folder = tmp_path_factory.mktemp("media")
    common: dict[str, Any] = {"vocabulary": "bytes", "vocab": BYTES_VOCAB_MIN}
    return {
        "agree": write_test_model(
            folder / "agree.gguf", "agree", chat_template=CHATML_JINJA, **common
        ),
        "draft": write_test_model(folder / "draft.gguf", "draft", **common),
        **{
            kind: write_test_draft(folder / f"{kind}.gguf", kind, **common)
            for kind in ("eagle3-partial", "dflash-partial", "dspark-partial")
        },
        "projector": write_test_projector(
            folder / "projector.gguf", text_sizes=sizes_from(vocab=BYTES_VOCAB_MIN)
        ),
    }


@pytest.fixture(scope="module")
def image(tree_pin: Path) -> Path:
    return tree_pin / "tools" / "mtmd" / "test-1.jpeg"


def open_model(runtime: Any, libs: Any, files: dict[str, Path], **options: Any) -> Any:
    model = runtime.Model(files["agree"], libs=libs, **options)
    model.load_projector(files["projector"], warmup=False)
    return model


def generate(
    runtime: Any,
    libs: Any,
    files: dict[str, Path],
    prompt: str,
    media: list[Any],
    spec: Any = None,
    **options: Any,
) -> Any:
    """One generation with media on a fresh model and context."""
    spec = spec if spec is not None else runtime.SpeculativeDecoding()
    load_mtp = runtime.SpeculativeMode.DRAFT_MTP in spec.kinds
    with open_model(runtime, libs, files, load_mtp=load_mtp) as model:
        with runtime.Context(model, n_ctx=N_CTX, speculative=spec) as ctx:
            return ctx.generate(prompt, media=media, **options)


def libmtmd_log_softmax(libs: Any, files: dict[str, Path], text: str, image: Path) -> list[float]:
    """The log-probabilities after ``text`` with ``image``, computed with libmtmd's own
    tokenizer and evaluation (``mtmd_helper_eval_chunks``), not the runtime's."""
    ffi, llama, mtmd = libs.ffi, libs.llama, libs.mtmd
    model = llama.llama_model_load_from_file(
        str(files["agree"]).encode(), llama.llama_model_default_params()
    )
    cparams = llama.llama_context_default_params()
    cparams.n_ctx = N_CTX
    ctx = llama.llama_init_from_model(model, cparams)
    mparams = mtmd.mtmd_context_params_default()
    mparams.warmup = False
    mctx = mtmd.mtmd_init_from_file(str(files["projector"]).encode(), model, mparams)
    data = image.read_bytes()
    opt = mtmd.mtmd_helper_init_opt_default()
    bitmap = mtmd.mtmd_helper_bitmap_init_from_buf(mctx, data, len(data), False, opt).bitmap
    chunks = mtmd.mtmd_input_chunks_init()
    try:
        source = ffi.new("struct mtmd_input_text *")
        encoded = ffi.new("char[]", text.encode())
        source.text, source.text_len, source.add_special = encoded, len(text.encode()), True
        bitmaps = ffi.new("mtmd_bitmap *[1]", [bitmap])
        assert mtmd.mtmd_tokenize(mctx, chunks, source, bitmaps, 1) == 0
        n_past = ffi.new("llama_pos *")
        n_batch = int(llama.llama_n_batch(ctx))
        assert mtmd.mtmd_helper_eval_chunks(mctx, ctx, chunks, 0, 0, n_batch, True, n_past) == 0
        n_vocab = int(llama.llama_vocab_n_tokens(llama.llama_model_get_vocab(model)))
        logits = ffi.unpack(llama.llama_get_logits_ith(ctx, -1), n_vocab)
    finally:
        mtmd.mtmd_input_chunks_free(chunks)
        mtmd.mtmd_bitmap_free(bitmap)
        mtmd.mtmd_free(mctx)
        llama.llama_free(ctx)
        llama.llama_model_free(model)
    peak = max(logits)
    total = peak + math.log(math.fsum(math.exp(x - peak) for x in logits))
    return [x - total for x in logits]


def test_an_image_prompt_equals_libmtmds_own_evaluation(
    runtime: Any, libs: Any, files: dict[str, Path], image: Path
) -> None:
    text = "look at <__media__> now"
    result = generate(runtime, libs, files, text, [image], max_tokens=1, logprobs=4)
    expected = libmtmd_log_softmax(libs, files, text, image)
    (first,) = result.logprobs
    assert first.token == max(range(len(expected)), key=expected.__getitem__)
    for token, logprob in first.top:
        assert logprob == pytest.approx(expected[token], abs=1e-3)


def test_images_reach_the_model(runtime: Any, libs: Any, files: dict[str, Path]) -> None:
    """The same text with another image gives other log-probabilities; the same image, the
    same ones (so the rows are decoded, not dropped, and deterministically)."""
    text = "see <__media__>."

    def alternatives(media: bytes) -> list[tuple[int, float]]:
        result = generate(runtime, libs, files, text, [media], max_tokens=1, logprobs=3)
        return list(result.logprobs[0].top)

    white, black = alternatives(WHITE), alternatives(BLACK)
    assert white != black
    assert alternatives(WHITE) == white


def test_prompt_positions_and_cells(runtime: Any, libs: Any, files: dict[str, Path]) -> None:
    """An image of nx x ny merged tokens (the projector's preprocessing rule, ``grid``) fills
    nx * ny rows of the KV cache on max(nx, ny) M-RoPE positions."""
    nx, ny = grid(64, 64)
    with open_model(runtime, libs, files) as model:
        prompt = model.projector.tokenize("a <__media__> b", [WHITE])
        (span,) = prompt.spans.values()
        assert (span.n_pos, span.n_tokens) == (max(nx, ny), nx * ny)
        assert prompt.extra_cells == nx * ny - max(nx, ny) > 0
        assert prompt.tokens.count(span.placeholder) == max(nx, ny)
        assert all(t < model.n_vocab for t in prompt.tokens)
        assert prompt.tokens[-1] >= 0  # the prompt ends with text


# name: (strategies, the draft model's file or None)
SPECULATIVE = {
    "draft-mtp": (("draft-mtp",), None),
    "draft-simple": (("draft-simple",), "draft"),
    "draft-eagle3": (("draft-eagle3",), "eagle3-partial"),
    "draft-dflash": (("draft-dflash",), "dflash-partial"),
    "draft-dspark": (("draft-dspark",), "dspark-partial"),
    "ngram-simple": (("ngram-simple",), None),
    "ngram-simple+draft-mtp": (("ngram-simple", "draft-mtp"), None),
}


@pytest.mark.parametrize("name", SPECULATIVE)
def test_speculation_after_an_image_equals_plain_greedy(
    runtime: Any, libs: Any, files: dict[str, Path], image: Path, name: str
) -> None:
    kinds, draft_file = SPECULATIVE[name]
    text = "abcdefghijklmnopqrstuvwxyz0123456789 <__media__> abcd"  # the reply is in the prompt
    plain = generate(runtime, libs, files, text, [image], max_tokens=24)
    draft = runtime.Model(files[draft_file], libs=libs) if draft_file else None
    try:
        spec = runtime.SpeculativeDecoding(strategies=kinds, draft_model=draft)
        fast = generate(runtime, libs, files, text, [image], spec, max_tokens=24)
    finally:
        if draft is not None:
            draft.close()
    assert fast.tokens == plain.tokens
    assert fast.metrics.drafted_tokens > 0 and fast.metrics.accepted_tokens > 0


def test_speculation_when_the_image_comes_right_before_the_last_token(
    runtime: Any, libs: Any, files: dict[str, Path]
) -> None:
    """A prompt whose last token follows the media (a projector whose end marker is one
    token): the first token is then sampled after the whole prompt, and the steps start from
    it. Made here from a tokenized prompt cut one token after its image."""
    spec = runtime.SpeculativeDecoding(runtime.SpeculativeMode.DRAFT_MTP)
    results = []
    for mode in (runtime.SpeculativeDecoding(), spec):
        with open_model(runtime, libs, files, load_mtp=True) as model:
            whole = model.projector.tokenize("see <__media__> then", [BLACK])
            end = max(i for i, t in enumerate(whole.tokens) if t < 0) + 1
            cut = runtime.MediaPrompt(
                whole.projector, whole.tokens[: end + 1], whole.spans, whole.chunks
            )
            with runtime.Context(model, n_ctx=N_CTX, speculative=mode) as ctx:
                results.append(ctx.generate(cut, max_tokens=12))
    plain, fast = results
    assert fast.tokens == plain.tokens and len(fast.tokens) == 12
    assert fast.metrics.accepted_tokens > 0


def data_uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def chat_turn(text: str, media: bytes) -> dict[str, Any]:
    parts = [
        {"type": "text", "text": text},
        {"type": "image_url", "image_url": {"url": data_uri(media)}},
    ]
    return {"role": "user", "content": parts}


def follow_up(first: list[dict[str, Any]], reply: str, text: str) -> list[dict[str, Any]]:
    """``first``, the assistant's ``reply`` and the user's next ``text``."""
    return [*first, {"role": "assistant", "content": reply}, {"role": "user", "content": text}]


@pytest.mark.parametrize("mtp", [False, True], ids=["plain", "draft-mtp"])
def test_a_second_chat_turn_keeps_the_image(
    runtime: Any, libs: Any, files: dict[str, Path], mtp: bool
) -> None:
    mode = runtime.SpeculativeMode.DRAFT_MTP if mtp else runtime.SpeculativeMode.NONE
    spec = runtime.SpeculativeDecoding(mode)
    first = [chat_turn("what is this? ", WHITE)]
    with open_model(runtime, libs, files, load_mtp=mtp) as model:
        with runtime.Context(model, n_ctx=N_CTX, speculative=spec) as ctx:
            reply = ctx.chat(first, max_tokens=6)
            second = follow_up(first, reply.text, "and more?")
            again = ctx.chat(second, max_tokens=6)
        with runtime.Context(model, n_ctx=N_CTX, speculative=spec) as fresh:
            expected = fresh.chat(second, max_tokens=6)
            text = model.apply_chat_template(
                [{"role": "user", "content": "what is this? <__media__>"}]
            )
            by_generate = fresh.generate(text, media=[WHITE], max_tokens=6, reuse_prefix=False)
        tokens = model.projector.tokenize(text, [WHITE]).tokens
    image_end = max(i for i, t in enumerate(tokens) if t < 0) + 1
    assert again.tokens == expected.tokens
    assert again.metrics.prompt_reuse.value in ("kept", "checkpoint")
    assert again.metrics.reused_prompt_tokens >= image_end  # the image was not encoded again
    assert by_generate.tokens == reply.tokens


@pytest.mark.parametrize("mtp", [False, True], ids=["plain", "draft-mtp"])
def test_a_saved_state_keeps_the_image(
    runtime: Any, libs: Any, files: dict[str, Path], mtp: bool
) -> None:
    """A state saved after a turn with an image, loaded into a fresh context, continues the
    chat as the context that saved it does, without encoding the image again."""
    mode = runtime.SpeculativeMode.DRAFT_MTP if mtp else runtime.SpeculativeMode.NONE
    spec = runtime.SpeculativeDecoding(mode)
    first = [chat_turn("what is this? ", BLACK)]
    with open_model(runtime, libs, files, load_mtp=mtp) as model:
        with runtime.Context(model, n_ctx=N_CTX, speculative=spec) as ctx:
            reply = ctx.chat(first, max_tokens=6)
            state = ctx.save_state()
            one = ctx.save_state(seq=0)
            second = follow_up(first, reply.text, "and then?")
            live = ctx.chat(second, max_tokens=6)
        for saved in (state, one):
            with runtime.Context(model, n_ctx=N_CTX, speculative=spec) as fresh:
                fresh.load_state(saved)
                again = fresh.chat(second, max_tokens=6)
            assert again.tokens == live.tokens
            assert again.metrics.prompt_reuse.value in ("kept", "checkpoint")
            assert again.metrics.reused_prompt_tokens == live.metrics.reused_prompt_tokens


def test_a_saved_state_with_media_out_of_place_is_refused(runtime: Any) -> None:
    from llama_bindings.runtime.state import SavedState

    saved = SavedState({}, "sequence", [[5, -9, -9, 6]], b"t", b"", [[(1, 2, 3)]])
    assert SavedState.from_bytes(saved.to_bytes()).media == [[(1, 2, 3)]]
    moved = SavedState({}, "sequence", [[5, -9, -9, 6]], b"t", b"", [[(2, 2, 3)]])
    with pytest.raises(runtime.LlamaStateError, match="not where its sequence holds media"):
        SavedState.from_bytes(moved.to_bytes())


def image_message(url: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}


def test_misuse_is_refused_with_typed_errors(
    runtime: Any, libs: Any, files: dict[str, Path], image: Path, tmp_path: Path
) -> None:
    with runtime.Model(files["agree"], libs=libs) as bare:
        with runtime.Context(bare, n_ctx=N_CTX) as ctx:
            with pytest.raises(runtime.LlamaUnsupportedError, match="no multimodal projector"):
                ctx.generate("<__media__>.", media=[WHITE])
    with open_model(runtime, libs, files) as model:
        with runtime.Context(model, n_ctx=N_CTX) as ctx:
            with pytest.raises(ValueError, match="1 media item"):
                ctx.generate("no marker here", media=[WHITE])
            with pytest.raises(runtime.LlamaMediaError, match="not a supported image"):
                ctx.generate("<__media__>.", media=[b"not an image at all"])
            with pytest.raises(FileNotFoundError):
                ctx.generate("<__media__>.", media=[tmp_path / "missing.png"])
            with pytest.raises(TypeError, match="sequence of media items"):
                ctx.generate("<__media__>.", media=WHITE)
            with pytest.raises(TypeError, match="text holding the media marker"):
                ctx.generate([1, 2, 3], media=[WHITE])
            with pytest.raises(TypeError, match="media"):
                ctx.generate_batch(["<__media__>."], media=[WHITE])
            with open_model(runtime, libs, files) as other:
                foreign = other.projector.tokenize("<__media__>.", [WHITE])
                with pytest.raises(ValueError, match="another model's projector"):
                    ctx.generate(foreign)
            with pytest.raises(runtime.LlamaUnsupportedError, match="not fetched"):
                ctx.chat([image_message("https://example.invalid/x.png")])
            with pytest.raises(runtime.LlamaMediaError, match="base64"):
                ctx.chat([image_message("data:image/png;base64,@@@")])
        with runtime.Context(model, n_ctx=256) as small:  # test-1.jpeg alone is 300 cells
            with pytest.raises(ValueError, match="cells"):
                small.generate("<__media__>.", media=[image])


def test_the_projector_closes_with_its_model(
    runtime: Any, libs: Any, files: dict[str, Path]
) -> None:
    model = open_model(runtime, libs, files)
    projector = model.projector
    assert projector.vision and not projector.audio and projector.uses_mrope
    model.close()
    assert projector.closed
    with pytest.raises(runtime.LlamaClosedError):
        projector.tokenize("<__media__>", [WHITE])
    with open_model(runtime, libs, files) as again:
        again.projector.close()
        with runtime.Context(again, n_ctx=N_CTX) as ctx:
            with pytest.raises(runtime.LlamaClosedError):
                ctx.generate("<__media__>.", media=[WHITE])


# ---- untrusted media: refused before libmtmd decodes them ----------------------------------------


def png_bomb(side: int) -> bytes:
    """A PNG of ``side`` x ``side`` black 1-bit pixels that decodes whole (about 110 KB for
    30000: stb_image would hold 3 bytes a pixel, 2.7 GB)."""
    header = png_declaring(side, side)[:33]  # signature and IHDR, made 1-bit grey below
    header = header[:24] + bytes((1, 0)) + header[26:29]
    header += zlib.crc32(header[12:29]).to_bytes(4, "big")
    packer = zlib.compressobj(9)
    rows = b"\0" * (1 + (side + 7) // 8) * 1000
    data = b"".join(packer.compress(rows) for _ in range(side // 1000)) + packer.flush()
    idat = b"IDAT" + data
    return (
        header
        + len(data).to_bytes(4, "big") + idat + zlib.crc32(idat).to_bytes(4, "big")
        + png_declaring(1, 1)[-12:]  # IEND
    )  # fmt: skip


# run in a child process, so that its peak resident memory is the bomb's alone
BOMB_CHILD = """
import json, resource, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import llama_bindings
from llama_bindings import openai_format
from llama_bindings.runtime import Context, LlamaMediaError, Model
from tests.mtp.test_media import WHITE, data_uri, image_message, png_bomb

lib_dir, model_path, projector_path, bomb_path = sys.argv[3:7]
bomb = png_bomb(30000)
with open(bomb_path, "wb") as file:
    file.write(bomb)
with Model(model_path, libs=llama_bindings.load(lib_dir)) as model:
    model.load_projector(projector_path, warmup=False)
    with Context(model, n_ctx=1024) as ctx:
        ctx.generate("see <__media__>.", media=[WHITE], max_tokens=1)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        errors = []
        tries = [
            lambda: ctx.generate("see <__media__>.", media=[bomb], max_tokens=1),
            lambda: ctx.generate("see <__media__>.", media=[bomb_path], max_tokens=1),
            lambda: ctx.chat([image_message(data_uri(bomb))], max_tokens=1),
            lambda: openai_format.create_chat_completion(
                ctx, [image_message(data_uri(bomb))], max_tokens=1
            ),
        ]
        for attempt in tries:
            try:
                attempt()
            except LlamaMediaError as exc:
                errors.append(str(exc))
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"bytes": len(bomb), "grown_kib": after - before, "errors": errors}))
"""


def test_an_image_over_the_limits_is_refused_before_it_decodes(
    libs: Any, files: dict[str, Path], host_build: Any, tmp_path: Path
) -> None:
    """A 110 KB PNG declaring 30000 x 30000 pixels, as bytes, a path, a data URI in a chat and
    in ``openai_format``: refused with its size and the limit, the process's peak resident
    memory grown by less than 64 MiB (decoded, it would hold 2.7 GB)."""
    arguments = [REPO_ROOT / "generated", REPO_ROOT, host_build.lib_dir, files["agree"]]
    arguments += [files["projector"], tmp_path / "bomb.png"]
    child = subprocess.run(
        [sys.executable, "-c", BOMB_CHILD, *map(str, arguments)],
        capture_output=True, text=True, check=False, cwd=REPO_ROOT,
    )  # fmt: skip
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout.splitlines()[-1])
    assert report["bytes"] < 200_000
    assert len(report["errors"]) == 4
    refusal = "is a PNG image of 30000x30000 pixels, over the limit of 16384 pixels a side"
    assert all(refusal in error for error in report["errors"]), report["errors"]
    assert report["grown_kib"] < 64 * 1024


def test_media_of_no_supported_format_start_no_program(
    runtime: Any, libs: Any, files: dict[str, Path], tmp_path: Path, monkeypatch: Any
) -> None:
    """Bytes of no supported format, as bytes, a path or a data URI, are refused; neither they
    nor an image whose header is sound but whose data does not decode (which libmtmd passes
    to its video path) start ffprobe or ffmpeg, here programs on PATH that leave a mark."""
    folder, mark = tmp_path / "bin", tmp_path / "started"
    folder.mkdir()
    for name in ("ffprobe", "ffmpeg"):
        (folder / name).write_text(f"#!/bin/sh\necho {name} >> '{mark}'\nexit 1\n")
        (folder / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not an image at all\n" * 20)
    other = [random.Random(51).randbytes(4096), text_file, str(text_file)]
    with open_model(runtime, libs, files) as model:
        with runtime.Context(model, n_ctx=N_CTX) as ctx:
            for item in other:
                with pytest.raises(runtime.LlamaMediaError, match=NOT_SUPPORTED):
                    ctx.generate("<__media__>.", media=[item])
            with pytest.raises(runtime.LlamaMediaError, match=NOT_SUPPORTED):
                ctx.chat([image_message(data_uri(text_file.read_bytes()))])
            with pytest.raises(runtime.LlamaMediaError, match="does not decode as PNG"):
                ctx.generate("<__media__>.", media=[png_declaring(64, 64)])  # one row of 64
            with pytest.raises(runtime.LlamaMediaError, match="JPEG image of 65535x65535"):
                ctx.generate("<__media__>.", media=[jpeg_declaring(65535, 65535)])
            with pytest.raises(runtime.LlamaUnsupportedError, match="does not take audio"):
                ctx.generate("<__media__>.", media=[b"RIFF\0\0\0\0WAVEfmt "])
            assert ctx.generate("<__media__>.", media=[WHITE], max_tokens=1).tokens
    assert not mark.exists()


def test_a_projectors_own_image_limits(runtime: Any, libs: Any, files: dict[str, Path]) -> None:
    with runtime.Model(files["agree"], libs=libs) as model:
        with pytest.raises(ValueError, match="max_image_side"):
            model.load_projector(files["projector"], max_image_side=0)
        projector = model.load_projector(files["projector"], warmup=False, max_image_pixels=4095)
        assert (projector.max_image_side, projector.max_image_pixels) == (16384, 4095)
        with pytest.raises(runtime.LlamaMediaError, match="64x64 pixels, over the limit"):
            projector.tokenize("<__media__>", [WHITE])
        assert projector.tokenize("<__media__>", [solid_png(64, 63, (0, 0, 0))]).spans
