"""What the parser reads and how: target triples, include folders, clang arguments."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from generator.ir.function import Library
from generator.platforms import DEFAULT_TARGETS, HOST_TARGET
from generator.sources import mtmd_api, rpc_api

ENTRY_NAME = "llama_bindgen_entry.c"


@functools.lru_cache(maxsize=1)
def freestanding_dir() -> Path:
    """The minimal libc headers (package data) that make parsing work without a sysroot."""
    return Path(__file__).resolve().parent.parent / "freestanding"


@dataclass(frozen=True)
class ParseOptions:
    """One tree, optionally the MTP wrapper header, and the triples to compute layouts for.
    ``with_mtmd``: parse libmtmd's headers too when the tree has them (``sources.mtmd_api``'s
    rule); ``with_rpc``: likewise ``ggml-rpc.h`` (``sources.rpc_api``'s rule). When a rule does
    not hold, :meth:`absent_libraries` says why."""

    tree: Path
    wrapper_header: Path | None = None
    targets: tuple[str, ...] = DEFAULT_TARGETS
    with_mtmd: bool = True
    with_rpc: bool = True

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
        if self.mtmd_headers:
            args.append(f"-I{self.mtmd_headers[0].parent}")
        return args

    def entry_text(self) -> str:
        lines = ['#include "llama.h"']
        if self.wrapper_header is not None:
            lines.append(f'#include "{self.wrapper_header.name}"')
        lines.extend(f'#include "{header.name}"' for header in self.mtmd_headers)
        if self.rpc_header is not None:  # in ggml's include folder, already searched
            lines.append(f'#include "{self.rpc_header.name}"')
        return "\n".join(lines) + "\n"

    @functools.cached_property
    def _mtmd(self) -> tuple[tuple[Path, ...], str | None]:
        return mtmd_api.headers(self.tree) if self.with_mtmd else ((), None)

    @property
    def mtmd_headers(self) -> tuple[Path, ...]:
        """libmtmd's headers the parse includes (none when the rule does not hold)."""
        return self._mtmd[0]

    @functools.cached_property
    def _rpc(self) -> tuple[Path | None, str | None]:
        return rpc_api.header(self.tree) if self.with_rpc else (None, None)

    @property
    def rpc_header(self) -> Path | None:
        """``ggml-rpc.h`` when the parse includes it (``sources.rpc_api``'s rule holds)."""
        return self._rpc[0]

    def absent_libraries(self) -> tuple[tuple[str, str], ...]:
        """(library, why its headers are not parsed) for each optional library (mtmd, ggml_rpc)
        whose rule the tree fails."""
        reasons = ((mtmd_api.LIBRARY, self._mtmd[1]), (rpc_api.LIBRARY, self._rpc[1]))
        return tuple(sorted((library, why) for library, why in reasons if why is not None))

    def library_of(self, header: str) -> Library | None:
        """Which library a declaration in file ``header`` (as clang names it) belongs to;
        ``None`` if not ours. Answered once per file name: the parser asks for every cursor."""
        return _library_of(header, *self._library_folders)

    @functools.cached_property
    def _library_folders(self) -> tuple[str | None, str, str, tuple[str, ...], str | None]:
        """The wrapper header, llama's and ggml's include folders, the mtmd headers and the RPC
        header, resolved."""
        wrapper, rpc = self.wrapper_header, self.rpc_header
        return (
            _resolved(str(wrapper)) if wrapper is not None else None,
            _resolved(str(self.llama_include)),
            _resolved(str(self.ggml_include)),
            tuple(_resolved(str(h)) for h in self.mtmd_headers),
            _resolved(str(rpc)) if rpc is not None else None,
        )


@functools.lru_cache(maxsize=4096)
def _library_of(
    header: str,
    wrapper: str | None,
    llama_include: str,
    ggml_include: str,
    mtmd: tuple[str, ...],
    rpc: str | None,
) -> Library | None:
    resolved = _resolved(header)
    if wrapper is not None and resolved == wrapper:
        return "llama_mtp"
    if resolved in mtmd:
        return "mtmd"
    if rpc is not None and resolved == rpc:
        return "ggml_rpc"
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
