"""The checks media bytes pass before libmtmd sees them (``runtime/media.py``): the format told
from the first bytes, an image's size read from its header and refused over the limits, a
truncated or malformed header refused; on crafted headers, nothing native loaded."""

from __future__ import annotations

import random
import struct
import zlib
from typing import Any

import pytest

from generator.testimage import solid_png

NOT_SUPPORTED = "not a supported image \\(PNG, JPEG, GIF, BMP\\) or audio \\(WAV, MP3, FLAC\\)"


def png_declaring(width: int, height: int, first: bytes = b"IHDR") -> bytes:
    """A PNG whose header declares ``width`` x ``height`` (8-bit RGB) and whose data holds one
    row: a few dozen bytes whatever it declares."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunks = [(first, header), (b"IDAT", zlib.compress(b"\0" * 4)), (b"IEND", b"")]
    body = b"".join(
        struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        for kind, data in chunks
    )
    return b"\x89PNG\r\n\x1a\n" + body


def jpeg_declaring(width: int, height: int, frame: int = 0xC0, before: bytes = b"") -> bytes:
    """A JPEG's segments up to its frame header (marker ``frame``), declaring ``width`` x
    ``height``: SOI, an APP0 segment, ``before`` (more segments), the frame header."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0"
    sof = bytes((0xFF, frame)) + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\0"
    return b"\xff\xd8" + app0 + before + sof


def bmp_declaring(width: int, height: int, header: int = 40) -> bytes:
    """A BMP's file header and DIB header (``header`` bytes) declaring ``width`` x ``height``."""
    file_header = b"BM" + struct.pack("<IHHI", 0, 0, 0, 14 + header)
    if header == 12:
        dib = struct.pack("<IHHHH", 12, width, height, 1, 24)
    else:
        dib = struct.pack("<IiiHH", header, width, height, 1, 24).ljust(header, b"\0")
    return file_header + dib


def gif_declaring(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HHBBB", width, height, 0, 0, 0) + b";"


@pytest.fixture(scope="module")
def media(runtime: Any) -> Any:
    return runtime.media


def test_the_limits_by_default(media: Any) -> None:
    assert (media.MAX_IMAGE_SIDE, media.MAX_IMAGE_PIXELS) == (16384, 50_000_000)
    assert media.IMAGE_FORMATS == ("PNG", "JPEG", "GIF", "BMP")
    assert media.AUDIO_FORMATS == ("WAV", "MP3", "FLAC")


@pytest.mark.parametrize(
    ("data", "kind", "size"),
    [
        (solid_png(3, 2, (1, 2, 3)), "PNG", (3, 2)),
        (jpeg_declaring(640, 480), "JPEG", (640, 480)),
        (jpeg_declaring(640, 480, 0xC2), "JPEG", (640, 480)),  # progressive
        (gif_declaring(48, 60), "GIF", (48, 60)),
        (bmp_declaring(7, 5), "BMP", (7, 5)),
        (bmp_declaring(7, -5, 124), "BMP", (7, 5)),  # a negative height: rows top-down
        (bmp_declaring(7, 5, 12), "BMP", (7, 5)),  # OS/2's header
    ],
)
def test_image_headers_give_format_and_size(
    media: Any, data: bytes, kind: str, size: tuple[int, int]
) -> None:
    assert media.media_format(data) == kind
    assert media.image_size(data, kind) == size
    assert media.check_media(data) == kind


def test_jpeg_segments_before_the_frame_are_skipped_by_their_length(media: Any) -> None:
    """An APP1 segment holding a thumbnail's frame header (as Exif does) and fill bytes before
    a marker: the size is the image's, not the thumbnail's."""
    thumbnail = jpeg_declaring(40000, 40000)
    app1 = b"\xff\xe1" + struct.pack(">H", 2 + len(thumbnail)) + thumbnail
    data = jpeg_declaring(320, 200, before=app1 + b"\xff\xff")
    assert media.image_size(data, "JPEG") == (320, 200)


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"RIFF\0\0\0\0WAVEfmt ", "WAV"),
        (b"ID3\x04\0\0\0\0\0\0\0\0", "MP3"),
        (b"\xff\xfb\x90\x64" + bytes(8), "MP3"),  # an MPEG frame's sync word
        (b"fLaC\0\0\0\x22" + bytes(8), "FLAC"),
    ],
)
def test_audio_is_told_as_libmtmd_tells_it(media: Any, data: bytes, kind: str) -> None:
    assert media.media_format(data) == kind
    assert media.check_media(data) == kind


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"just some text, not an image\n" * 4,
        random.Random(51).randbytes(4096),
        b"\0\0\0 ftypisom" + bytes(32),  # an MP4 video
        b"RIFF\0\0\0\0WEBPVP8 " + bytes(16),  # WebP: libmtmd hands it to ffmpeg
        b"\xff\xfb\x90\x64",  # an MPEG sync word under libmtmd's 12 bytes: not audio to it
        b"8BPS" + bytes(32),  # PSD, which stb_image reads and the runtime does not take
    ],
)
def test_other_bytes_are_refused(media: Any, runtime: Any, data: bytes) -> None:
    with pytest.raises(runtime.LlamaMediaError, match=NOT_SUPPORTED):
        media.check_media(data, "the upload")


