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

Media come as a path (``str`` or ``os.PathLike``) or the file's bytes. Media are untrusted: before
libmtmd sees them, their format is told from their first bytes (images: PNG, JPEG, GIF, BMP;
audio: WAV, MP3, FLAC, where the projector has an audio encoder; anything else is refused, so
libmtmd never passes bytes to ffmpeg, its video path), and an image's size is read from its
header and refused over :data:`MAX_IMAGE_SIDE` a side or :data:`MAX_IMAGE_PIXELS` in all (a
projector's ``max_image_side``, ``max_image_pixels``) before it is decoded. In chat messages,
content parts in OpenAI's shape: ``{"type": "text", ...}``, ``{"type": "image_url",
"image_url": {"url": ...}}`` (a ``data:`` URI, a ``file://`` URI or a path; remote URLs are not
fetched) and ``{"type": "input_audio", "input_audio": {"data": <base64>, "format": "wav"}}``."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import struct
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
# an image's size limits by default, read from its header before it is decoded: stb_image
# holds 3 bytes a pixel decoded (150 MB at the pixel limit; 48 MP photos and panoramas pass)
MAX_IMAGE_SIDE: Final = 16384
MAX_IMAGE_PIXELS: Final = 50_000_000
# the images passed to libmtmd's decoder (stb_image, which reads them by these signatures; the
# others it reads, PSD, TGA, HDR, PNM and PIC, are refused), and the audio it decodes (miniaudio)
IMAGE_FORMATS: Final = ("PNG", "JPEG", "GIF", "BMP")
AUDIO_FORMATS: Final = ("WAV", "MP3", "FLAC")
_IMAGE_SIGNATURES: Final = (
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"\xff\xd8", "JPEG"),
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
    (b"BM", "BMP"),
)
# JPEG's frame headers (SOF0..SOF15 but DHT, JPG, DAC); stb_image decodes the first three
_JPEG_FRAMES: Final = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_JPEG_STB_FRAMES: Final = frozenset((0xC0, 0xC1, 0xC2))
# BMP's DIB header sizes stb_image reads (12: OS/2's, 16-bit sides)
_BMP_HEADERS: Final = frozenset((12, 40, 56, 108, 124))
# libmtmd's video path would start this program from its folder: a folder that cannot exist
_NO_FFMPEG_DIR: Final = os.fsencode(os.devnull)


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
    ``mtmd_context_params`` (default: libmtmd's). ``max_image_side`` and ``max_image_pixels``:
    the largest image it takes, read from the image's header before it is decoded (default
    :data:`MAX_IMAGE_SIDE`, :data:`MAX_IMAGE_PIXELS`). A file libmtmd refuses (another model's
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
        max_image_side: int | None = None,
        max_image_pixels: int | None = None,
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
            ("max_image_side", max_image_side),
            ("max_image_pixels", max_image_pixels),
        ):
            check_count(count, name, 1)
        self.max_image_side = MAX_IMAGE_SIDE if max_image_side is None else max_image_side
        self.max_image_pixels = MAX_IMAGE_PIXELS if max_image_pixels is None else max_image_pixels
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
        as a :class:`MediaPrompt`. Typed errors: a marker count that differs (``ValueError``),
        a file that is missing (``FileNotFoundError``), bytes of another format, an image over
        the projector's size limits or one that does not decode (:class:`LlamaMediaError`),
        audio for a projector without an audio encoder or an image for one without vision
        (:class:`LlamaUnsupportedError`)."""
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
        kind = check_media(data, what, self.max_image_side, self.max_image_pixels)
        audio = kind in AUDIO_FORMATS
        if (audio and not self.audio) or (not audio and not self.vision):
            taken = "audio" if audio else "images"
            raise LlamaUnsupportedError(f"{what} is {kind}: this projector does not take {taken}")
        ffi, mtmd = self.ffi, self.mtmd
        opt = mtmd.mtmd_helper_init_opt_default()
        no_ffmpeg = ffi.new("char[]", _NO_FFMPEG_DIR)  # an image stb_image fails on goes there
        opt.video_params.ffmpeg_bin_dir = no_ffmpeg
        with LLAMA_LOG.capturing() as errors:
            wrapped = mtmd.mtmd_helper_bitmap_init_from_buf(
                self.handle, ffi.from_buffer(data), len(data), False, opt
            )
        bitmap, video = wrapped.bitmap, wrapped.video_ctx
        if video != ffi.NULL:  # never: ffprobe cannot start
            mtmd.mtmd_helper_video_free(video)
            if bitmap != ffi.NULL:
                mtmd.mtmd_bitmap_free(bitmap)
            raise LlamaUnsupportedError(f"{what} is a video: this runtime takes images and audio")
        if bitmap == ffi.NULL:
            # an image's failure logs only the video path's: stb_image's reason is not logged
            detail = "; ".join(errors) if audio else "its data is corrupt or of a kind it skips"
            raise LlamaMediaError(f"{what} does not decode as {kind}: {detail}")
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


# ---- media bytes, checked before libmtmd sees them ---------------------------------------------


def media_format(data: bytes, what: str = "the media item") -> str:
    """The format of a media item's bytes (``what`` in errors), told from their first bytes:
    audio as libmtmd tells it (``is_audio_file``, first), then the image signatures; anything
    else is a :class:`LlamaMediaError` (libmtmd would try it as a video)."""
    if len(data) >= 12:
        if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
            return "WAV"
        if data[:3] == b"ID3" or (data[0] == 0xFF and data[1] & 0xE0 == 0xE0):  # MPEG sync
            return "MP3"
        if data[:4] == b"fLaC":
            return "FLAC"
    for signature, name in _IMAGE_SIGNATURES:
        if data.startswith(signature):
            return name
    raise LlamaMediaError(
        f"{what} is not a supported image ({', '.join(IMAGE_FORMATS)}) or audio "
        f"({', '.join(AUDIO_FORMATS)}): its first bytes are {data[:8]!r}"
    )


def check_media(
    data: bytes,
    what: str = "the media item",
    max_side: int = MAX_IMAGE_SIDE,
    max_pixels: int = MAX_IMAGE_PIXELS,
) -> str:
    """:func:`media_format` of ``data``, an image's size read from its header: an image over
    ``max_side`` pixels a side or ``max_pixels`` in all, or whose header is truncated or
    malformed, is a :class:`LlamaMediaError` before anything decodes it."""
    kind = media_format(data, what)
    if kind in AUDIO_FORMATS:
        return kind
    width, height = image_size(data, kind, what)
    if width < 1 or height < 1:
        raise LlamaMediaError(f"{what} is a {kind} image declaring {width}x{height} pixels")
    if max(width, height) > max_side or width * height > max_pixels:
        raise LlamaMediaError(
            f"{what} is a {kind} image of {width}x{height} pixels, over the limit of "
            f"{max_side} pixels a side and {max_pixels} pixels in all (the projector's "
            "max_image_side and max_image_pixels)"
        )
    return kind


def image_size(data: bytes, kind: str, what: str = "the image") -> tuple[int, int]:
    """Width and height an image's header declares (``kind``: one of :data:`IMAGE_FORMATS`),
    read as stb_image reads them; a truncated or malformed header is a
    :class:`LlamaMediaError`."""
    try:
        if kind == "PNG":  # the first chunk is IHDR: width, height
            if data[12:16] != b"IHDR":
                raise struct.error("the first chunk is not IHDR")
            return _unpack(">II", data, 16)
        if kind == "GIF":  # the logical screen, which every frame lies inside
            return _unpack("<HH", data, 6)
        if kind == "BMP":
            return _bmp_size(data)
        return _jpeg_size(data)
    except struct.error as exc:
        raise LlamaMediaError(f"{what} has a truncated or malformed {kind} header: {exc}") from None


def _unpack(layout: str, data: bytes, offset: int) -> tuple[int, int]:
    first, second = struct.unpack_from(layout, data, offset)
    return int(first), int(second)


def _bmp_size(data: bytes) -> tuple[int, int]:
    (header,) = struct.unpack_from("<I", data, 14)
    if header not in _BMP_HEADERS:
        raise struct.error(f"a DIB header of {header} bytes")
    if header == 12:
        return _unpack("<HH", data, 18)
    width, height = _unpack("<ii", data, 18)
    if width < 0:  # stb_image reads it unsigned
        raise struct.error(f"a negative width ({width})")
    return width, abs(height)  # a negative height: rows top-down


def _jpeg_size(data: bytes) -> tuple[int, int]:
    """The first frame header's size, the segments before it skipped by their lengths (as
    stb_image does); a scan or the end before any frame header is malformed."""
    at = 2
    while True:
        if data[at : at + 1] != b"\xff":
            raise struct.error(f"no marker at byte {at}")
        while data[at : at + 1] == b"\xff":  # fill bytes
            at += 1
        (marker,) = struct.unpack_from(">B", data, at)
        if marker in (0xD8, 0xD9, 0xDA) or 0xD0 <= marker <= 0xD7 or marker == 0x01:
            raise struct.error(f"marker 0x{marker:02X} before the frame header")
        (length,) = struct.unpack_from(">H", data, at + 1)
        if marker in _JPEG_FRAMES:
            if marker not in _JPEG_STB_FRAMES:  # stb_image would fail, libmtmd try ffmpeg
                raise struct.error(f"frame type 0x{marker:02X} (lossless or arithmetic coding)")
            height, width = _unpack(">HH", data, at + 4)
            return width, height
        if length < 2:
            raise struct.error(f"a segment length of {length}")
        at += 1 + length


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
