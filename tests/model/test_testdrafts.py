"""generator.testdrafts: a draft is written for the target its sizes describe, whatever width."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from generator.testdrafts import write_test_draft
from generator.testmodel import sizes_from, token_embeddings
from tests.model.conftest import read_model

# a target wider than the default one (64), as the bench's (1024)
WIDE: dict[str, Any] = {"embd": 128, "ff": 256, "layers": 4, "vocab": 512}


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
