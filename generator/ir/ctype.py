"""C types as the IR sees them: a small tree that can print itself as a C declarator."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

CTypeKind = Literal["builtin", "typedef", "struct", "union", "enum", "pointer", "array", "function"]


@dataclass(frozen=True)
class CType:
    """One C type.

    * ``builtin``: ``name`` is the C spelling (``int``, ``unsigned long``, ``bool``) or a standard
      typedef from the freestanding headers (``int32_t``, ``size_t``, ``FILE``).
    * ``typedef`` / ``struct`` / ``union`` / ``enum``: ``name`` is the declared name.
    * ``pointer``: ``target`` is the pointee; ``array``: ``target`` is the element and ``length``
      the element count (``None`` for ``[]``); ``function``: ``target`` is the result type,
      ``params`` the parameter types and ``variadic`` says whether it ends in ``...``.
    """

    kind: CTypeKind
    name: str = ""
    const: bool = False
    target: CType | None = None
    length: int | None = None
    params: tuple[CType, ...] = field(default_factory=tuple)
    variadic: bool = False

    # -- construction helpers ------------------------------------------------------------

    @staticmethod
    def builtin(name: str, const: bool = False) -> CType:
        return CType("builtin", name, const)

    @staticmethod
    def pointer(target: CType, const: bool = False) -> CType:
        return CType("pointer", const=const, target=target)

    # -- queries -------------------------------------------------------------------------

    @property
    def is_void(self) -> bool:
        return self.kind == "builtin" and self.name == "void"

    @property
    def is_function_pointer(self) -> bool:
        return self.kind == "pointer" and self.target is not None and self.target.kind == "function"

    def referenced_names(self) -> set[tuple[str, str]]:
        """Every (kind, name) of a named struct/union/enum/typedef this type mentions."""
        found: set[tuple[str, str]] = set()
        if self.kind in ("typedef", "struct", "union", "enum") and self.name:
            found.add((self.kind, self.name))
        if self.target is not None:
            found |= self.target.referenced_names()
        for param in self.params:
            found |= param.referenced_names()
        return found

    # -- printing ------------------------------------------------------------------------

    def with_base(self, base: CType) -> CType:
        """This type with the type under its arrays and pointers replaced by ``base`` (which
        keeps the replaced type's ``const``)."""
        if self.kind in ("array", "pointer") and self.target is not None:
            return replace(self, target=self.target.with_base(base))
        return replace(base, const=base.const or self.const)

    def declare(self, declarator: str = "") -> str:
        """The C declaration of ``declarator`` with this type (``""`` gives the abstract type)."""
        text = self._declare(declarator)
        return " ".join(text.split())

    def _declare(self, inner: str) -> str:
        const = "const " if self.const else ""
        if self.kind == "builtin" or self.kind == "typedef":
            return f"{const}{self.name} {inner}".strip()
        if self.kind in ("struct", "union", "enum"):
            return f"{const}{self.kind} {self.name} {inner}".strip()
        assert self.target is not None
        if self.kind == "pointer":
            if self.target.kind in ("function", "array"):
                core = f"* const {inner}" if self.const else f"*{inner}"
                return self.target._declare(f"({core.strip()})")
            if self.const:
                wrapped = f"* const {inner}"
            elif inner.startswith("*"):
                wrapped = f"*{inner}"
            else:
                wrapped = f"* {inner}"
            return self.target._declare(wrapped.strip())
        if self.kind == "array":
            size = "" if self.length is None else str(self.length)
            return self.target._declare(f"{inner}[{size}]")
        # function
        params = [p.declare() for p in self.params]
        if self.variadic:
            params.append("...")
        if not params:
            params = ["void"]
        return self.target._declare(f"{inner}({', '.join(params)})")

    def __str__(self) -> str:
        return self.declare()

    # -- JSON ----------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind}
        if self.name:
            data["name"] = self.name
        if self.const:
            data["const"] = True
        if self.target is not None:
            data["target"] = self.target.to_json()
        if self.length is not None:
            data["length"] = self.length
        if self.kind == "function":
            data["params"] = [p.to_json() for p in self.params]
            data["variadic"] = self.variadic
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> CType:
        target = data.get("target")
        return CType(
            kind=data["kind"],
            name=data.get("name", ""),
            const=bool(data.get("const", False)),
            target=CType.from_json(target) if target is not None else None,
            length=data.get("length"),
            params=tuple(CType.from_json(p) for p in data.get("params", ())),
            variadic=bool(data.get("variadic", False)),
        )
