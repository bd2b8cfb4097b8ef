"""The metadata ``llama-bindgen fetch`` writes beside a verified tree (ref, tag, commit, digest,
provider): one reader for everything that needs to know which tree it was given."""

from __future__ import annotations

import json
from pathlib import Path

from generator.errors import SourceError

TREE_METADATA = ".llama-bindgen-tree.json"


def load_tree_metadata(tree: Path) -> dict[str, str] | None:
    """The tree's metadata, or None when it has none; a file that is not a JSON object is an
    error (a tree someone edited is not one we verified)."""
    path = tree / TREE_METADATA
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SourceError(f"{path}: not readable JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise SourceError(f"{path}: not a JSON object")
    return {str(k): str(v) for k, v in data.items()}
