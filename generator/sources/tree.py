"""One fetched llama.cpp tree, as every stage after ``fetch`` sees it.

``fetch`` makes it (``FetchResult`` is a Tree plus how the fetch went); parsing, building and
recording take it; ``Tree.read`` makes the same value again from a tree folder's metadata. The
rule for "this tree has the MTP API the wrapper needs" lives here and nowhere else (the wrapper's
CMake project checks the same two facts before it compiles).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from generator.errors import UsageError
from generator.ir.interface import Source
from generator.paths import wrapper_dir
from generator.sources.tree_metadata import TREE_METADATA, load_tree_metadata

MTP_ENUM = "LLAMA_CONTEXT_TYPE_MTP"
SPECULATIVE_HEADER = "common/speculative.h"
WRAPPER_HEADER = "llama_mtp.h"


def mtp_api_missing_reason(root: Path) -> str | None:
    """Why the tree at ``root`` cannot have the MTP wrapper, or None when it can."""
    llama_h = (root / "include" / "llama.h").read_text(encoding="utf-8", errors="replace")
    if MTP_ENUM not in llama_h:
        return f"llama.h has no {MTP_ENUM} (tree predates the MTP API)"
    if not (root / SPECULATIVE_HEADER).is_file():
        return f"{SPECULATIVE_HEADER} is missing"
    return None


@dataclass(frozen=True)
class Tree:
    root: Path
    ref: str
    tag: str
    commit: str
    digest: str
    provider: str

    @property
    def commit12(self) -> str:
        return self.commit[:12]

    @property
    def name(self) -> str:
        """The tag, else the ref it was fetched as, else the short commit."""
        return self.tag or self.ref or self.commit12

    @property
    def mtp_api_missing_reason(self) -> str | None:
        return mtp_api_missing_reason(self.root)

    @property
    def has_mtp_api(self) -> bool:
        return self.mtp_api_missing_reason is None

    @property
    def wrapper_header(self) -> Path | None:
        """The MTP wrapper's header the bindings include, when the tree has the MTP API."""
        header = wrapper_dir() / WRAPPER_HEADER
        return header if self.has_mtp_api and header.is_file() else None

    @property
    def source(self) -> Source:
        """What the IR records about where it came from."""
        return Source(tag=self.tag, commit=self.commit, digest=self.digest)

    @staticmethod
    def read(root: Path) -> Tree:
        """The tree at ``root`` from the metadata ``fetch`` wrote; a hint when there is none."""
        root = root.resolve()
        if not (root / "include" / "llama.h").is_file():
            raise UsageError(f"{root} is not a llama.cpp tree (no include/llama.h)")
        meta = load_tree_metadata(root)
        if meta is None:
            raise UsageError(
                f"{root} has no {TREE_METADATA}: build trees obtained with `llama-bindgen fetch`"
            )
        commit = meta.get("commit", "")
        if len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit):
            raise UsageError(
                f"{root / TREE_METADATA}: 'commit' is not a 40-digit hex commit: {commit!r}"
            )
        return Tree(
            root=root,
            ref=meta.get("ref", ""),
            tag=meta.get("tag", ""),
            commit=commit,
            digest=meta.get("digest", ""),
            provider=meta.get("provider", ""),
        )
