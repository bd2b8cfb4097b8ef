"""generator.testvision: the synthetic vision projector, read back without llama.cpp (the native
checks are in tests/mtp/test_projector.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from generator.errors import UsageError
from generator.testmodel import BYTES_VOCAB_MIN, ModelSizes, write_test_model
from generator.testvision import (
    BRIGHT_TOKEN,
    DARK_TOKEN,
    PROJECTOR_TYPE,
    ProjectorSizes,
    write_test_projector,
)
from tests.model.conftest import read_model

ODD = ProjectorSizes(embd=24, heads=3, ff=40, layers=2, patch=8, position_grid=3, gain=2.0)
TEXT = ModelSizes(embd=48, vocab=BYTES_VOCAB_MIN)


def test_same_arguments_give_identical_bytes(tmp_path: Path) -> None:
    a = write_test_projector(tmp_path / "a.gguf", text_sizes=TEXT, seed=4, sizes=ODD)
    b = write_test_projector(tmp_path / "b.gguf", text_sizes=TEXT, seed=4, sizes=ODD)
    other = write_test_projector(tmp_path / "c.gguf", text_sizes=TEXT, seed=5, sizes=ODD)
    assert a.read_bytes() == b.read_bytes() != other.read_bytes()
    assert not list(tmp_path.glob("*.partial"))


def test_metadata_and_shapes_follow_the_sizes(tmp_path: Path) -> None:
    read = read_model(write_test_projector(tmp_path / "p.gguf", text_sizes=TEXT, sizes=ODD))
    f = read.fields
    assert f["general.architecture"] == "clip" and f["general.type"] == "mmproj"
    assert f["clip.projector_type"] == PROJECTOR_TYPE and f["clip.has_vision_encoder"] is True
    expected_fields: dict[str, Any] = {
        "clip.vision.projection_dim": TEXT.embd,
        "clip.vision.embedding_length": ODD.embd,
        "clip.vision.attention.head_count": ODD.heads,
        "clip.vision.feed_forward_length": ODD.ff,
        "clip.vision.block_count": ODD.layers,
        "clip.vision.patch_size": ODD.patch,
        "clip.vision.image_size": ODD.position_grid * ODD.patch,
        "clip.vision.spatial_merge_size": 2,
    }
    assert {k: f[k] for k in expected_fields} == expected_fields
    e, w = ODD.embd, 4 * ODD.embd
    shapes = {  # ggml order, ne0 first
        "v.patch_embd.weight": (ODD.patch, ODD.patch, 3, e),
        "v.patch_embd.weight.1": (ODD.patch, ODD.patch, 3, e),
        "v.patch_embd.bias": (e,),
        "v.position_embd.weight": (e, ODD.position_grid**2),
        "mm.0.weight": (w, w),
        "mm.0.bias": (w,),
        "mm.2.weight": (w, TEXT.embd),
        "mm.2.bias": (TEXT.embd,),
    }
    for layer in range(ODD.layers):
        blk = f"v.blk.{layer}"
        shapes |= {f"{blk}.{n}.{p}": (e,) for n in ("ln1", "ln2") for p in ("weight", "bias")}
        shapes |= {f"{blk}.attn_qkv.weight": (e, 3 * e), f"{blk}.attn_qkv.bias": (3 * e,)}
        shapes |= {f"{blk}.attn_out.weight": (e, e), f"{blk}.attn_out.bias": (e,)}
        shapes |= {f"{blk}.ffn_up.weight": (e, ODD.ff), f"{blk}.ffn_up.bias": (ODD.ff,)}
        shapes |= {f"{blk}.ffn_down.weight": (ODD.ff, e), f"{blk}.ffn_down.bias": (e,)}
    assert read.shapes == shapes


def test_merger_sends_brightness_to_the_text_models_embeddings(tmp_path: Path) -> None:
    """The patch kernels' first channel sums to ``gain`` (so it is gain times the patch mean);
    ``mm.2``'s first two columns are the directions of the text model's embeddings of the bright
    and dark tokens, as the text model file holds them."""
    text = read_model(
        write_test_model(tmp_path / "t.gguf", "agree", 3, vocabulary="bytes", embd=48, vocab=259)
    )
    assert text.fields["tokenizer.ggml.tokens"][BRIGHT_TOKEN] == "<0x61>"  # "a"
    assert text.fields["tokenizer.ggml.tokens"][DARK_TOKEN] == "<0x41>"  # "A"
    read = read_model(write_test_projector(tmp_path / "p.gguf", text_sizes=TEXT, seed=3, sizes=ODD))
    kernels = [read.arrays[n] for n in ("v.patch_embd.weight", "v.patch_embd.weight.1")]
    assert sum(float(k[0].sum()) for k in kernels) == pytest.approx(ODD.gain, rel=1e-5)
    merger = read.arrays["mm.2.weight"]
    table = text.arrays["token_embd.weight"]
    for column, token in ((0, BRIGHT_TOKEN), (1, DARK_TOKEN)):
        row = table[token] / np.linalg.norm(table[token])
        np.testing.assert_allclose(merger[:, column], row, atol=1e-6)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"sizes": ProjectorSizes(embd=16, heads=3)}, "multiple of heads"),
        ({"sizes": ProjectorSizes(embd=24, heads=4)}, "multiple of 4"),
        ({"sizes": ProjectorSizes(patch=0)}, "patch must be positive"),
        ({"bright_token": 256}, "not a token"),
        ({"dark_token": BRIGHT_TOKEN}, "must differ"),
        ({"seed": -1}, "must not be negative"),
    ],
)
def test_impossible_requests_are_usage_errors(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        write_test_projector(tmp_path / "p.gguf", **options)
    assert not list(tmp_path.iterdir())
