"""One fetched llama.cpp tree, as every stage after ``fetch`` sees it.

``fetch`` makes it (``FetchResult`` is a Tree plus how the fetch went); parsing, building and
recording take it; ``Tree.read`` makes the same value again from a tree folder's metadata. Whether
the tree has the MTP API the wrapper needs is :mod:`generator.sources.mtp_api`'s rule (the
wrapper's CMake project reads the same rule file).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from generator.errors import UsageError
from generator.ir.interface import Source
from generator.paths import wrapper_dir
from generator.releases import UNKNOWN_COMMIT, commit_label, tree_key
from generator.sources.mtp_api import missing_reason
from generator.sources.tree_metadata import TREE_METADATA, load_tree_metadata

WRAPPER_HEADER = "llama_mtp.h"


def mtp_api_missing_reason(root: Path) -> str | None:
    """Why the tree at ``root`` cannot have the MTP wrapper, or None when it can
    (:mod:`generator.sources.mtp_api`'s rule)."""
    return missing_reason(root)


@dataclass(frozen=True)
class Tree:
    """``commit`` is the full commit, or ``""`` when the tree's source states none (a tag taken
    from a PyPI sdist): such a tree is named by its tag and content digest (:attr:`cache_key`)
    and its commit is shown and recorded as :attr:`commit_label`, never guessed."""

    root: Path
    ref: str
    tag: str
    commit: str
    digest: str
    provider: str

    @property
    def commit12(self) -> str:
        """The short commit, for messages ("unknown" when it is)."""
        return self.commit[:12] or UNKNOWN_COMMIT

    @property
    def commit_label(self) -> str:
        """The commit as it is shown and recorded: ``unknown (<provider>)`` when unknown."""
        return commit_label(self.commit, self.provider)

    @property
    def cache_key(self) -> str:
        """The name of the tree's cache folders (``native/<key>``, ``build/<platform>-<key>-…``,
        ``bump/<key>``): the short commit, else ``tag-<tag>-<digest12>``."""
        return tree_key(self.commit, self.tag, self.digest)

    @property
    def name(self) -> str:
        """The tag, else the ref it was fetched as, else the cache key."""
        return self.tag or self.ref or self.cache_key

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
        return Source(tag=self.tag, commit=self.commit_label, digest=self.digest)

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
        if commit and (len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit)):
            raise UsageError(
                f"{root / TREE_METADATA}: 'commit' is neither a 40-digit hex commit nor '' "
                f"(unknown): {commit!r}"
            )
        if not commit and not meta.get("digest", "").startswith("sha256:"):
            raise UsageError(
                f"{root / TREE_METADATA}: the commit is unknown and no content digest names the "
                "tree: fetch it again with `llama-bindgen fetch`"
            )
        return Tree(
            root=root,
            ref=meta.get("ref", ""),
            tag=meta.get("tag", ""),
            commit=commit,
            digest=meta.get("digest", ""),
            provider=meta.get("provider", ""),
        )
