"""IR(old) vs IR(new) -> classified changes (the model of libabigail's abidiff report)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Literal, TypeVar

from generator.diff.abi_type import abi_key
from generator.diff.model import ApiDiff, Change, Detail, Side
from generator.ir import CType, Enum, Field, Function, Interface, Record, Typedef
from generator.ir.record import FieldLayout, RecordLayout
from generator.sources import rpc_api
from generator.sources.mtmd_api import LIBRARY as MTMD_LIBRARY

T = TypeVar("T")
WrapperScope = Literal["auto", "include", "exclude"]
WRAPPER_LIBRARY = "llama_mtp"


def wrapper_headers(api: Interface) -> set[str]:
    """Headers that declare functions of the llama_mtp wrapper."""
    return {f.header for f in api.functions if f.library == WRAPPER_LIBRARY}


def without_wrapper(api: Interface) -> Interface:
    """``api`` minus everything the wrapper headers declare."""
    drop = wrapper_headers(api)
    if not drop:
        return api
    return replace(
        api,
        headers=tuple(h for h in api.headers if h not in drop),
        functions=tuple(f for f in api.functions if f.header not in drop),
        records=tuple(r for r in api.records if r.header not in drop),
        enums=tuple(e for e in api.enums if e.header not in drop),
        typedefs=tuple(t for t in api.typedefs if t.header not in drop),
        constants=tuple(c for c in api.constants if c.header not in drop),
        skipped_macros=tuple(m for m in api.skipped_macros if m.header not in drop),
        skipped_variables=tuple(v for v in api.skipped_variables if v.header not in drop),
    )


def _by_name(items: Iterable[T], name: Callable[[T], str]) -> dict[str, T]:
    return {name(item): item for item in items}


def _group_by_target(
    values: dict[str, tuple[str | None, str | None]],
) -> list[tuple[str | None, str | None, tuple[str, ...]]]:
    """(old, new) per target -> [(old, new, targets)] for the targets where they differ."""
    groups: dict[tuple[str | None, str | None], list[str]] = {}
    for target, pair in sorted(values.items()):
        if pair[0] != pair[1]:
            groups.setdefault(pair, []).append(target)
    return [(old, new, tuple(ts)) for (old, new), ts in sorted(groups.items(), key=lambda g: g[1])]


def _offset_text(item: FieldLayout | None) -> str | None:
    if item is None:
        return None
    if item.bit_offset % 8 or item.bit_width is not None:
        return f"{item.offset} (bit {item.bit_offset})"
    return str(item.offset)


# -- functions ---------------------------------------------------------------------------


def _type_detail(
    what: str, name: str, old: CType, new: CType, apis: tuple[Interface, Interface]
) -> Detail | None:
    """A changed type is breaking unless only its spelling changed (same ABI key)."""
    if old.declare() == new.declare():
        return None
    same = abi_key(old, apis[0]) == abi_key(new, apis[1])
    label = f"{what} spelling" if same else what
    return Detail(label, name, not same, old.declare(), new.declare())


def _function_changes(
    old: Function, new: Function, apis: tuple[Interface, Interface]
) -> Change | None:
    details: list[Detail] = []
    result = _type_detail("result type", "", old.result, new.result, apis)
    if result is not None:
        details.append(result)
    if len(old.params) != len(new.params):
        details.append(
            Detail("parameter count", "", True, str(len(old.params)), str(len(new.params)))
        )
    else:
        for index, (a, b) in enumerate(zip(old.params, new.params, strict=True)):
            label = b.name or f"#{index}"
            changed = _type_detail("parameter type", label, a.type, b.type, apis)
            if changed is not None:
                details.append(changed)
            if a.name != b.name:
                details.append(Detail("parameter renamed", label, False, a.name, b.name))
    if old.variadic != new.variadic:
        details.append(Detail("variadic", "", True, str(old.variadic), str(new.variadic)))
    if (old.deprecated is None) != (new.deprecated is None):
        details.append(
            Detail(
                "deprecated" if new.deprecated is not None else "no longer deprecated",
                "",
                False,
                old.deprecated,
                new.deprecated,
            )
        )
    if not details:
        return None
    return Change(
        "function",
        new.name,
        "changed",
        any(d.breaking for d in details),
        old.signature(),
        new.signature(),
        tuple(details),
    )


def _functions(old: Interface, new: Interface) -> list[Change]:
    a = _by_name(old.functions, lambda f: f.name)
    b = _by_name(new.functions, lambda f: f.name)
    changes: list[Change] = []
    for name in sorted(a.keys() | b.keys()):
        if name not in b:
            changes.append(Change("function", name, "removed", True, a[name].signature()))
        elif name not in a:
            changes.append(Change("function", name, "added", False, None, b[name].signature()))
        else:
            change = _function_changes(a[name], b[name], (old, new))
            if change is not None:
                changes.append(change)
    return changes


# -- structs and unions ------------------------------------------------------------------


def _named_fields(record: Record) -> dict[str, Field]:
    """Fields reachable by name, through anonymous members, in order."""
    found: dict[str, Field] = {}

    def visit(fields: tuple[Field, ...]) -> None:
        for item in fields:
            if item.anonymous:
                visit(item.members)
            else:
                found[item.name] = item

    visit(record.fields)
    return found


def _record_text(record: Record) -> str:
    if record.opaque:
        return f"{record.c_name} (opaque)"
    return f"{record.c_name} {{ {'; '.join(_named_fields(record))}; }}"


def _enum_text(enum: Enum) -> str:
    members = ", ".join(f"{m.name} = {m.value}" for m in enum.members)
    return f"{enum.c_name} {{ {members} }}"


def _record_changes(
    old: Record, new: Record, targets: tuple[str, ...], apis: tuple[Interface, Interface]
) -> Change | None:
    kind = new.kind
    if old.kind != new.kind:
        return Change(kind, new.name, "changed", True, old.kind, new.kind)
    if old.opaque or new.opaque:
        if old.opaque == new.opaque:
            return None
        if new.opaque:
            return Change(kind, new.name, "changed", True, "defined", "opaque")
        return Change(kind, new.name, "changed", False, "opaque", "defined")

    common = [t for t in targets if t in old.layouts and t in new.layouts]
    old_layouts: dict[str, RecordLayout] = {t: old.layouts[t] for t in common}
    new_layouts: dict[str, RecordLayout] = {t: new.layouts[t] for t in common}
    old_names = [f.name for f in old_layouts[common[0]].fields] if common else []
    new_names = [f.name for f in new_layouts[common[0]].fields] if common else []
    details: list[Detail] = []

    sizes = _group_by_target(
        {t: (str(old_layouts[t].size), str(new_layouts[t].size)) for t in common}
    )
    aligns = _group_by_target(
        {t: (str(old_layouts[t].align), str(new_layouts[t].align)) for t in common}
    )
    moved: list[Detail] = []
    for name in new_names:
        if name not in old_names:
            continue
        for o, n, ts in _group_by_target(
            {
                t: (
                    _offset_text(old_layouts[t].field(name)),
                    _offset_text(new_layouts[t].field(name)),
                )
                for t in common
            }
        ):
            moved.append(Detail("field moved", name, True, o, n, ts))
    layout_changed = bool(sizes or aligns or moved)

    for name in new_names:
        if name not in old_names:
            offsets = _group_by_target(
                {t: (None, _offset_text(new_layouts[t].field(name))) for t in common}
            )
            for _, n, ts in offsets:
                details.append(Detail("field added", name, layout_changed, None, n, ts))
    for name in old_names:
        if name not in new_names:
            offsets = _group_by_target(
                {t: (_offset_text(old_layouts[t].field(name)), None) for t in common}
            )
            for o, _, ts in offsets:
                details.append(Detail("field removed", name, True, o, None, ts))
    old_fields, new_fields = _named_fields(old), _named_fields(new)
    for name, field in new_fields.items():
        before = old_fields.get(name)
        if before is None:
            continue
        changed = _type_detail("field type", name, before.type, field.type, apis)
        if changed is not None:
            details.append(changed)
        if before.bit_width != field.bit_width:
            details.append(
                Detail("bit width", name, True, str(before.bit_width), str(field.bit_width))
            )
    details.extend(moved)
    for o, n, ts in sizes:
        details.append(Detail("size", "", True, o, n, ts))
    for o, n, ts in aligns:
        details.append(Detail("align", "", True, o, n, ts))
    if not details:
        return None
    return Change(
        kind, new.name, "changed", any(d.breaking for d in details), details=tuple(details)
    )


def _records(old: Interface, new: Interface, targets: tuple[str, ...]) -> list[Change]:
    a = _by_name(old.records, lambda r: r.name)
    b = _by_name(new.records, lambda r: r.name)
    changes: list[Change] = []
    for name in sorted(a.keys() | b.keys()):
        if name not in b:
            changes.append(Change(a[name].kind, name, "removed", True, _record_text(a[name])))
        elif name not in a:
            changes.append(Change(b[name].kind, name, "added", False, None, _record_text(b[name])))
        else:
            change = _record_changes(a[name], b[name], targets, (old, new))
            if change is not None:
                changes.append(change)
    return changes


# -- enums, typedefs, constants ----------------------------------------------------------


def _enum_changes(old: Enum, new: Enum, targets: tuple[str, ...]) -> Change | None:
    details: list[Detail] = []
    old_values = {m.name: m.value for m in old.members}
    new_values = {m.name: m.value for m in new.members}
    for member in new.members:
        if member.name not in old_values:
            details.append(Detail("member added", member.name, False, None, str(member.value)))
        elif old_values[member.name] != member.value:
            details.append(
                Detail(
                    "member renumbered",
                    member.name,
                    True,
                    str(old_values[member.name]),
                    str(member.value),
                )
            )
    for member in old.members:
        if member.name not in new_values:
            details.append(Detail("member removed", member.name, True, str(member.value), None))
    common = [t for t in targets if t in old.sizes and t in new.sizes]
    for o, n, ts in _group_by_target({t: (str(old.sizes[t]), str(new.sizes[t])) for t in common}):
        details.append(Detail("size", "", True, o, n, ts))
    if not details:
        return None
    return Change(
        "enum", new.name, "changed", any(d.breaking for d in details), details=tuple(details)
    )


def _enums(old: Interface, new: Interface, targets: tuple[str, ...]) -> list[Change]:
    a = _by_name(old.enums, lambda e: e.name)
    b = _by_name(new.enums, lambda e: e.name)
    changes: list[Change] = []
    for name in sorted(a.keys() | b.keys()):
        if name not in b:
            changes.append(Change("enum", name, "removed", True, _enum_text(a[name])))
        elif name not in a:
            members = tuple(
                Detail("member added", m.name, False, None, str(m.value)) for m in b[name].members
            )
            changes.append(
                Change("enum", name, "added", False, None, _enum_text(b[name]), details=members)
            )
        else:
            change = _enum_changes(a[name], b[name], targets)
            if change is not None:
                changes.append(change)
    return changes


def _typedefs(old: Interface, new: Interface) -> list[Change]:
    a: dict[str, Typedef] = _by_name(old.typedefs, lambda t: t.name)
    b: dict[str, Typedef] = _by_name(new.typedefs, lambda t: t.name)
    changes: list[Change] = []
    for name in sorted(a.keys() | b.keys()):
        if name not in b:
            changes.append(Change("typedef", name, "removed", True, a[name].type.declare(name)))
        elif name not in a:
            changes.append(
                Change("typedef", name, "added", False, None, b[name].type.declare(name))
            )
        elif a[name].type.declare() != b[name].type.declare():
            changes.append(
                Change(
                    "typedef",
                    name,
                    "changed",
                    abi_key(a[name].type, old) != abi_key(b[name].type, new),
                    a[name].type.declare(name),
                    b[name].type.declare(name),
                )
            )
    return changes


def _constants(old: Interface, new: Interface) -> list[Change]:
    a = {c.name: c.value for c in old.constants}
    b = {c.name: c.value for c in new.constants}
    changes: list[Change] = []
    for name in sorted(a.keys() | b.keys()):
        if name not in b:
            changes.append(Change("constant", name, "removed", True, str(a[name])))
        elif name not in a:
            changes.append(Change("constant", name, "added", False, None, str(b[name])))
        elif a[name] != b[name]:
            changes.append(Change("constant", name, "changed", True, str(a[name]), str(b[name])))
    return changes


# The optional libraries (each parsed only when its rule holds for the tree), as notes name them.
_OPTIONAL_LIBRARIES = (
    (MTMD_LIBRARY, "libmtmd (mtmd.h, mtmd-helper.h)"),
    (rpc_api.LIBRARY, f"libggml-rpc ({rpc_api.HEADER})"),
)


def _optional_library_notes(old: Interface, new: Interface) -> list[str]:
    """A line for each optional library that one side carries and the other does not: its
    declarations are then all added or all removed below, and the note says why the other side
    lacks them."""
    notes = []
    for library, described in _OPTIONAL_LIBRARIES:
        old_has, new_has = old.has_library(library), new.has_library(library)
        if old_has == new_has:
            continue
        lacking = old if new_has else new
        why = dict(lacking.absent_libraries).get(library, "its parse did not include them")
        change = "added" if new_has else "removed"
        side = "old" if new_has else "new"
        notes.append(f"{described} is {change}: the {side} side lacks it ({why})")
    return notes


def side_of(api: Interface, label: str) -> Side:
    return Side(api.source.tag, api.source.commit, api.source.digest, label)


def compare(
    old: Interface,
    new: Interface,
    old_label: str = "",
    new_label: str = "",
    wrapper: WrapperScope = "auto",
) -> ApiDiff:
    """Every difference between two IRs, each classified ABI-breaking or compatible. Layouts
    are compared on the targets both IRs have. The llama_mtp wrapper's declarations take part
    when ``wrapper`` is ``include``, or ``auto`` and both sides have them."""
    notes: list[str] = []
    old_has, new_has = bool(wrapper_headers(old)), bool(wrapper_headers(new))
    if wrapper == "exclude" or (wrapper == "auto" and old_has != new_has):
        if old_has or new_has:
            notes.append(
                "llama_mtp wrapper declarations are left out of this comparison "
                f"(old has them: {'yes' if old_has else 'no'}, "
                f"new has them: {'yes' if new_has else 'no'})"
            )
        old, new = without_wrapper(old), without_wrapper(new)
    notes += _optional_library_notes(old, new)
    targets = tuple(t for t in new.targets if t in old.targets)
    changes = [
        *_functions(old, new),
        *_records(old, new, targets),
        *_enums(old, new, targets),
        *_typedefs(old, new),
        *_constants(old, new),
    ]
    return ApiDiff(
        side_of(old, old_label or old.source.tag or old.source.commit[:7]),
        side_of(new, new_label or new.source.tag or new.source.commit[:7]),
        targets,
        tuple(changes),
        tuple(notes),
    )
