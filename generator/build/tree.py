"""What a build needs to know about a llama.cpp tree: its tag, its commit, whether it has MTP."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from generator.errors import UsageError
from generator.sources.tree_metadata import TREE_METADATA, load_tree_metadata


@dataclass(frozen=True)
class TreeInfo:
    root: Path
    tag: str
    commit: str

    @property
    def commit12(self) -> str:
        return self.commit[:12]

    @property
    def mtp_api_missing_reason(self) -> str | None:
        """Why this tree cannot have the MTP wrapper, or None (mirrors the CMake check)."""
        llama_h = (self.root / "include" / "llama.h").read_text(encoding="utf-8", errors="replace")
        if "LLAMA_CONTEXT_TYPE_MTP" not in llama_h:
            return "llama.h has no LLAMA_CONTEXT_TYPE_MTP (tree predates the MTP API)"
        if not (self.root / "common" / "speculative.h").is_file():
            return "common/speculative.h is missing"
        return None


def read_tree(root: Path) -> TreeInfo:
    """Read ``root``'s fetch metadata; fails with a hint when ``root`` is not a fetched tree."""
    root = root.resolve()
    if not (root / "include" / "llama.h").is_file():
        raise UsageError(f"{root} is not a llama.cpp tree (no include/llama.h)")
    meta_path = root / TREE_METADATA
    meta = load_tree_metadata(root)
    if meta is None:
        raise UsageError(
            f"{root} has no {TREE_METADATA}: build trees obtained with `llama-bindgen fetch`"
        )
    commit = str(meta.get("commit", ""))
    if len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit):
        raise UsageError(f"{meta_path}: 'commit' is not a 40-digit hex commit: {commit!r}")
    tag = str(meta.get("tag") or meta.get("ref") or commit[:12])
    return TreeInfo(root=root, tag=tag, commit=commit)
