"""Helpers shared by the test-model tests: reading a written GGUF back."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import numpy.typing as npt


@dataclass
class ReadModel:
    """What a GGUF file holds, read back with gguf.GGUFReader."""

    fields: dict[str, Any]
    shapes: dict[str, tuple[int, ...]]  # ggml order (ne0 first)
    types: dict[str, gguf.GGMLQuantizationType]
    arrays: dict[str, npt.NDArray[np.float32]]  # numpy order, as float32


def read_model(path: Path) -> ReadModel:
    reader = gguf.GGUFReader(path)
    fields = {
        name: field.contents()
        for name, field in reader.fields.items()
        if not name.startswith("GGUF.")
    }
    shapes = {t.name: tuple(int(n) for n in t.shape) for t in reader.tensors}
    types = {t.name: gguf.GGMLQuantizationType(t.tensor_type) for t in reader.tensors}
    arrays = {t.name: np.asarray(t.data, dtype=np.float32) for t in reader.tensors}
    return ReadModel(fields=fields, shapes=shapes, types=types, arrays=arrays)
