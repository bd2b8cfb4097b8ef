"""An ELF file's dynamic-section entries (read with pyelftools): the soname a library goes under
in a wheel, the libraries it needs, the folders its loader searches."""

from __future__ import annotations

from pathlib import Path


def dynamic_entries(path: Path, kind: str) -> tuple[str, ...]:
    """The values of ``path``'s dynamic entries of one kind (``DT_SONAME``, ``DT_NEEDED``,
    ``DT_RUNPATH``, ``DT_RPATH``), in file order; ``elftools``' ELFError for a file that is not
    ELF."""
    from elftools.elf.dynamic import DynamicSection  # imported when used: not at CLI start-up
    from elftools.elf.elffile import ELFFile

    attribute = kind.removeprefix("DT_").lower()  # pyelftools names each tag's value so
    with path.open("rb") as fh:
        return tuple(
            str(getattr(tag, attribute, ""))
            for section in ELFFile(fh).iter_sections()
            if isinstance(section, DynamicSection)
            for tag in section.iter_tags(kind)
        )
