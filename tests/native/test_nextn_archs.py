"""The architectures whose MTP graph takes exactly one NextN layer, read from a tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.errors import SourceError
from generator.native.nextn_archs import layer_input_architectures, single_nextn_architectures
from generator.testmodel import ARCH


def _fake_tree(root: Path, *, construct: bool = True) -> Path:
    models = root / "src" / "models"
    models.mkdir(parents=True)
    (models / "alpha.cpp").write_text(
        "llama_model_alpha::graph::graph(const llama_model & m) {}\n"
        "llama_model_alpha::graph_mtp::graph_mtp(const llama_model & m) {\n"
        '    GGML_ASSERT(hparams.n_layer_nextn == 1 && "one block");\n}\n'
    )
    (models / "beta.cpp").write_text(
        "llama_model_beta::graph_mtp::graph_mtp(const llama_model & m) {\n"
        "    GGML_ASSERT(hparams.n_layer_nextn > 0);\n}\n"
    )
    made = "            return new llama_model_alpha(params);\n" if construct else ""
    (root / "src" / "llama-model.cpp").write_text(
        "switch (arch) {\n"
        "        case LLM_ARCH_ALPHA:\n        case LLM_ARCH_ALPHA_MOE:\n"
        + made
        + "        case LLM_ARCH_BETA:\n"
        "            return new llama_model_beta(params);\n}\n"
    )
    (root / "src" / "llama-arch.cpp").write_text(
        '{ LLM_ARCH_ALPHA, "alpha" },\n{ LLM_ARCH_ALPHA_MOE, "alpha-moe" },\n'
        '{ LLM_ARCH_BETA, "beta" },\n'
    )
    return root


def test_architectures_sharing_an_asserting_graph_are_listed(tmp_path: Path) -> None:
    assert single_nextn_architectures(_fake_tree(tmp_path)) == ["alpha", "alpha-moe"]


def test_an_asserting_graph_no_architecture_builds_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="llama_model_alpha"):
        single_nextn_architectures(_fake_tree(tmp_path, construct=False))


@pytest.mark.needs_tree
def test_b11312_limits_the_test_models_architecture(tree_b11312: Path) -> None:
    archs = single_nextn_architectures(tree_b11312)
    assert ARCH in archs  # qwen35: tests/native/mtp_cases.c expects its two-layer model refused
    # mimo2's graph chains several heads: it must not be refused
    assert "mimo2" not in archs


@pytest.mark.needs_tree
def test_a_tree_before_mtp_lists_none(tree_63d93d1: Path) -> None:
    assert single_nextn_architectures(tree_63d93d1) == []


def test_layer_inputs_are_read_from_each_graph_template_or_not(tmp_path: Path) -> None:
    """A class (template or not) whose graph sets t_layer_inp[il] exports layer inputs for every
    architecture that constructs it; t_layer_inp[n_layer] marks the final input too."""
    root = _fake_tree(tmp_path)
    models = root / "src" / "models"
    (models / "alpha.cpp").write_text(
        "template <bool x>\nllama_model_alpha::graph<x>::graph(const llama_model & m) {\n"
        "    res->t_layer_inp[il] = inpL;\n}\n"
    )
    (models / "beta.cpp").write_text(
        "llama_model_beta::graph::graph(const llama_model & m) {\n"
        "    res->t_layer_inp[il] = cur;\n    res->t_layer_inp[n_layer] = cur;\n}\n"
    )
    (models / "gamma.cpp").write_text("void helper() { res->t_layer_inp[il] = cur; }\n")
    assert layer_input_architectures(root) == (["alpha", "alpha-moe", "beta"], ["beta"])


@pytest.mark.needs_tree
def test_the_pinned_tree_exports_the_test_models_layer_inputs(tree_pin: Path) -> None:
    inputs, final = layer_input_architectures(tree_pin)
    assert ARCH in inputs and "llama" in inputs  # qwen35 (the test targets), Llama's template
    assert ARCH not in final and "nemotron_h" in final


@pytest.mark.needs_tree
def test_a_tree_before_mtp_exports_none(tree_63d93d1: Path) -> None:
    assert layer_input_architectures(tree_63d93d1) == ([], [])
