"""Tiny PNG images for tests and the smoke, written with the standard library alone (zlib and
struct): one colour, 8-bit RGB, no interlacing, so any PNG decoder (libmtmd's included) reads
them. Deterministic: the same arguments give identical bytes."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from generator.errors import UsageError

_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def solid_png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A ``width`` x ``height`` PNG of the colour ``rgb``."""
    if width < 1 or height < 1:
        raise UsageError(f"an image needs a positive size, got {width}x{height}")
    if len(rgb) != 3 or not all(0 <= c <= 255 for c in rgb):
        raise UsageError(f"rgb must be three values 0..255, got {rgb!r}")
    row = b"\0" + bytes(rgb) * width  # filter type 0, then the pixels
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (
        _SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(row * height, 9))
        + _chunk(b"IEND", b"")
    )


def write_solid_png(path: Path, width: int, height: int, rgb: tuple[int, int, int]) -> Path:
    """:func:`solid_png` written to ``path``; the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(solid_png(width, height, rgb))
    return path


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)
