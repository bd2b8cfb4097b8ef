"""The cross-ABI report: each record's size/align on every IR target, and what moves."""

from __future__ import annotations

from dataclasses import dataclass

from generator.ir.interface import Interface


@dataclass(frozen=True)
class Row:
    name: str
    cells: tuple[str, ...]


def _rows(interface: Interface) -> tuple[list[Row], list[Row], list[Row]]:
    targets = list(interface.targets)
    sizes: list[Row] = []
    differing: list[Row] = []
    for record in sorted(interface.records, key=lambda r: r.name):
        if record.opaque or not record.layouts:
            continue
        cells = []
        for t in targets:
            lay = record.layouts.get(t)
            cells.append(f"{lay.size}/{lay.align}" if lay else "-")
        sizes.append(Row(record.c_name, tuple(cells)))
        names = [f.name for f in next(iter(record.layouts.values())).fields]
        for name in names:
            offsets: list[str] = []
            for t in targets:
                lay = record.layouts.get(t)
                fld = lay.field(name) if lay else None
                offsets.append(str(fld.bit_offset // 8) if fld else "-")
            if len(set(offsets)) > 1:
                differing.append(Row(f"{record.c_name}.{name}", tuple(offsets)))
    enum_rows: list[Row] = []
    for enum in sorted(interface.enums, key=lambda e: e.name):
        cells = [str(enum.sizes[t]) if t in enum.sizes else "-" for t in targets]
        if len(set(cells)) > 1:
            enum_rows.append(Row(enum.c_name, tuple(cells)))
    return sizes, differing, enum_rows


def cross_abi_context(interface: Interface) -> dict[str, list[Row]]:
    """Template variables of ``templates/report/cross_abi.md.j2`` (emitted as CROSS_ABI.md)."""
    rows, differing, enum_rows = _rows(interface)
    return {"abi_rows": rows, "abi_differing": differing, "abi_enum_rows": enum_rows}
