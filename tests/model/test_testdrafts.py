"""generator.testdrafts: a draft is written for the target its sizes describe, whatever width.

What the module docstring promises of each kind: the same arguments give the same bytes; the
metadata keys and tensors llama.cpp's eagle3 and dflash loaders take (and no others); the
embeddings and head rows the draft carries are its target's (of that seed and those sizes); each
kind loads through llama.cpp's own loader at the pin (with the host build's libraries, as
tests/mtp does); arguments no draft can be written with are UsageErrors.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from generator.errors import UsageError
from generator.testdrafts import BLOCK_SIZE, DRAFT_KINDS, MASK_TOKEN, write_test_draft
from generator.testmodel import (
    partial_mtp_embeddings,
    sizes_from,
    token_embeddings,
    write_test_model,
)
from tests.model.conftest import ReadModel, read_model

# a target wider than the default one (64), as the bench's (1024)
WIDE: dict[str, Any] = {"embd": 128, "ff": 256, "layers": 4, "vocab": 512}
# other sizes than the default target's, so that a size the writer mixes up shows
ODD: dict[str, Any] = {"embd": 48, "layers": 3, "vocab": 100, "disagree_every": 7}
DEFAULT_LAYERS = {"eagle3": [0, 1, 2], "dflash": [0, 1], "dspark": [0, 1]}


def _family(kind: str) -> str:
    return kind.removesuffix("-partial")


def _arch(kind: str) -> str:
    return "eagle3" if _family(kind) == "eagle3" else "dflash"


@pytest.mark.parametrize("kind", ["eagle3", "dflash", "dspark"])
def test_a_draft_for_a_wider_target_has_its_width_and_its_embeddings(
    tmp_path: Path, kind: str
) -> None:
    arch = "eagle3" if kind == "eagle3" else "dflash"
    m = read_model(write_test_draft(tmp_path / f"{kind}.gguf", kind, **WIDE))
    assert m.fields[f"{arch}.embedding_length"] == WIDE["embd"]
    n_layers = 3 if kind == "eagle3" else 2
    assert m.shapes["fc.weight"] == (n_layers * WIDE["embd"], WIDE["embd"])
    if kind == "eagle3":
        assert m.fields["eagle3.target_hidden_size"] == WIDE["embd"]
    if kind == "dspark":  # the Markov head holds the target's token embeddings
        e = token_embeddings(sizes_from(**WIDE), 0)
        np.testing.assert_array_equal(m.arrays["markov_w1.weight"], e)


def test_draft_embd_gives_the_draft_another_width_than_the_targets(tmp_path: Path) -> None:
    m = read_model(write_test_draft(tmp_path / "d.gguf", "dflash", draft_embd=64, **WIDE))
    assert m.fields["dflash.embedding_length"] == 64


# -- bytes --------------------------------------------------------------------------------------

# options beside the defaults, each of which must reach the file the same way twice
OPTIONS: list[dict[str, Any]] = [
    {},
    {"seed": 3, **ODD},
    {"target_layers": [0, 1, 7], "draft_embd": 32},
    {"mask_token": None, "vocabulary": "bytes", "vocab": 260},
]


@pytest.mark.parametrize("options", OPTIONS, ids=["default", "odd", "misfit", "no-mask-bytes"])
@pytest.mark.parametrize("kind", DRAFT_KINDS)
def test_same_arguments_give_identical_bytes(
    tmp_path: Path, kind: str, options: dict[str, Any]
) -> None:
    first = write_test_draft(tmp_path / "first.gguf", kind, **options)
    second = write_test_draft(tmp_path / "second.gguf", kind, **options)
    assert first.read_bytes() == second.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first.gguf", "second.gguf"]


# -- metadata and tensors ---------------------------------------------------------------------


def _expected_shapes(kind: str, n: int, n_target: int, vocab: int) -> dict[str, tuple[int, ...]]:
    """Every tensor of a draft of width ``n`` for a target of width ``n_target`` and ``vocab``
    tokens, in ggml order (ne0 first), as the module docstring describes the kind."""
    head_dim = n // 2
    shapes: dict[str, tuple[int, ...]] = {
        "output_norm.weight": (n,),
        "blk.0.attn_norm.weight": (n,),
        "blk.0.attn_output.weight": (n, n),
        "blk.0.ffn_norm.weight": (n,),
        "blk.0.ffn_gate.weight": (n, n),
        "blk.0.ffn_up.weight": (n, n),
        "blk.0.ffn_down.weight": (n, n),
    }
    family = _family(kind)
    if family == "eagle3":
        # three target layers in, token embedding and hidden state concatenated into attention
        shapes["fc.weight"] = (3 * n_target, n)
        shapes["blk.0.attn_norm_2.weight"] = (n,)
        for name in ("attn_q", "attn_k", "attn_v"):
            shapes[f"blk.0.{name}.weight"] = (2 * n, n)
        if kind == "eagle3-partial":
            shapes["token_embd.weight"] = (n, vocab)
        return shapes
    shapes["fc.weight"] = (2 * n, n)  # two target layers at the draft's own width
    shapes["enc.output_norm.weight"] = (n,)
    shapes["blk.0.post_attention_norm.weight"] = (n,)
    shapes["blk.0.attn_q_norm.weight"] = (head_dim,)
    shapes["blk.0.attn_k_norm.weight"] = (head_dim,)
    for name in ("attn_q", "attn_k", "attn_v"):
        shapes[f"blk.0.{name}.weight"] = (n, n)
    if family == "dspark":
        shapes["markov_w1.weight"] = (n, vocab)
        shapes["markov_w2.weight"] = (n, vocab)
    elif kind == "dflash-partial":
        shapes["token_embd.weight"] = (n, vocab)
        shapes["output.weight"] = (n, vocab)
    return shapes


@pytest.mark.parametrize("kind", DRAFT_KINDS)
def test_tensors_are_the_kinds_and_no_others(tmp_path: Path, kind: str) -> None:
    draft = read_model(write_test_draft(tmp_path / "d.gguf", kind, **ODD))
    assert draft.shapes == _expected_shapes(kind, ODD["embd"], ODD["embd"], ODD["vocab"])
    narrow = read_model(write_test_draft(tmp_path / "n.gguf", kind, draft_embd=32, **ODD))
    assert narrow.shapes == _expected_shapes(kind, 32, ODD["embd"], ODD["vocab"])


@pytest.mark.parametrize("kind", DRAFT_KINDS)
def test_metadata_is_what_the_loader_and_the_strategy_read(tmp_path: Path, kind: str) -> None:
    arch, family = _arch(kind), _family(kind)
    f = read_model(write_test_draft(tmp_path / "d.gguf", kind, **ODD)).fields
    target = read_model(write_test_model(tmp_path / "t.gguf", "plain", **ODD)).fields
    assert f["general.architecture"] == arch
    assert f[f"{arch}.target_layers"] == DEFAULT_LAYERS[family]
    assert f[f"{arch}.block_count"] == 1
    assert f[f"{arch}.embedding_length"] == ODD["embd"]
    head_dim = ODD["embd"] // f[f"{arch}.attention.head_count"]
    assert f[f"{arch}.attention.key_length"] == f[f"{arch}.attention.value_length"] == head_dim
    # the target's vocabulary, token for token
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.tokens"):
        assert f[key] == target[key], key
    eps = f[f"{arch}.attention.layer_norm_rms_epsilon"]
    if family == "eagle3":
        assert f["eagle3.target_hidden_size"] == ODD["embd"]
        assert f["eagle3.norm_before_residual"] is True
        assert "tokenizer.ggml.mask_token_id" not in f
        assert eps == pytest.approx(1e-6)
        return
    assert f["tokenizer.ggml.mask_token_id"] == MASK_TOKEN
    assert f["dflash.block_size"] == BLOCK_SIZE[family]
    assert eps == pytest.approx(1e-12)  # so that the mask row's arithmetic holds at long contexts
    # DSpark without a confidence head: p_min must be 0
    assert f.get("dflash.has_confidence_head") is (False if family == "dspark" else None)


def test_options_made_to_be_refused_reach_the_file(tmp_path: Path) -> None:
    f = read_model(
        write_test_draft(tmp_path / "d.gguf", "dflash", target_layers=[0, 5], mask_token=None)
    ).fields
    assert f["dflash.target_layers"] == [0, 5]
    assert "tokenizer.ggml.mask_token_id" not in f
    e = read_model(write_test_draft(tmp_path / "e.gguf", "eagle3", target_layers=[-1, 0, 1]))
    assert e.fields["eagle3.target_layers"] == [-1, 0, 1]


# -- the target's rows --------------------------------------------------------------------------


def _target(tmp_path: Path, seed: int) -> ReadModel:
    return read_model(write_test_model(tmp_path / f"target-{seed}.gguf", "plain", seed, **ODD))


def _assert_swapped_at_disagreeing_tokens(rows: Any, e: Any, every: int) -> None:
    """``rows`` is ``e`` with token t given e[t + 1] exactly where t % every == 0."""
    vocab = len(e)
    differs = [t for t in range(vocab) if not np.array_equal(rows[t], e[t])]
    assert differs == list(range(0, vocab, every))
    for t in differs:
        np.testing.assert_array_equal(rows[t], e[(t + 1) % vocab])


@pytest.mark.parametrize("seed", [0, 2])
def test_carried_rows_are_the_targets_of_that_seed(tmp_path: Path, seed: int) -> None:
    target = _target(tmp_path, seed)
    e, head = target.arrays["token_embd.weight"], target.arrays["output.weight"]
    every = ODD["disagree_every"]
    drafts = {
        kind: read_model(write_test_draft(tmp_path / f"{kind}-{seed}.gguf", kind, seed, **ODD))
        for kind in DRAFT_KINDS
    }
    np.testing.assert_array_equal(drafts["dspark"].arrays["markov_w1.weight"], e)
    np.testing.assert_array_equal(drafts["dspark"].arrays["markov_w2.weight"], head)
    np.testing.assert_array_equal(drafts["dspark-partial"].arrays["markov_w2.weight"], head)
    np.testing.assert_array_equal(drafts["dflash-partial"].arrays["output.weight"], head)
    _assert_swapped_at_disagreeing_tokens(
        drafts["dspark-partial"].arrays["markov_w1.weight"], e, every
    )
    for kind in ("eagle3-partial", "dflash-partial"):
        _assert_swapped_at_disagreeing_tokens(drafts[kind].arrays["token_embd.weight"], e, every)
    np.testing.assert_array_equal(
        drafts["eagle3-partial"].arrays["token_embd.weight"], partial_mtp_embeddings(e, every)
    )
    # DFlash: the value projection removes the mask token's direction (of this target)
    v = drafts["dflash"].arrays["blk.0.attn_v.weight"]
    np.testing.assert_allclose(v @ e[MASK_TOKEN], 0.0, atol=1e-4)
    assert np.linalg.norm(v @ e[MASK_TOKEN + 1]) > 0.5


# -- arguments no draft is written with -----------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "options", "message"),
    [
        ("medusa", {}, "unknown test draft kind"),
        ("dflash", {"vocabulary": "words"}, "vocabulary"),
        ("dflash", {"vocabulary": "bytes", "vocab": 258}, "vocab >= 259"),
        ("dflash", {"depth": 3}, "depth"),
        ("eagle3", {"layers": 1}, "2 trunk layers"),
        ("dflash", {"embd": 0}, "embd"),
        ("dflash", {"mask_token": 5}, "disagreeing token"),  # default disagree_every: 5
        ("dspark", {"mask_token": 0}, "disagreeing token"),
        ("dflash", {"mask_token": 256}, r"outside the vocabulary \[0, 256\)"),
        ("dflash", {"mask_token": -1}, "outside the vocabulary"),
        ("dflash", {"draft_embd": 0}, "draft_embd"),
        ("eagle3", {"draft_embd": 30}, "draft_embd"),
        ("eagle3", {"target_layers": [0, 1, 2**31]}, "int32"),
    ],
)
def test_impossible_requests_are_usage_errors(
    tmp_path: Path, kind: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        write_test_draft(tmp_path / "d.gguf", kind, **options)
    assert list(tmp_path.iterdir()) == []


# -- llama.cpp's own loader -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def runtime_libs(tree_pin: Path) -> tuple[Any, Any]:
    """(llama_bindings.runtime, its libraries): the committed bindings on the host build of the
    pin (built or reused, as in tests/mtp)."""
    from tests.mtp.conftest import build_or_fail
    from tests.runtime.conftest import committed_runtime

    build = build_or_fail(tree_pin, "linux-x86_64")
    runtime = committed_runtime()
    return runtime, importlib.import_module("llama_bindings").load(build.lib_dir)


@pytest.mark.slow
@pytest.mark.needs_tree
@pytest.mark.parametrize("sizes", [{}, ODD], ids=["default", "odd"])
@pytest.mark.parametrize("kind", DRAFT_KINDS)
def test_each_kind_loads_in_llama_cpp(
    tmp_path: Path, runtime_libs: tuple[Any, Any], kind: str, sizes: dict[str, Any]
) -> None:
    runtime, libs = runtime_libs
    target = sizes_from(**sizes)
    path = write_test_draft(tmp_path / "d.gguf", kind, **sizes)
    with runtime.Model(path, libs=libs) as model:
        llama = model.llama
        assert model.metadata_value("general.architecture") == _arch(kind)
        assert llama.llama_model_n_layer(model.handle) == 1
        assert llama.llama_model_n_embd(model.handle) == target.embd
        assert model.n_vocab == target.vocab
        mask = MASK_TOKEN if _arch(kind) == "dflash" else -1
        assert llama.llama_vocab_mask(model.vocab) == mask


@pytest.mark.slow
@pytest.mark.needs_tree
def test_drafts_made_to_be_refused_load_or_are_refused_by_the_loader(
    tmp_path: Path, runtime_libs: tuple[Any, Any]
) -> None:
    """A misfit shows against a target (tests/native/test_wrapper_errors.py), not at loading;
    EAGLE-3 with other than 3 target layers and DFlash with none the loader refuses itself."""
    runtime, libs = runtime_libs
    loads: list[tuple[str, dict[str, Any]]] = [
        ("eagle3", {"target_layers": [0, 1, 7], "draft_embd": 32}),
        ("dflash", {"target_layers": [0, 2], "mask_token": None}),
        ("dspark", {"vocab": 300}),
    ]
    for kind, options in loads:
        with runtime.Model(write_test_draft(tmp_path / f"{kind}.gguf", kind, **options), libs=libs):
            pass
    for kind, layers in (("eagle3", [0, 1]), ("dflash", [])):
        path = write_test_draft(tmp_path / f"refused-{kind}.gguf", kind, target_layers=layers)
        with pytest.raises(runtime.LlamaLoadError):
            runtime.Model(path, libs=libs)
