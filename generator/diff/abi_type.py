"""An ABI key for a C type: two types with the same key are passed and laid out the same way.

Spelling changes that do not change the ABI (``int`` -> ``int32_t``, a new typedef for the same
type, an added ``const``) compare equal; the diff reports them as compatible.
"""

from __future__ import annotations

from generator.ir import CType, Interface

# Integer types whose width is the same on every supported target (ILP32, LP64 and LLP64).
_FIXED: dict[str, str] = {
    "signed char": "i8",
    "int8_t": "i8",
    "unsigned char": "u8",
    "uint8_t": "u8",
    "short": "i16",
    "int16_t": "i16",
    "unsigned short": "u16",
    "uint16_t": "u16",
    "int": "i32",
    "int32_t": "i32",
    "unsigned int": "u32",
    "uint32_t": "u32",
    "long long": "i64",
    "int64_t": "i64",
    "unsigned long long": "u64",
    "uint64_t": "u64",
    "_Bool": "bool",
}


def abi_key(ctype: CType, api: Interface, depth: int = 0) -> str:
    if depth > 32:
        return ctype.declare()
    if ctype.kind == "builtin":
        return _FIXED.get(ctype.name, ctype.name)
    if ctype.kind == "typedef":
        record = api.record(ctype.name)
        if record is not None and record.tagless:
            return f"{record.kind}:{record.name}"
        typedef = api.typedef(ctype.name)
        if typedef is None:
            return f"typedef:{ctype.name}"
        return abi_key(typedef.type, api, depth + 1)
    if ctype.kind in ("struct", "union", "enum"):
        return f"{ctype.kind}:{ctype.name}"
    assert ctype.target is not None or ctype.kind == "function"
    target = abi_key(ctype.target, api, depth + 1) if ctype.target is not None else "?"
    if ctype.kind == "pointer":
        return f"ptr({target})"
    if ctype.kind == "array":
        return f"array({target},{ctype.length})"
    params = ",".join(abi_key(p, api, depth + 1) for p in ctype.params)
    return f"fn({target};{params}{';...' if ctype.variadic else ''})"
