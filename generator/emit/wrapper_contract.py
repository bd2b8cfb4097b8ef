"""The wrapper contract's values for the shipped runtime, generated from ``llama_mtp.h``.

The header is the contract's one home: its ``enum llama_mtp_strategy_type`` (a strategy's name is
the enumerator's suffix in lower case with ``-`` for ``_``, the rule the wrapper's
``llama_mtp_strategy_name`` follows), ``LLAMA_MTP_DRAFT_CONTEXT_STRATEGIES`` (one bit per
draft-context strategy) and its limits (plain constants). This module turns them into the data
``constants.py`` renders: ``SpeculativeMode`` and its tables, and the enumerators the runtime
reads as plain integers (importing ``enums`` would cost it milliseconds of enum creation). A tree
without the MTP API has no wrapper declarations: ``SpeculativeMode`` is then ``none`` alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from generator.errors import BindgenError
from generator.ir import Interface
from generator.paths import wrapper_dir
from generator.sources.tree import WRAPPER_HEADER

STRATEGY_ENUM = "llama_mtp_strategy_type"
STRATEGY_PREFIX = "LLAMA_MTP_STRATEGY_"
DRAFT_CONTEXT_MASK = "LLAMA_MTP_DRAFT_CONTEXT_STRATEGIES"
# Enums whose enumerators the runtime reads from ``constants`` (by their C names).
RUNTIME_ENUMS = ("ggml_log_level", "llama_mtp_status")
RUNTIME_HEADER = "llama.h"  # the interfaces the shipped runtime runs on


STATUS_PREFIX = "LLAMA_MTP_STATUS_"


@dataclass(frozen=True)
class StrategyValue:
    member: str  # SpeculativeMode's member name (the enumerator's suffix)
    name: str  # llama.cpp's --spec-type name
    value: int  # its llama_mtp_strategy_type value
    draft_context: bool


def strategy_name(enumerator: str) -> str:
    """llama_mtp.h's rule: ``LLAMA_MTP_STRATEGY_NGRAM_MAP_K4V`` -> ``ngram-map-k4v``."""
    return enumerator.removeprefix(STRATEGY_PREFIX).lower().replace("_", "-")


def status_name(enumerator: str) -> str:
    """llama_mtp.h's rule (``llama_mtp_status_name``): ``LLAMA_MTP_STATUS_NOT_IN_RELEASE`` ->
    ``not_in_release``."""
    return enumerator.removeprefix(STATUS_PREFIX).lower()


@cache
def header_macro(name: str) -> int:
    """An integer ``#define`` of the wrapper header this tool ships (``LLAMA_MTP_DRAFT_DEFAULT``),
    for the tool's own defaults where no parse of a tree is at hand."""
    text = (wrapper_dir() / WRAPPER_HEADER).read_text(encoding="utf-8")
    found = re.search(rf"^#define\s+{re.escape(name)}\s+(\d+)\s*$", text, re.M)
    if found is None:
        raise BindgenError(f"{WRAPPER_HEADER} defines no integer {name}")
    return int(found.group(1))


def strategies(api: Interface) -> list[StrategyValue]:
    """Every strategy the wrapper header declares, in its enum's order ([] without it)."""
    enum = next((e for e in api.enums if e.name == STRATEGY_ENUM), None)
    if enum is None:
        return []
    mask_constant = api.constant(DRAFT_CONTEXT_MASK)
    if mask_constant is None:
        raise BindgenError(f"llama_mtp.h declares {STRATEGY_ENUM} but not {DRAFT_CONTEXT_MASK}")
    mask = mask_constant.value
    return [
        StrategyValue(
            m.name.removeprefix(STRATEGY_PREFIX),
            strategy_name(m.name),
            m.value,
            bool((mask >> m.value) & 1),
        )
        for m in enum.members
    ]


def runtime_enumerators(api: Interface) -> list[dict[str, Any]]:
    """The members of :data:`RUNTIME_ENUMS` the tree declares, as plain constants."""
    return [
        {"name": m.name, "value": m.value, "header": e.header, "enum": e.c_name}
        for e in api.enums
        if e.name in RUNTIME_ENUMS
        for m in e.members
    ]


def contract_context(api: Interface) -> dict[str, Any]:
    """What ``constants.py.j2`` renders of the contract: for a llama.cpp interface (the runtime's
    ground; other headers, such as the goldens', get their constants alone)."""
    return {
        "runtime_contract": RUNTIME_HEADER in api.headers,
        "strategies": strategies(api),
        "runtime_enumerators": runtime_enumerators(api),
    }
