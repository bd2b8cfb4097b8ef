"""Exported functions of built shared libraries: ELF dynamic symbol tables, PE export tables,
Mach-O symbol tables.

``exported_functions(path)`` answers "which C functions can a caller resolve in this library":
for ELF the defined GLOBAL or WEAK FUNC (and GNU_IFUNC) entries of ``.dynsym``; for PE the names
in the export directory; for Mach-O (read with macholib) the external symbols defined in the
``__TEXT`` segment, without the leading underscore C names get there.
"""

from __future__ import annotations

from pathlib import Path

import pefile
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection
from macholib import mach_o
from macholib.MachO import MachO, MachOHeader
from macholib.SymbolTable import SymbolTable

from generator.errors import BindgenError

_ELF_MAGIC = b"\x7fELF"
_PE_MAGIC = b"MZ"
# 64-bit Mach-O (either byte order) and universal ("fat") files
_MACHO_MAGICS = (b"\xcf\xfa\xed\xfe", b"\xfe\xed\xfa\xcf", b"\xca\xfe\xba\xbe")
_N_TYPE_SECT = 0x0E  # n_type & N_TYPE: defined in section n_sect


class SymbolReadError(BindgenError):
    """A file is not a shared library this module can read."""


def binary_format(path: Path) -> str:
    """``"elf"``, ``"pe"`` or ``"macho"`` from the file's magic bytes."""
    with path.open("rb") as fh:
        head = fh.read(4)
    if head.startswith(_ELF_MAGIC):
        return "elf"
    if head.startswith(_PE_MAGIC):
        return "pe"
    if head in _MACHO_MAGICS:
        return "macho"
    raise SymbolReadError(f"{path}: neither ELF, PE nor 64-bit Mach-O")


def elf_machine(path: Path) -> str:
    """The ELF ``e_machine`` name (``EM_X86_64``, ``EM_AARCH64``, ...)."""
    with path.open("rb") as fh:
        return str(ELFFile(fh)["e_machine"])


def pe_machine(path: Path) -> str:
    """The PE machine name (``IMAGE_FILE_MACHINE_AMD64``, ...)."""
    pe = pefile.PE(str(path), fast_load=True)
    try:
        return str(pefile.MACHINE_TYPE.get(pe.FILE_HEADER.Machine, hex(pe.FILE_HEADER.Machine)))
    finally:
        pe.close()


def _macho(path: Path) -> tuple[MachO, MachOHeader]:
    try:
        macho = MachO(str(path))
    except (ValueError, OSError, KeyError) as exc:
        raise SymbolReadError(f"{path}: unreadable Mach-O file: {exc}") from exc
    if len(macho.headers) != 1:
        raise SymbolReadError(f"{path}: a universal binary of {len(macho.headers)} architectures")
    return macho, macho.headers[0]


def macho_machine(path: Path) -> str:
    """The Mach-O CPU type as the registry names it (``CPU_TYPE_ARM64``, ``CPU_TYPE_X86_64``)."""
    cputype = _macho(path)[1].header.cputype
    return f"CPU_TYPE_{mach_o.CPU_TYPE_NAMES.get(cputype, hex(cputype)).upper()}"


def machine(path: Path) -> str:
    readers = {"elf": elf_machine, "pe": pe_machine, "macho": macho_machine}
    return readers[binary_format(path)](path)


def _elf_exported_functions(path: Path) -> set[str]:
    names: set[str] = set()
    with path.open("rb") as fh:
        elf = ELFFile(fh)
        section = elf.get_section_by_name(".dynsym")
        if not isinstance(section, SymbolTableSection):
            raise SymbolReadError(f"{path}: no .dynsym section")
        for sym in section.iter_symbols():
            if sym["st_shndx"] == "SHN_UNDEF":
                continue
            if sym["st_info"]["bind"] not in ("STB_GLOBAL", "STB_WEAK"):
                continue
            if sym["st_info"]["type"] not in ("STT_FUNC", "STT_GNU_IFUNC", "STT_LOOS"):
                continue
            if sym["st_other"]["visibility"] not in ("STV_DEFAULT", "STV_PROTECTED"):
                continue
            # Versioned names (foo@@VER) are reported by pyelftools without the version.
            names.add(sym.name)
    return names


def _pe_exported_functions(path: Path) -> set[str]:
    pe = pefile.PE(str(path), fast_load=True)
    try:
        pe.parse_data_directories(
            directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_EXPORT"]]
        )
        exports = getattr(pe, "DIRECTORY_ENTRY_EXPORT", None)
        if exports is None:
            return set()
        return {s.name.decode("ascii") for s in exports.symbols if s.name is not None}
    finally:
        pe.close()


def _macho_exported_functions(path: Path) -> set[str]:
    macho, header = _macho(path)
    text_sections: set[int] = set()  # 1-based section numbers, counted over every segment
    number = 0
    for _load, command, sections in header.commands:
        if isinstance(command, (mach_o.segment_command, mach_o.segment_command_64)):
            for _section in sections:
                number += 1
                if command.segname.rstrip(b"\0") == b"__TEXT":
                    text_sections.add(number)
    names: set[str] = set()
    for nlist, name in SymbolTable(macho, header).extdefsyms:
        if nlist.n_type & _N_TYPE_SECT != _N_TYPE_SECT or nlist.n_sect not in text_sections:
            continue
        text = name.decode("ascii")
        if text.startswith("_"):
            names.add(text[1:])
    return names


def exported_functions(path: Path) -> set[str]:
    """Functions ``path`` exports (ELF: defined global/weak FUNC in .dynsym; PE: exports;
    Mach-O: external symbols defined in ``__TEXT``)."""
    readers = {
        "elf": _elf_exported_functions,
        "pe": _pe_exported_functions,
        "macho": _macho_exported_functions,
    }
    return readers[binary_format(path)](path)


def exported_functions_of(paths: list[Path]) -> set[str]:
    """Union of the exports of several libraries (ggml is split over ggml, ggml-base, ...)."""
    names: set[str] = set()
    for path in paths:
        names |= exported_functions(path)
    return names
