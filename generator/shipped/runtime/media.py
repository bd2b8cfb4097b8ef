"""Images and audio in prompts: a model's multimodal projector (libmtmd's ``mtmd_context``, from
an ``mmproj`` GGUF) and prompts tokenized with their media.

A prompt with media is text holding the projector's marker (:attr:`Projector.marker`, by default
``<__media__>``) once per media item, in order. libmtmd splits it into chunks: text tokens, and
one chunk per media item whose rows are the projector's output embeddings. In the token list a
:class:`MediaPrompt` keeps, a media chunk takes one negative placeholder per position it
advances (``mtmd_input_chunk_get_n_pos``), all equal to a value derived from the media's bytes,
so that positions stay list indices and prefix reuse keeps an image both prompts hold without
encoding it again. A chunk may fill more KV cells than positions (M-RoPE models pin an image's
rows to fewer positions); the difference is counted per sequence (``SequenceMemory.spans``).

Media come as a path (``str`` or ``os.PathLike``) or the file's bytes; the formats are libmtmd's
(its image decoder: JPEG, PNG, BMP, GIF, ...; audio: WAV, MP3, FLAC where the projector has an
audio encoder). In chat messages, content parts in OpenAI's shape: ``{"type": "text", ...}``,
``{"type": "image_url", "image_url": {"url": ...}}`` (a ``data:`` URI, a ``file://`` URI or a
path; remote URLs are not fetched) and ``{"type": "input_audio", "input_audio": {"data": <base64>,
"format": "wav"}}``."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from .._ffi import SYMBOL_ERRORS
from ..errors import LlamaLoadError, LlamaMediaError, LlamaRuntimeError, LlamaUnsupportedError
from ..lifetimes import NativeObject
from ..params import check_count, check_flag
from .llama_log import LLAMA_LOG
from .results import LLAMA_CPP_TAG

if TYPE_CHECKING:
    from .model import Model
    from .results import ChatMessage, ChatMessages

MediaInput = str | os.PathLike[str] | bytes
# libmtmd's default media marker (mtmd_default_marker at b11312); a projector says its own
DEFAULT_MARKER: Final = "<__media__>"
# mtmd_tokenize's results other than 0 (mtmd.h)
_TOKENIZE_ERRORS: Final = {
    1: "the number of media markers in the text differs from the number of media",
    2: "the projector could not preprocess a media item",
}
# mtmd_input_chunk_type (mtmd.h): text is 0
_CHUNK_TEXT: Final = 0
# placeholders are -1 .. -_PLACEHOLDER_SPAN: never a token id, and within llama_token's range
_PLACEHOLDER_SPAN: Final = 1 << 28


def placeholder(media_id: str) -> int:
    """The negative token-list value of every position of a media item whose id is
    ``media_id`` (a hex digest of its bytes)."""
    return -(1 + int(hashlib.sha256(media_id.encode()).hexdigest()[:7], 16) % _PLACEHOLDER_SPAN)


class Projector:
    """A multimodal projector for ``model`` from the ``mmproj`` GGUF at ``path``
    (``mtmd_init_from_file``): it turns images (and audio, where it has an audio encoder) into
    the model's input embeddings. Made by ``Model(..., mmproj=path)`` or
    :meth:`Model.load_projector`, which makes it the model's :attr:`Model.projector`. ``use_gpu``,
    ``n_threads``, ``warmup``, ``image_min_tokens`` and ``image_max_tokens``: libmtmd's
    ``mtmd_context_params`` (default: libmtmd's). A file libmtmd refuses (another model's
    projector, a projector type this release does not know) raises :class:`LlamaLoadError`
    with its reason; libraries without libmtmd raise :class:`LlamaUnsupportedError`. The
    projector is freed before the model (closing the model closes it)."""

    def __init__(
        self,
        model: Model,
        path: str | os.PathLike[str],
        *,
        use_gpu: bool | None = None,
        n_threads: int | None = None,
        warmup: bool | None = None,
        image_min_tokens: int | None = None,
        image_max_tokens: int | None = None,
    ) -> None:
        if not os.path.isfile(path):
            what = "is not a file" if os.path.exists(path) else "does not exist"
            raise FileNotFoundError(2, f"the projector file {what}", os.fspath(path))
        for name, flag in (("use_gpu", use_gpu), ("warmup", warmup)):
            check_flag(flag, name)
        for name, count in (
            ("n_threads", n_threads),
            ("image_min_tokens", image_min_tokens),
            ("image_max_tokens", image_max_tokens),
        ):
            check_count(count, name, 1)
        mtmd = model.libs.mtmd
        if not mtmd:
            raise LlamaUnsupportedError(f"a projector needs libmtmd: {mtmd}")
        model.require_weights("a projector")
        try:  # the helper API this runtime uses (media rows reported after each decode)
            model.ffi.typeof("struct mtmd_helper_embd_batch")
        except model.ffi.error:
            raise LlamaUnsupportedError(
                f"libmtmd of llama.cpp {LLAMA_CPP_TAG} predates the helper API this runtime "
                "uses (mtmd_helper_embd_batch, mtmd_helper_decode_image_chunk with a callback)"
            ) from None
        self.model = model
        self.mtmd: Any = mtmd
        self.ffi: Any = model.ffi
        params = mtmd.mtmd_context_params_default()
        params.print_timings = False
        chosen = {
            "use_gpu": use_gpu,
            "n_threads": n_threads,
            "warmup": warmup,
            "image_min_tokens": image_min_tokens,
            "image_max_tokens": image_max_tokens,
        }
        for name, value in chosen.items():
            if value is not None:
                setattr(params, name, value)
        self._install_log()
        with LLAMA_LOG.capturing() as errors:
            handle = mtmd.mtmd_init_from_file(os.fsencode(path), model.handle, params)
        if handle == self.ffi.NULL:
            raise LlamaLoadError(
                f"libmtmd could not load the projector {os.fspath(path)!r} for this model",
                "; ".join(errors),
            )
        self._native = NativeObject("projector", handle, mtmd.mtmd_free, self.ffi.NULL)
        self._native.depends_on(model.native)
        self._finalizer = self._native.finalize_with(self)
        self.marker: str = self.ffi.string(mtmd.mtmd_get_marker(handle)).decode()
        self.vision = bool(mtmd.mtmd_support_vision(handle))
        self.audio = bool(mtmd.mtmd_support_audio(handle))
        self.uses_mrope = bool(mtmd.mtmd_decode_use_mrope(handle))

    def _install_log(self) -> None:
        """libmtmd logs through its own logger: route it as libllama's (once per library)."""
        llama_callback = LLAMA_LOG.callback_of(self.model.libs)
        if llama_callback is None:
            return
        for setter in ("mtmd_log_set", "mtmd_helper_log_set"):
            try:
                getattr(self.mtmd, setter)(llama_callback, self.ffi.NULL)
            except SYMBOL_ERRORS:  # a libmtmd without this setter logs to stderr
                pass

    @property
    def handle(self) -> Any:
        """The ``mtmd_context *``; :class:`LlamaClosedError` once freed."""
        return self._native.pointer

    @property
    def native(self) -> NativeObject:
        return self._native

    @property
    def closed(self) -> bool:
        return not self._native.alive

    def close(self) -> None:
        """Free the projector; a second call does nothing."""
        self._native.release()
        self._finalizer.detach()

    def __enter__(self) -> Projector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def tokenize(
        self, text: str, media: Sequence[MediaInput], *, parse_special: bool = True
    ) -> MediaPrompt:
        """``text`` (holding :attr:`marker` once per item of ``media``, in order) and its media
        as a :class:`MediaPrompt`. Typed errors: a marker count that differs (``ValueError``), a
        file that is missing (``FileNotFoundError``) or does not decode
        (:class:`LlamaMediaError`), audio for a projector without an audio encoder or an image
        for one without vision (:class:`LlamaUnsupportedError`)."""
        markers = text.count(self.marker)
        if markers != len(media):
            raise ValueError(
                f"the prompt holds the media marker {self.marker!r} {markers} time(s) for "
                f"{len(media)} media item(s): put one marker where each item goes"
            )
        bitmaps = [self._bitmap(item, i) for i, item in enumerate(media)]
        try:
            return self._tokenize(text, bitmaps, parse_special)
        finally:
            for bitmap in bitmaps:
                self.mtmd.mtmd_bitmap_free(bitmap)

    def _tokenize(self, text: str, bitmaps: list[Any], parse_special: bool) -> MediaPrompt:
        ffi, mtmd = self.ffi, self.mtmd
        chunks = ffi.gc(mtmd.mtmd_input_chunks_init(), mtmd.mtmd_input_chunks_free)
        encoded = ffi.new("char[]", text.encode())
        source = ffi.new("struct mtmd_input_text *")
        source.text, source.text_len = encoded, len(encoded) - 1
        source.add_special, source.parse_special = True, parse_special
        array = ffi.new("mtmd_bitmap *[]", bitmaps) if bitmaps else ffi.NULL
        with LLAMA_LOG.capturing() as errors:
            status = int(mtmd.mtmd_tokenize(self.handle, chunks, source, array, len(bitmaps)))
        if status != 0:
            reason = _TOKENIZE_ERRORS.get(status, f"mtmd_tokenize failed ({status})")
            raise LlamaMediaError(f"{reason}: {'; '.join(errors)}")
        return MediaPrompt.read(self, chunks)

    def _bitmap(self, item: MediaInput, index: int) -> Any:
        """A bitmap (image or audio samples) for one media item, its id the item's digest."""
        if isinstance(item, (str, os.PathLike)):
            with open(item, "rb") as file:
                data = file.read()
            what = repr(os.fspath(item))
        elif isinstance(item, (bytes, bytearray, memoryview)):
            data, what = bytes(item), f"media item {index} ({len(item)} bytes)"
        else:
            raise TypeError(
                f"a media item is a path or the file's bytes, got {type(item).__name__}"
            )
        ffi, mtmd = self.ffi, self.mtmd
        buf = ffi.from_buffer(data)
        with LLAMA_LOG.capturing() as errors:
            wrapped = mtmd.mtmd_helper_bitmap_init_from_buf(
                self.handle, buf, len(data), False, mtmd.mtmd_helper_init_opt_default()
            )
        bitmap, video = wrapped.bitmap, wrapped.video_ctx
        if video != ffi.NULL:
            mtmd.mtmd_helper_video_free(video)
            if bitmap != ffi.NULL:
                mtmd.mtmd_bitmap_free(bitmap)
            raise LlamaUnsupportedError(f"{what} is a video: this runtime takes images and audio")
        if bitmap == ffi.NULL:
            detail = "; ".join(errors) or "not an image or audio format libmtmd decodes"
            raise LlamaMediaError(f"{what} does not decode: {detail}")
        audio = bool(mtmd.mtmd_bitmap_is_audio(bitmap))
        if (audio and not self.audio) or (not audio and not self.vision):
            mtmd.mtmd_bitmap_free(bitmap)
            kind = "audio" if audio else "an image"
            raise LlamaUnsupportedError(f"{what} is {kind}, which this projector does not take")
        mtmd.mtmd_bitmap_set_id(bitmap, hashlib.sha256(data).hexdigest().encode())
        return bitmap

    def decode(
        self,
        ctx: Any,
        span: MediaSpan,
        n_past: int,
        seq: int,
        mirror: Callable[[Any], None] | None,
    ) -> None:
        """Encode ``span``'s media and decode its rows into context ``ctx`` at ``n_past`` of
        sequence ``seq``; each batch of rows is passed to ``mirror`` (the speculative sidecar)
        as libmtmd's ``mtmd_helper_embd_batch``."""
        ffi, mtmd, llama = self.ffi, self.mtmd, self.model.llama
        handle = self.handle
        self._native.active_thread = threading.get_ident()  # closing it now is refused
        try:
            with LLAMA_LOG.capturing() as errors:
                status = int(mtmd.mtmd_encode_chunk(handle, span.chunk))
            if status != 0:
                raise LlamaRuntimeError(f"mtmd_encode_chunk failed ({status}): {'; '.join(errors)}")
            embd = mtmd.mtmd_get_output_embd(handle)
            new_n_past = ffi.new("llama_pos *")
            n_batch = int(llama.llama_n_batch(ctx))
            failure: list[BaseException] = []
            callback = _post_decode(ffi, mirror, failure) if mirror is not None else ffi.NULL
            with LLAMA_LOG.capturing() as errors:
                status = int(
                    mtmd.mtmd_helper_decode_image_chunk(
                        handle, ctx, span.chunk, embd, n_past, seq, n_batch, new_n_past,
                        callback, ffi.NULL,
                    )
                )  # fmt: skip
            if failure:
                raise failure[0]
            if status != 0:
                raise LlamaRuntimeError(
                    f"decoding a media chunk failed ({status}): {'; '.join(errors)}"
                )
        finally:
            self._native.active_thread = None


