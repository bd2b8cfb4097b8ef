"""Images in prompts through the runtime (``Model.load_projector``, ``generate(..., media=)``,
content parts in ``chat``), on the synthetic qwen35 models and the synthetic qwen3vl projector
(``generator/testvision.py``), with libmtmd of the host build: the runtime's result equals
libmtmd's own evaluation, images reach the model, every speculative mode gives plain greedy
output after an image (the wrapper's ``llama_mtp_process_embd``), a second chat turn keeps the
image, and misuse is refused with typed errors."""

from __future__ import annotations

import base64
import math
from pathlib import Path
from typing import Any

import pytest

from generator.testimage import solid_png
from generator.testmodel import BYTES_VOCAB_MIN, sizes_from, write_test_model
from generator.testvision import write_test_projector
from tests.mtp.conftest import CHATML_JINJA
from tests.mtp.test_projector import grid

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


SPECULATIVE = {
    "draft-mtp": (("draft-mtp",), False),
    "draft-simple": (("draft-simple",), True),
    "ngram-simple": (("ngram-simple",), False),
    "ngram-simple+draft-mtp": (("ngram-simple", "draft-mtp"), False),
}


@pytest.mark.parametrize("name", SPECULATIVE)
def test_speculation_after_an_image_equals_plain_greedy(
    runtime: Any, libs: Any, files: dict[str, Path], image: Path, name: str
) -> None:
    kinds, with_draft = SPECULATIVE[name]
    text = "abcdefghijklmnopqrstuvwxyz0123456789 <__media__> abcd"  # the reply is in the prompt
    plain = generate(runtime, libs, files, text, [image], max_tokens=24)
    draft = runtime.Model(files["draft"], libs=libs) if with_draft else None
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
            with pytest.raises(runtime.LlamaMediaError, match="does not decode"):
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
