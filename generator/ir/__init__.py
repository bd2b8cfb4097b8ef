"""The IR: plain dataclasses for everything the public headers declare, one file per kind.

It round-trips through JSON (``Interface.dumps`` / ``Interface.loads``), so emitting bindings and
diffing two releases never need libclang.
"""

from generator.ir.constant import Constant
from generator.ir.ctype import CType
from generator.ir.enum_decl import Enum, EnumMember
from generator.ir.function import Function, Library, Param
from generator.ir.interface import Interface, SkippedMacro, Source
from generator.ir.record import Field, FieldLayout, Record, RecordLayout
from generator.ir.typedef import Typedef

__all__ = [
    "CType",
    "Constant",
    "Enum",
    "EnumMember",
    "Field",
    "FieldLayout",
    "Function",
    "Interface",
    "Library",
    "Param",
    "Record",
    "RecordLayout",
    "SkippedMacro",
    "Source",
    "Typedef",
]
