"""The whole parsed API of one llama.cpp tree: the IR's root, with a stable JSON form."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from generator import jsontext
from generator.errors import UsageError
from generator.ir.constant import Constant
from generator.ir.enum_decl import Enum
from generator.ir.function import Function
from generator.ir.record import Record
from generator.ir.typedef import Typedef

IR_FORMAT = 1


@dataclass(frozen=True)
class SkippedMacro:
    """A declaration that is not bound, with the reason: an object-like ``#define`` that is not
    an integer constant expression, a global variable, or an enum never defined."""

    name: str
    header: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "header": self.header, "reason": self.reason}

    @staticmethod
    def from_json(data: dict[str, Any]) -> SkippedMacro:
        return SkippedMacro(data["name"], data["header"], data["reason"])


@dataclass(frozen=True)
class Source:
    """Which llama.cpp tree the IR came from."""

    tag: str
    commit: str
    digest: str

    def to_json(self) -> dict[str, Any]:
        return {"tag": self.tag, "commit": self.commit, "digest": self.digest}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Source:
        return Source(data["tag"], data["commit"], data["digest"])


@dataclass(frozen=True)
class Interface:
    """Every declaration the public headers make. Lists are sorted by name; ``targets`` is
    sorted, and ``host_target`` is the triple whose parse supplied the declarations."""

    source: Source
    host_target: str
    targets: tuple[str, ...]
    headers: tuple[str, ...]
    functions: tuple[Function, ...] = ()
    records: tuple[Record, ...] = ()
    enums: tuple[Enum, ...] = ()
    typedefs: tuple[Typedef, ...] = ()
    constants: tuple[Constant, ...] = ()
    skipped_macros: tuple[SkippedMacro, ...] = ()
    # global variables that are not bound (a static const integer is a constant instead)
    skipped_variables: tuple[SkippedMacro, ...] = ()
    # (target, clang's first errors) of each target whose parse failed: no layouts for it
    failed_targets: tuple[tuple[str, str], ...] = ()
    # enums declared (``enum name;``) but never defined: not bound
    incomplete_enums: tuple[SkippedMacro, ...] = ()
    # (library, why its headers were not parsed) of each optional library the tree lacks
    # (``mtmd``: ``sources.mtmd_api``'s rule; ``ggml_rpc``: ``sources.rpc_api``'s)
    absent_libraries: tuple[tuple[str, str], ...] = ()
    _index: dict[str, Any] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {})
        for kind, items in (
            ("function", self.functions),
            ("record", self.records),
            ("enum", self.enums),
            ("typedef", self.typedefs),
            ("constant", self.constants),
        ):
            for item in items:
                self._index[f"{kind}:{item.name}"] = item

    def function(self, name: str) -> Function | None:
        found: Function | None = self._index.get(f"function:{name}")
        return found

    def record(self, name: str) -> Record | None:
        found: Record | None = self._index.get(f"record:{name}")
        return found

    def enum(self, name: str) -> Enum | None:
        found: Enum | None = self._index.get(f"enum:{name}")
        return found

    def typedef(self, name: str) -> Typedef | None:
        found: Typedef | None = self._index.get(f"typedef:{name}")
        return found

    def constant(self, name: str) -> Constant | None:
        found: Constant | None = self._index.get(f"constant:{name}")
        return found

    def has_library(self, library: str) -> bool:
        """Whether any function belongs to ``library`` (``llama_mtp``: the wrapper header)."""
        return any(f.library == library for f in self.functions)

    def for_targets(self, targets: tuple[str, ...]) -> Interface:
        """The same declarations with layouts and enum sizes for ``targets`` only: what a parse
        for those targets alone gives (the declarations come from the host parse either way)."""
        keep = set(targets)
        if self.host_target not in keep or not keep <= set(self.targets):
            raise ValueError(
                f"{targets} must include {self.host_target} and be among {self.targets}"
            )
        return replace(
            self,
            targets=tuple(t for t in self.targets if t in keep),
            records=tuple(
                replace(r, layouts={t: v for t, v in r.layouts.items() if t in keep})
                for r in self.records
            ),
            enums=tuple(
                replace(e, sizes={t: v for t, v in e.sizes.items() if t in keep})
                for e in self.enums
            ),
        )

    # -- JSON ----------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "format": IR_FORMAT,
            "source": self.source.to_json(),
            "host_target": self.host_target,
            "targets": list(self.targets),
            "headers": list(self.headers),
            "functions": [f.to_json() for f in self.functions],
            "records": [r.to_json() for r in self.records],
            "enums": [e.to_json() for e in self.enums],
            "typedefs": [t.to_json() for t in self.typedefs],
            "constants": [c.to_json() for c in self.constants],
            "skipped_macros": [m.to_json() for m in self.skipped_macros],
            # only when there are any: IRs written before the field stay byte-identical
            **(
                {"skipped_variables": [v.to_json() for v in self.skipped_variables]}
                if self.skipped_variables
                else {}
            ),
            **({"failed_targets": dict(self.failed_targets)} if self.failed_targets else {}),
            **(
                {"incomplete_enums": [e.to_json() for e in self.incomplete_enums]}
                if self.incomplete_enums
                else {}
            ),
            **({"absent_libraries": dict(self.absent_libraries)} if self.absent_libraries else {}),
        }

    def dumps(self) -> str:
        """The canonical JSON text: sorted keys, one declaration per line, trailing newline."""
        return jsontext.dumps(self.to_json(), depth=2) + "\n"

    @staticmethod
    def from_json(data: dict[str, Any]) -> Interface:
        if data.get("format") != IR_FORMAT:
            raise ValueError(f"unsupported IR format {data.get('format')!r}")
        return Interface(
            source=Source.from_json(data["source"]),
            host_target=data["host_target"],
            targets=tuple(data["targets"]),
            headers=tuple(data["headers"]),
            functions=tuple(Function.from_json(f) for f in data["functions"]),
            records=tuple(Record.from_json(r) for r in data["records"]),
            enums=tuple(Enum.from_json(e) for e in data["enums"]),
            typedefs=tuple(Typedef.from_json(t) for t in data["typedefs"]),
            constants=tuple(Constant.from_json(c) for c in data["constants"]),
            skipped_macros=tuple(SkippedMacro.from_json(m) for m in data["skipped_macros"]),
            skipped_variables=tuple(
                SkippedMacro.from_json(v) for v in data.get("skipped_variables", ())
            ),
            failed_targets=tuple(sorted(data.get("failed_targets", {}).items())),
            incomplete_enums=tuple(
                SkippedMacro.from_json(e) for e in data.get("incomplete_enums", ())
            ),
            absent_libraries=tuple(sorted(data.get("absent_libraries", {}).items())),
        )

    @staticmethod
    def loads(text: str) -> Interface:
        loaded: dict[str, Any] = json.loads(text)
        return Interface.from_json(loaded)

    @staticmethod
    def load(path: Path) -> Interface:
        """Read an ``ir.json``; a file that is not one raises :class:`UsageError` naming it."""
        try:
            return Interface.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(
                f"{path}: not an ir.json written by llama-bindgen ({type(exc).__name__}: {exc})"
            ) from exc