def _post_decode(ffi: Any, mirror: Callable[[Any], None], failure: list[BaseException]) -> Any:
    """The C callback libmtmd calls after each batch of rows it decodes: ``mirror(batch)``; an
    exception is kept in ``failure`` (nothing may leave a callback C calls) and stops it."""

    def on_batch(batch: Any, _data: Any) -> int:
        try:
            mirror(batch)
        except BaseException as exc:
            failure.append(exc)
            return 1
        return 0

    return ffi.callback("mtmd_helper_post_decode_callback", on_batch)


@dataclass(frozen=True)
class MediaSpan:
    """One media chunk of a prompt: its ``mtmd_input_chunk *`` (owned by the prompt's chunks),
    the positions it advances, the KV cells its rows fill, and its placeholder value."""

    chunk: Any
    n_pos: int
    n_tokens: int
    placeholder: int

    @property
    def extra_cells(self) -> int:
        """KV cells its rows fill beyond the positions it advances (M-RoPE images)."""
        return max(0, self.n_tokens - self.n_pos)


@dataclass
class MediaPrompt:
    """A prompt tokenized with its media: ``tokens`` (each media position a negative
    placeholder) and the media spans by their first index; ``chunks`` keeps libmtmd's chunks
    alive."""

    projector: Projector
    tokens: list[int]
    spans: dict[int, MediaSpan]
    chunks: Any

    @classmethod
    def read(cls, projector: Projector, chunks: Any) -> MediaPrompt:
        ffi, mtmd = projector.ffi, projector.mtmd
        tokens: list[int] = []
        spans: dict[int, MediaSpan] = {}
        n_tokens = ffi.new("size_t *")
        for i in range(int(mtmd.mtmd_input_chunks_size(chunks))):
            chunk = mtmd.mtmd_input_chunks_get(chunks, i)
            if int(mtmd.mtmd_input_chunk_get_type(chunk)) == _CHUNK_TEXT:
                text = mtmd.mtmd_input_chunk_get_tokens_text(chunk, n_tokens)
                tokens.extend(int(t) for t in ffi.unpack(text, int(n_tokens[0])))
                continue
            raw_id = mtmd.mtmd_input_chunk_get_id(chunk)
            # without an id (the runtime always sets one) it matches no other media item
            media_id = ffi.string(raw_id).decode() if raw_id != ffi.NULL else os.urandom(16).hex()
            span = MediaSpan(
                chunk,
                int(mtmd.mtmd_input_chunk_get_n_pos(chunk)),
                int(mtmd.mtmd_input_chunk_get_n_tokens(chunk)),
                placeholder(media_id),
            )
            spans[len(tokens)] = span
            tokens.extend([span.placeholder] * span.n_pos)
        return cls(projector, tokens, spans, chunks)

    @property
    def extra_cells(self) -> int:
        """KV cells the media fill beyond the positions they advance."""
        return sum(s.extra_cells for s in self.spans.values())


