"""Which architectures a llama.cpp tree builds an MTP graph for with exactly one NextN layer, and
which export their layer inputs (what EAGLE-3, DFlash and DSpark drafts read).

Several architectures' MTP graphs assert ``hparams.n_layer_nextn == 1`` (GGML_ASSERT: the process
aborts), so a model with more NextN layers crashes the MTP context. The wrapper refuses those
models at ``llama_mtp_create``; the list changes with upstream, so it is read from the tree at
build time: the asserting graph's model class (``src/models/*.cpp``), the architectures that
construct that class (``src/llama-model.cpp``) and their names (``src/llama-arch.cpp``).

A target context that captures a layer's input (``llama_set_embeddings_layer_inp``) aborts at its
next decode unless its architecture's graph sets ``res->t_layer_inp[il]``: the wrapper refuses
such a pair first, from the lists :func:`layer_input_architectures` reads the same way.
"""

from __future__ import annotations

import re
from pathlib import Path

from generator.errors import SourceError

# `llama_model_qwen35::graph_mtp::graph_mtp(` and the like: where a class's MTP graph is defined.
_GRAPH_DEF = re.compile(r"\b(llama_model_\w+)::(\w+)::\2\s*\(")
_SINGLE_ASSERT = re.compile(r"GGML_ASSERT\s*\(\s*hparams\.n_layer_nextn\s*==\s*1\b")
_CASE = re.compile(r"\bcase\s+(LLM_ARCH_\w+)\s*:")
_NEW_MODEL = re.compile(r"\breturn\s+new\s+(llama_model_\w+)\s*[(<]")
_ARCH_NAME = re.compile(r"\{\s*(LLM_ARCH_\w+)\s*,\s*\"([^\"]+)\"\s*\}")
# The same, also for a class template's graph: `llama_model_llama::graph<embed>::graph(`.
_ANY_GRAPH_DEF = re.compile(r"\b(llama_model_\w+)::(\w+)(?:<[^<>]*>)?::\2\s*\(")
_LAYER_INPUT = re.compile(r"\bt_layer_inp\s*\[\s*il\s*\]\s*=")
_FINAL_INPUT = re.compile(r"\bt_layer_inp\s*\[\s*n_layer\s*\]\s*=")


def _asserting_classes(models_dir: Path) -> set[str]:
    """Model classes whose graph (the nearest definition above the assert) asserts one layer."""
    classes: set[str] = set()
    for source in sorted(models_dir.glob("*.cpp")):
        text = source.read_text(encoding="utf-8", errors="replace")
        for found in _SINGLE_ASSERT.finditer(text):
            owners = list(_GRAPH_DEF.finditer(text, 0, found.start()))
            if not owners:
                raise SourceError(
                    "scanning NextN architectures: "
                    + f"{source.name}: an n_layer_nextn == 1 assert outside any model graph",
                )
            classes.add(owners[-1].group(1))
    return classes


def _architectures_by_class(model_cpp: str) -> dict[str, set[str]]:
    """``llama_model_X`` -> the LLM_ARCH_* case labels that return ``new llama_model_X``."""
    found: dict[str, set[str]] = {}
    pending: list[str] = []
    for line in model_cpp.splitlines():
        pending += _CASE.findall(line)
        made = _NEW_MODEL.search(line)
        if made:
            found.setdefault(made.group(1), set()).update(pending)
            pending = []
        elif pending and line.strip().startswith(("break", "default", "}")):
            pending = []
    return found


def single_nextn_architectures(tree: Path) -> list[str]:
    """Sorted architecture names (``general.architecture``) limited to one NextN layer."""
    models_dir = tree / "src" / "models"
    if not models_dir.is_dir():
        return []  # trees before the per-model files predate MTP graphs
    classes = _asserting_classes(models_dir)
    if not classes:
        return []
    try:
        model_cpp = (tree / "src" / "llama-model.cpp").read_text(encoding="utf-8")
        arch_cpp = (tree / "src" / "llama-arch.cpp").read_text(encoding="utf-8")
    except OSError as exc:
        raise SourceError("scanning NextN architectures: " + str(exc)) from None
    by_class = _architectures_by_class(model_cpp)
    names = dict(_ARCH_NAME.findall(arch_cpp))
    result: set[str] = set()
    for cls in sorted(classes):
        archs = by_class.get(cls)
        if not archs:
            raise SourceError(
                "scanning NextN architectures: "
                + f"no architecture in src/llama-model.cpp constructs {cls}, whose MTP graph "
                "asserts one NextN layer",
            )
        for arch in archs:
            if arch not in names:
                raise SourceError(
                    "scanning NextN architectures: " + f"{arch} has no name in src/llama-arch.cpp"
                )
            result.add(names[arch])
    return sorted(result)


def _classes_setting(models_dir: Path, pattern: re.Pattern[str]) -> set[str]:
    """Model classes whose graph (the nearest definition above) matches ``pattern``; a match
    outside any recognised graph counts for none (its architecture is then refused: the safe
    side)."""
    classes: set[str] = set()
    for source in sorted(models_dir.glob("*.cpp")):
        text = source.read_text(encoding="utf-8", errors="replace")
        for found in pattern.finditer(text):
            owners = list(_ANY_GRAPH_DEF.finditer(text, 0, found.start()))
            if owners:
                classes.add(owners[-1].group(1))
    return classes


def layer_input_architectures(tree: Path) -> tuple[list[str], list[str]]:
    """Sorted architecture names whose graph exports each layer's input, and those that also
    export the input past the last layer (``t_layer_inp[n_layer]``)."""
    models_dir = tree / "src" / "models"
    if not models_dir.is_dir():
        return [], []
    try:
        model_cpp = (tree / "src" / "llama-model.cpp").read_text(encoding="utf-8")
        arch_cpp = (tree / "src" / "llama-arch.cpp").read_text(encoding="utf-8")
    except OSError as exc:
        raise SourceError("scanning layer-input architectures: " + str(exc)) from None
    by_class = _architectures_by_class(model_cpp)
    names = dict(_ARCH_NAME.findall(arch_cpp))
    lists: list[list[str]] = []
    for pattern in (_LAYER_INPUT, _FINAL_INPUT):
        found = {
            names[arch]
            for cls in _classes_setting(models_dir, pattern)
            for arch in by_class.get(cls, set())
            if arch in names
        }
        lists.append(sorted(found))
    return lists[0], lists[1]