@pytest.mark.parametrize(
    ("data", "kind", "size"),
    [
        (png_declaring(30000, 30000), "PNG", "30000x30000"),
        (png_declaring(16385, 1), "PNG", "16385x1"),  # one side over
        (png_declaring(8000, 6251), "PNG", "8000x6251"),  # both sides under, all over
        (jpeg_declaring(65535, 65535), "JPEG", "65535x65535"),
        (gif_declaring(65535, 2), "GIF", "65535x2"),
        (bmp_declaring(30000, -30000), "BMP", "30000x30000"),
        (bmp_declaring(1, -(2**31)), "BMP", "1x2147483648"),
    ],
)
def test_images_over_the_limits_are_refused(
    media: Any, runtime: Any, data: bytes, kind: str, size: str
) -> None:
    message = f"the upload is a {kind} image of {size} pixels, over the limit of 16384 pixels a "
    with pytest.raises(runtime.LlamaMediaError, match=message + "side and 50000000 pixels"):
        media.check_media(data, "the upload")


def test_a_projectors_own_limits(media: Any, runtime: Any) -> None:
    data = png_declaring(8000, 6000)
    assert media.check_media(data) == "PNG"  # 48 MP: under the default
    with pytest.raises(runtime.LlamaMediaError, match="limit of 16384 pixels a side and 1000 "):
        media.check_media(data, "x", max_pixels=1000)
    with pytest.raises(runtime.LlamaMediaError, match="limit of 7999 pixels a side"):
        media.check_media(data, "x", max_side=7999)
    assert media.check_media(png_declaring(30000, 30000), "x", 30000, 900_000_000) == "PNG"


@pytest.mark.parametrize(
    ("data", "kind", "reason"),
    [
        (png_declaring(30000, 30000)[:20], "PNG", "at least 24 bytes"),
        (png_declaring(30, 30, first=b"tEXt"), "PNG", "the first chunk is not IHDR"),
        (b"\xff\xd8", "JPEG", "no marker at byte 2"),
        (jpeg_declaring(30, 30)[:-6], "JPEG", "requires a buffer"),  # the frame header cut
        (b"\xff\xd8\xff\xe0\x7f\xff" + bytes(20), "JPEG", "no marker"),  # past the end
        (b"\xff\xd8\xff\xda\0\x08" + bytes(6), "JPEG", "marker 0xDA before the frame header"),
        (b"\xff\xd8\xff\xe0\0\x01", "JPEG", "a segment length of 1"),
        (jpeg_declaring(30, 30, 0xC3), "JPEG", "frame type 0xC3"),  # lossless
        (jpeg_declaring(30, 30, 0xC9), "JPEG", "frame type 0xC9"),  # arithmetic
        (b"GIF89a\x10", "GIF", "requires a buffer"),
        (bmp_declaring(7, 5, 64), "BMP", "a DIB header of 64 bytes"),
        (bmp_declaring(-7, 5), "BMP", "a negative width"),
        (bmp_declaring(7, 5)[:20], "BMP", "requires a buffer"),
    ],
)
def test_truncated_or_malformed_headers_are_refused(
    media: Any, runtime: Any, data: bytes, kind: str, reason: str
) -> None:
    with pytest.raises(runtime.LlamaMediaError, match=f"malformed {kind} header: .*{reason}"):
        media.check_media(data, "the upload")


@pytest.mark.parametrize(
    "data", [png_declaring(0, 10), jpeg_declaring(10, 0), gif_declaring(0, 0), bmp_declaring(0, 3)]
)
def test_images_declaring_no_pixels_are_refused(media: Any, runtime: Any, data: bytes) -> None:
    with pytest.raises(runtime.LlamaMediaError, match=r"image declaring \d+x\d+ pixels"):
        media.check_media(data, "the upload")