def media_start(cut: int, spans: Iterable[tuple[int, int]]) -> int:
    """``cut``, or the first index of the media item (``(first index, positions)`` among
    ``spans``) it would fall inside: a media item is decoded, kept or dropped whole."""
    for first, n_pos in spans:
        if first < cut < first + n_pos:
            return first
    return cut


def pieces(
    tokens: Sequence[int], start: int, spans: Mapping[int, MediaSpan], n_batch: int
) -> Iterator[tuple[int, int, MediaSpan | None]]:
    """``tokens[start:]`` as ``(begin, end, span)``: runs of text of at most ``n_batch`` tokens
    (span None) and media spans."""
    begin, n = start, len(tokens)
    starts = sorted(s for s in spans if s >= start)
    for media_start in [*starts, n]:
        while begin < media_start:
            end = min(begin + n_batch, media_start)
            yield begin, end, None
            begin = end
        if media_start < n:
            span = spans[media_start]
            yield media_start, media_start + span.n_pos, span
            begin = media_start + span.n_pos


# ---- chat messages with content parts -----------------------------------------------------------


def chat_media(
    messages: ChatMessages, marker: str
) -> tuple[list[ChatMessage | Mapping[str, Any]], list[MediaInput]]:
    """``messages`` with each content given as parts turned into text (a media part: ``marker``),
    and the media of every message, in order."""
    flat: list[ChatMessage | Mapping[str, Any]] = []
    media: list[MediaInput] = []
    for message in messages:
        if not isinstance(message, Mapping):
            flat.append(message)
            continue
        parts = message_media(message.get("content"), marker)
        if parts is None:
            flat.append(message)
            continue
        text, items = parts
        flat.append({"role": str(message.get("role", "")), "content": text})
        media += items
    return flat, media


