"""Function declarations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from generator.ir.ctype import CType

Library = Literal["llama", "ggml", "llama_mtp", "mtmd", "ggml_rpc"]


@dataclass(frozen=True)
class Param:
    name: str
    type: CType

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type.to_json()}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Param:
        return Param(data["name"], CType.from_json(data["type"]))


@dataclass(frozen=True)
class Function:
    """A function declared in a public header.

    ``header`` is the header's file name (``llama.h``), ``library`` the shared library that
    exports it. ``deprecated`` is ``None`` when the function is not deprecated, else clang's
    deprecation message (possibly empty). ``static`` marks ``static``/``static inline``
    functions, which no library exports.
    """

    name: str
    result: CType
    params: tuple[Param, ...]
    variadic: bool
    header: str
    library: Library
    doc: str = ""
    deprecated: str | None = None
    static: bool = False
    # declared without a parameter list (``void f()``): its parameters are unknown
    unprototyped: bool = False
    # a calling convention other than the target's default (clang's name, such as
    # ``X86_64Win64`` for ``__attribute__((ms_abi))``); "" for the default
    calling_convention: str = ""

    def signature(self) -> str:
        """The C prototype without a trailing semicolon."""
        params = [p.type.declare(p.name) for p in self.params]
        if self.variadic:
            params.append("...")
        return self.result.declare(f"{self.name}({', '.join(params) or 'void'})")

    def function_type(self) -> CType:
        return CType(
            "function",
            target=self.result,
            params=tuple(p.type for p in self.params),
            variadic=self.variadic,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "result": self.result.to_json(),
            "params": [p.to_json() for p in self.params],
            "variadic": self.variadic,
            "header": self.header,
            "library": self.library,
            "doc": self.doc,
            "deprecated": self.deprecated,
            "static": self.static,
            # written only when set: IRs made before these fields stay byte-identical
            **({"unprototyped": True} if self.unprototyped else {}),
            **({"calling_convention": self.calling_convention} if self.calling_convention else {}),
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Function:
        return Function(
            name=data["name"],
            result=CType.from_json(data["result"]),
            params=tuple(Param.from_json(p) for p in data["params"]),
            variadic=bool(data["variadic"]),
            header=data["header"],
            library=data["library"],
            doc=data.get("doc", ""),
            deprecated=data.get("deprecated"),
            static=bool(data.get("static", False)),
            unprototyped=bool(data.get("unprototyped", False)),
            calling_convention=str(data.get("calling_convention", "")),
        )
