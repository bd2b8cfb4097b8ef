"""The invariant every emitted record keeps: cffi lays it out as the compiler does on the host.

cffi computes a cdef record's layout itself, from the declaration alone; the compiler may lay
the same declaration out another way (``#pragma pack`` regions, an empty struct, an enum field
with a fixed underlying type). :func:`layout_mismatches` loads the cdef into cffi and compares
each record that has a layout with clang's for the host target (size, alignment, the offset of
every field that is not a bit-field): a record that differs cannot be bound with a layout, and
:func:`generator.emit.cdef.build_cdef` declares it opaque, listed with the reason.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

from generator.ir import Interface, Record, RecordLayout
from generator.paths import cached_text

# The cache folder of the check's answers: cffi's parse of llama.h and ggml.h costs about a third
# of a second, at every generate and every build's API-module check, for an answer that depends
# only on the declarations, the host layouts and cffi's version.
CACHE_FOLDER = "cffi-layout-checks"


def layout_mismatches(declarations: str, records: list[Record], api: Interface) -> dict[str, str]:
    """Record name -> how cffi's layout of it differs from the compiler's on the host target,
    for the records of ``records`` that have a layout (kept in the cache by its inputs)."""
    backend: Any = importlib.import_module("_cffi_backend")  # its version is cffi's
    laid_out = [
        (record, layout)
        for record in records
        if not record.opaque and (layout := record.layouts.get(api.host_target)) is not None
    ]
    shapes = [
        f"{r.c_name} {json.dumps(layout.to_json(), sort_keys=True)}" for r, layout in laid_out
    ]
    inputs = "\0".join([str(backend.__version__), api.host_target, declarations, *shapes])
    text = cached_text(
        CACHE_FOLDER, inputs, lambda: json.dumps(_mismatches(declarations, laid_out, api))
    )
    found: dict[str, str] = json.loads(text)
    return found


def _mismatches(
    declarations: str, laid_out: list[tuple[Record, RecordLayout]], api: Interface
) -> dict[str, str]:
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(declarations)
    found: dict[str, str] = {}
    for record, layout in laid_out:
        difference = _difference(ffi, record, layout)
        if difference:
            found[record.name] = (
                f"cffi lays it out differently from the compiler on {api.host_target} "
                f"({difference})"
            )
    return found


def _difference(ffi: Any, record: Record, layout: RecordLayout) -> str:
    name = record.c_name
    size, align = int(ffi.sizeof(name)), int(ffi.alignof(name))
    if (size, align) != (layout.size, layout.align):
        return f"size {size} and alignment {align} in cffi, {layout.size} and {layout.align} in C"
    for member in layout.fields:
        if member.bit_width is not None:
            continue  # no offsetof for bit-fields; their storage shows in the size
        try:
            offset = int(ffi.offsetof(name, member.name))
        except (KeyError, TypeError, ffi.error) as exc:
            return f"field {member.name}: cffi has no offset for it ({exc})"
        if offset != member.offset:
            return f"field {member.name} at offset {offset} in cffi, {member.offset} in C"
    return ""
