"""Canonical JSON text for the large files we emit (``ir.json``, ``abi_manifest.json``).

Sorted keys, two-space indent down to a given depth, and each value below it on one line.
One declaration per line keeps diffs of a bump readable, and it lets the C encoder of the
standard library write the bulk: ``json.dumps(indent=...)`` falls back to the pure-Python
encoder, which was a tenth of ``generate``'s run time.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii  # the C function JSONEncoder uses for strings
from typing import Any

_COMPACT = json.JSONEncoder(sort_keys=True, separators=(", ", ": "))


def dumps(data: Any, depth: int) -> str:
    """``data`` with containers expanded (one item per line) down to ``depth`` levels."""
    return _text(data, depth, "")


def _text(value: Any, depth: int, pad: str) -> str:
    if isinstance(value, str):  # most leaves: straight to C, as the encoder itself would
        return str(encode_basestring_ascii(value))
    if depth <= 0 or not isinstance(value, (dict, list)) or not value:
        return _COMPACT.encode(value)
    inner = pad + "  "
    if isinstance(value, dict):
        items = [
            f"{inner}{encode_basestring_ascii(str(key))}: {_text(value[key], depth - 1, inner)}"
            for key in sorted(value)
        ]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    lines = [f"{inner}{_text(item, depth - 1, inner)}" for item in value]
    return "[\n" + ",\n".join(lines) + f"\n{pad}]"
