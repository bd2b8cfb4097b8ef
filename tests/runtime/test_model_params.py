"""``Model``'s llama_model_params arguments checked before any library is loaded, and the
translation of llama-cpp-python's load flags into llama.cpp's ``load_mode``. (On a build:
tests/realmodel/test_model_params.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"")
    return path


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"vocab_only": "yes"}, TypeError, "vocab_only must be True, False or None"),
        ({"use_mmap": 0}, TypeError, "use_mmap must be True, False or None"),
        ({"use_mlock": 1}, TypeError, "use_mlock must be True, False or None"),
        ({"use_direct_io": "no"}, TypeError, "use_direct_io must be True, False or None"),
        ({"check_tensors": 1}, TypeError, "check_tensors must be True, False or None"),
        ({"no_host": []}, TypeError, "no_host must be True, False or None"),
        ({"load_mode": 1}, TypeError, "load_mode must be a str or None"),
        ({"lazy_mode": True}, TypeError, "lazy_mode must be a str or None"),
        ({"load_mode": "none", "use_mmap": False}, ValueError, "load_mode= and use_mmap= say"),
        ({"kv_overrides": [("a", 1)]}, TypeError, "kv_overrides must be a dict"),
        ({"kv_overrides": {1: 1}}, TypeError, "kv_overrides keys must be str"),
        ({"kv_overrides": {"": 1}}, ValueError, "must be a non-empty str without NUL"),
        ({"kv_overrides": {"a\0b": 1}}, ValueError, "must be a non-empty str without NUL"),
        ({"kv_overrides": {"a": None}}, TypeError, r"kv_overrides\['a'\] must be an int, float"),
        ({"kv_overrides": {"a": b"x"}}, TypeError, "not bytes"),
        ({"kv_overrides": {"a": [1]}}, TypeError, "not list"),
        ({"kv_overrides": {"a": 2**63}}, ValueError, "does not fit an int64"),
        ({"kv_overrides": {"a": "x\0"}}, ValueError, "must not hold a NUL"),
        ({"tensor_split": "1"}, TypeError, "tensor_split must be a sequence of numbers"),
        ({"tensor_split": 1.0}, TypeError, "tensor_split must be a sequence of numbers"),
        ({"tensor_split": [-1.0]}, ValueError, "finite numbers >= 0"),
        ({"tensor_split": [float("nan")]}, ValueError, "finite numbers >= 0"),
        ({"tensor_split": [True]}, ValueError, "finite numbers >= 0"),
    ],
)
def test_bad_model_params_raise_before_any_library_is_loaded(
    runtime: Any, model_file: Path, options: dict[str, Any], error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        runtime.Model(model_file, **options)


def test_overrides_keep_their_type_and_order(runtime: Any) -> None:
    from llama_bindings.params import check_kv_overrides

    assert check_kv_overrides(None) is None
    checked = check_kv_overrides({"b": True, "a": 1, "c": 1.5, "d": "x", "e": -(2**63)})
    assert checked == {"b": True, "a": 1, "c": 1.5, "d": "x", "e": -(2**63)}
    assert list(checked) == ["b", "a", "c", "d", "e"]
    assert [type(v) for v in checked.values()] == [bool, int, float, str, int]


@pytest.mark.parametrize(
    ("flags", "mode"),
    [
        ({}, None),
        ({"use_mlock": False}, None),
        ({"use_direct_io": False}, None),
        ({"use_mmap": True}, "mmap"),
        ({"use_mmap": False}, "none"),
        ({"use_mlock": True}, "mmap_mlock"),
        ({"use_mmap": True, "use_mlock": True}, "mmap_mlock"),
        ({"use_mmap": False, "use_mlock": True}, "mlock"),
        ({"use_direct_io": True}, "direct_io"),
        ({"use_direct_io": True, "use_mmap": False, "use_mlock": False}, "direct_io"),
    ],
)
def test_load_flags_as_load_mode(runtime: Any, flags: dict[str, bool], mode: str | None) -> None:
    from llama_bindings.params import load_mode_of

    assert load_mode_of(**flags) == mode


def test_direct_io_with_mmap_or_mlock_is_refused(runtime: Any) -> None:
    from llama_bindings.params import load_mode_of

    for other in ("use_mmap", "use_mlock"):
        with pytest.raises(ValueError, match="not with use_mmap=True or use_mlock=True"):
            load_mode_of(use_direct_io=True, **{other: True})
