"""What the parser reads and how: target triples, include folders, clang arguments."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from generator.ir.function import Library
from generator.platforms import DEFAULT_TARGETS, HOST_TARGET

ENTRY_NAME = "llama_bindgen_entry.c"


@functools.lru_cache(maxsize=1)
def freestanding_dir() -> Path:
    """The minimal libc headers (package data) that make parsing work without a sysroot."""
    return Path(__file__).resolve().parent.parent / "freestanding"


@dataclass(frozen=True)
class ParseOptions:
    """One tree, optionally the MTP wrapper header, and the triples to compute layouts for."""

    tree: Path
    wrapper_header: Path | None = None
    targets: tuple[str, ...] = DEFAULT_TARGETS

    @property
    def llama_include(self) -> Path:
        return self.tree / "include"

    @property
    def ggml_include(self) -> Path:
        return self.tree / "ggml" / "include"

    def all_targets(self) -> tuple[str, ...]:
        """Sorted, without duplicates, always including the host triple."""
        return tuple(sorted({HOST_TARGET, *self.targets}))

    def clang_args(self, target: str) -> list[str]:
        args = [
            "-x",
            "c",
            "-std=c11",
            "-nostdinc",
            "-fparse-all-comments",
            "-target",
            target,
            f"-I{freestanding_dir()}",
            f"-I{self.llama_include}",
            f"-I{self.ggml_include}",
        ]
        if self.wrapper_header is not None:
            args.append(f"-I{self.wrapper_header.parent}")
        return args

    def entry_text(self) -> str:
        lines = ['#include "llama.h"']
        if self.wrapper_header is not None:
            lines.append(f'#include "{self.wrapper_header.name}"')
        return "\n".join(lines) + "\n"

    def library_of(self, header: str) -> Library | None:
        """Which library a declaration in file ``header`` (as clang names it) belongs to;
        ``None`` if not ours. Answered once per file name: the parser asks for every cursor."""
        return _library_of(header, *self._library_folders)

    @functools.cached_property
    def _library_folders(self) -> tuple[str | None, str, str]:
        """The wrapper header, llama's and ggml's include folders, resolved."""
        wrapper = self.wrapper_header
        return (
            _resolved(str(wrapper)) if wrapper is not None else None,
            _resolved(str(self.llama_include)),
            _resolved(str(self.ggml_include)),
        )


@functools.lru_cache(maxsize=4096)
def _library_of(
    header: str, wrapper: str | None, llama_include: str, ggml_include: str
) -> Library | None:
    resolved = _resolved(header)
    if wrapper is not None and resolved == wrapper:
        return "llama_mtp"
    folder = os.path.dirname(resolved)
    if folder == llama_include:
        return "llama"
    if folder == ggml_include:
        return "ggml"
    return None


@functools.lru_cache(maxsize=4096)
def _resolved(path: str) -> str:
    """``os.path.realpath``, once per path string."""
    return os.path.realpath(path)


def is_freestanding_header(header: str) -> bool:
    """Whether clang's file name ``header`` is one of our minimal libc headers."""
    return os.path.dirname(_resolved(header)) == _resolved(str(freestanding_dir()))
