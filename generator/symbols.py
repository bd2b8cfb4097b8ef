"""Exported functions of built shared libraries: ELF dynamic symbol tables, PE export tables.

``exported_functions(path)`` answers "which C functions can a caller resolve in this library":
for ELF the defined GLOBAL or WEAK FUNC (and GNU_IFUNC) entries of ``.dynsym``; for PE the names
in the export directory.
"""

from __future__ import annotations

from pathlib import Path

import pefile
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from generator.errors import BindgenError

_ELF_MAGIC = b"\x7fELF"
_PE_MAGIC = b"MZ"


class SymbolReadError(BindgenError):
    """A file is not a shared library this module can read."""


def binary_format(path: Path) -> str:
    """``"elf"`` or ``"pe"`` from the file's magic bytes."""
    with path.open("rb") as fh:
        head = fh.read(4)
    if head.startswith(_ELF_MAGIC):
        return "elf"
    if head.startswith(_PE_MAGIC):
        return "pe"
    raise SymbolReadError(f"{path}: neither ELF nor PE")


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


def machine(path: Path) -> str:
    return elf_machine(path) if binary_format(path) == "elf" else pe_machine(path)


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


def exported_functions(path: Path) -> set[str]:
    """Functions ``path`` exports (ELF: defined global/weak FUNC in .dynsym; PE: exports)."""
    if binary_format(path) == "elf":
        return _elf_exported_functions(path)
    return _pe_exported_functions(path)


def exported_functions_of(paths: list[Path]) -> set[str]:
    """Union of the exports of several libraries (ggml is split over ggml, ggml-base, ...)."""
    names: set[str] = set()
    for path in paths:
        names |= exported_functions(path)
    return names