def message_media(content: object, marker: str) -> tuple[str, list[MediaInput]] | None:
    """A chat message's content given as OpenAI-style parts: its text (each media part replaced
    by ``marker``) and its media; None for plain text content."""
    if isinstance(content, str) or not isinstance(content, Sequence):
        return None
    texts: list[str] = []
    media: list[MediaInput] = []
    for part in content:
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise ValueError(f"a content part is a mapping with a 'type', got {part!r}")
        kind = part["type"]
        if kind == "text":
            texts.append(str(part.get("text", "")))
        elif kind == "image_url":
            media.append(_image_url(part.get("image_url")))
            texts.append(marker)
        elif kind == "input_audio":
            media.append(_input_audio(part.get("input_audio")))
            texts.append(marker)
        else:
            raise ValueError(
                f"content part type {kind!r} is not one of 'text', 'image_url', 'input_audio'"
            )
    return "".join(texts), media


def _image_url(value: object) -> MediaInput:
    url = value.get("url") if isinstance(value, Mapping) else value
    if not isinstance(url, str):
        raise ValueError(f"an image_url part needs a url string, got {value!r}")
    if url.startswith("data:"):
        header, sep, payload = url.partition(",")
        if not sep or not header.endswith(";base64"):
            raise LlamaMediaError("an image data URI must be base64 (data:<type>;base64,<data>)")
        return _b64(payload, "the image data URI")
    # with the first URL, not with the runtime: urllib.request costs about 25 ms to import
    import urllib.parse  # (with urllib.request, below: about 25 ms)
    import urllib.request  # about 25 ms

    scheme = urllib.parse.urlsplit(url).scheme
    if scheme == "file":
        return urllib.request.url2pathname(urllib.parse.urlsplit(url).path)
    if scheme in ("http", "https"):
        raise LlamaUnsupportedError(
            f"remote images are not fetched ({url!r}): download it and pass its bytes or a data URI"
        )
    return url


def _input_audio(value: object) -> bytes:
    data = value.get("data") if isinstance(value, Mapping) else None
    if not isinstance(data, str):
        raise ValueError(f"an input_audio part needs base64 'data', got {value!r}")
    return _b64(data, "the input_audio data")


def _b64(payload: str, what: str) -> bytes:
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise LlamaMediaError(f"{what} is not valid base64: {exc}") from None
