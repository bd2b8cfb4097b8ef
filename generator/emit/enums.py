"""Python names for C enum members: the C name minus the prefix every member shares."""

from __future__ import annotations

import keyword

from generator.ir import Enum


def _prefix(enum: Enum) -> str:
    names = [m.name for m in enum.members]
    if not names:
        return ""
    own = enum.name.upper() + "_"
    if all(n.startswith(own) for n in names):
        return own
    common = names[0]
    for name in names[1:]:
        while not name.startswith(common):
            common = common[:-1]
    return common[: common.rfind("_") + 1] if "_" in common else ""


def member_names(enum: Enum) -> list[tuple[str, str, int]]:
    """(python name, C name, value) for each member. The prefix is dropped only when every
    shortened name is a valid, distinct identifier; otherwise members keep their C names."""
    prefix = _prefix(enum)
    short = [m.name[len(prefix) :] for m in enum.members]
    usable = (
        bool(prefix)
        and all(
            s.isidentifier() and not keyword.iskeyword(s) and not s.startswith("_") for s in short
        )
        and len(set(short)) == len(short)
    )
    return [
        (s if usable else m.name, m.name, m.value) for s, m in zip(short, enum.members, strict=True)
    ]
