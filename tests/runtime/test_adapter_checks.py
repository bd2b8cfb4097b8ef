"""What the runtime checks of LoRA scales and control vectors before anything native runs (the
checks :meth:`Context.set_loras` and :meth:`Context.set_control_vector` use; no library is built
or loaded, tests/runtime/conftest.py). Their effect on a model: tests/mtp/test_adapters.py."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest


@pytest.fixture(scope="module")
def adapters(runtime: Any) -> Any:
    return importlib.import_module("llama_bindings.runtime.adapters")


def test_control_vectors_are_read_as_layers(adapters: Any) -> None:
    layers = adapters.control_vector_layers
    flat = [float(i) for i in range(8)]
    assert layers(flat, 4, 3) == {1: flat[:4], 2: flat[4:]}
    assert layers([flat[:4], flat[4:]], 4, 3) == {1: flat[:4], 2: flat[4:]}
    assert layers(np.arange(8, dtype=np.float32).reshape(2, 4), 4, 3) == {1: flat[:4], 2: flat[4:]}
    assert layers({2: np.zeros(4, dtype=np.float32)}, 4, 3) == {2: [0.0] * 4}


@pytest.mark.parametrize(
    ("data", "error", "match"),
    [
        ([0.0] * 6, ValueError, "whole number of layers"),
        ([], ValueError, "whole number of layers"),
        ([0.0] * 12, ValueError, r"outside 1\.\.2"),
        ({0: [0.0] * 4}, ValueError, "none for layer 0"),
        ({True: [0.0] * 4}, TypeError, "ints"),
        ({1: [0.0] * 3}, ValueError, "n_embd is 4"),
        ({1: "abcd"}, TypeError, "sequence of 4 floats"),
        ([[0.0] * 4, [0.0] * 3], ValueError, "layer 2 has 3 values"),
        ([float("nan")] * 4, ValueError, "finite"),
        ([True] * 4, ValueError, "finite number"),
        ("vector", TypeError, "GGUF file path"),
        (1.5, TypeError, "GGUF file path"),
    ],
)
def test_bad_control_vectors_are_refused(adapters: Any, data: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        adapters.control_vector_layers(data, 4, 3)


def test_lora_mappings_are_checked(adapters: Any) -> None:
    with pytest.raises(TypeError, match="mapping"):
        adapters.check_loras(object(), ["adapter.gguf"])
    with pytest.raises(TypeError, match="LoraAdapter"):
        adapters.check_loras(object(), {"adapter.gguf": 1.0})
    assert adapters.check_loras(object(), {}) == {}
