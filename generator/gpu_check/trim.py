"""The trimmed copy of a llama.cpp tree that a GPU check carries to a machine with no network.

A fetched tree is 176 MB (models/, docs/, tests, every backend); what the CPU and CUDA builds of
llama.cpp + the MTP wrapper read is a small part of it: :data:`KEEP` (the top-level build files,
the libraries' sources, ``vendor/``, ``tools/mtmd`` for libmtmd and the smoke's test image, the
licence files) minus ggml's other backends (:data:`DROPPED_BACKENDS`: ggml adds a backend's folder
only when its ``GGML_<NAME>`` option is on).

The copy is not the verified tree: its metadata records its own content digest, the verified
tree's digest as ``trimmed_from``, ``pinned`` false and a provider that says it is a trimmed copy.
It keeps the commit, so the committed bindings (made from that commit) are checked against it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from generator.sources.digest import DIGEST_ALGORITHM, tree_digest
from generator.sources.tree import Tree
from generator.sources.tree_metadata import TREE_METADATA

# Top-level entries (and tools/mtmd) of the tree that the builds read.
KEEP: tuple[str, ...] = (
    "CMakeLists.txt",
    "LICENSE",
    "licenses",
    "cmake",
    "common",
    "ggml",
    "include",
    "src",
    "vendor",
    "tools/mtmd",
)
# ggml's backends other than the CPU's, CUDA's and RPC's (every build has RPC: GGML_RPC in
# platforms.BASE_CMAKE_OPTIONS) and BLAS (small), by folder under ggml/src.
DROPPED_BACKENDS: tuple[str, ...] = (
    "ggml-cann", "ggml-et", "ggml-hexagon", "ggml-hip", "ggml-metal", "ggml-musa",
    "ggml-opencl", "ggml-openvino", "ggml-sycl", "ggml-virtgpu", "ggml-vulkan",
    "ggml-webgpu", "ggml-zdnn", "ggml-zendnn",
)  # fmt: skip
TRIMMED_PROVIDER = "a trimmed copy (llama-bindgen gpu-check kit) of {provider}"


def _ignore_dropped(folder: str, names: list[str]) -> set[str]:
    if Path(folder).as_posix().endswith("ggml/src"):
        return {n for n in names if n in DROPPED_BACKENDS}
    return set()


def trimmed_metadata(tree: Tree, digest: str) -> dict[str, str]:
    """The metadata of a trimmed copy of ``tree`` whose content digest is ``digest``."""
    return {
        "ref": tree.ref,
        "tag": tree.tag,
        "commit": tree.commit,
        "digest": digest,
        "digest_algorithm": DIGEST_ALGORITHM,
        "trimmed_from": tree.digest,
        "pinned": "false",
        "provider": TRIMMED_PROVIDER.format(provider=tree.provider or "an unnamed source"),
    }


def write_trimmed_tree(tree: Tree, dest: Path) -> dict[str, str]:
    """Copy what the builds need of ``tree`` into the new folder ``dest``, with metadata that
    says what it is; the metadata written."""
    missing = [entry for entry in KEEP if not (tree.root / entry).exists()]
    if missing:
        raise FileNotFoundError(f"{tree.root} lacks {', '.join(missing)}")
    dest.mkdir(parents=True)
    for entry in KEEP:
        source, target = tree.root / entry, dest / entry
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True, ignore=_ignore_dropped)
        else:
            shutil.copy2(source, target)
    meta = trimmed_metadata(tree, tree_digest(dest))
    (dest / TREE_METADATA).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", "utf-8")
    return meta
