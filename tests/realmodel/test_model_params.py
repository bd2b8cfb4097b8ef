"""Every simple field of llama.cpp's ``llama_model_params`` as a ``Model`` argument: vocab-only
models (llama.cpp's own ``ggml-vocab-*.gguf``), metadata overrides of each type reaching
llama.cpp, the ways of reading the file, and a release lacking a field refused. (The checks before
any library is loaded: tests/runtime/test_model_params.py.)"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from tests.mtp.conftest import byte_models, log_softmax_after, models

__all__ = ["byte_models", "models"]  # tests/mtp's fixtures

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

PROMPT = [3, 4, 5, 6]


@pytest.fixture(scope="module")
def bpe_vocab(tree_pin: Path) -> Path:
    return tree_pin / "models" / "ggml-vocab-llama-bpe.gguf"


def greedy(runtime: Any, libs: Any, path: Path, **options: Any) -> list[int]:
    with runtime.Model(path, libs=libs, **options) as model, runtime.Context(model) as ctx:
        return list(ctx.generate(PROMPT, max_tokens=6).tokens)


def test_a_vocab_only_model_tokenizes_and_refuses_what_needs_weights(
    runtime: Any, libs: Any, bpe_vocab: Path
) -> None:
    with runtime.Model(bpe_vocab, vocab_only=True, libs=libs) as model:
        assert model.vocab_only and model.n_vocab == 128256
        tokens = model.tokenize("Hello world, it's 2024!", add_special=False)
        assert model.detokenize(tokens) == "Hello world, it's 2024!"
        assert model.token_bytes(tokens[0]) == b"Hello"
        assert model.tokenize("Hi")[0] == 128000  # <|begin_of_text|>, add_special
        assert model.metadata_value("tokenizer.ggml.pre") == "llama-bpe"
        with pytest.raises(runtime.LlamaUnsupportedError, match="vocab_only=True: it has no"):
            model.require_weights("a Context")
    with pytest.raises(runtime.LlamaClosedError):
        model.require_weights("a Context")
    with pytest.raises(runtime.LlamaClosedError):
        assert model.vocab_only


def test_a_context_on_a_vocab_only_model_is_refused(
    runtime: Any, libs: Any, bpe_vocab: Path, models: dict[str, Path]
) -> None:
    with runtime.Model(bpe_vocab, vocab_only=True, libs=libs) as model:
        with pytest.raises(runtime.LlamaUnsupportedError, match="vocab_only"):
            runtime.Context(model).close()
    with (
        runtime.Model(models["plain"], libs=libs) as target,
        runtime.Model(models["plain"], vocab_only=True, libs=libs) as draft,
    ):
        spec = runtime.SpeculativeDecoding(strategies=("draft-simple",), draft_model=draft)
        with pytest.raises(runtime.LlamaUnsupportedError, match="so a draft model is not"):
            runtime.Context(target, speculative=spec).close()


def test_defaults_are_llama_cpps_own(runtime: Any, libs: Any, models: dict[str, Path]) -> None:
    assert libs.llama.llama_model_default_params().vocab_only is False
    with runtime.Model(models["plain"], libs=libs) as model:
        assert model.vocab_only is False


def test_a_str_override_reaches_the_tokenizer(runtime: Any, libs: Any, bpe_vocab: Path) -> None:
    """tokenizer.ggml.pre read as "default" instead of the file's "llama-bpe": its regex does not
    split English contractions case-insensitively. metadata_value still says the file's value."""
    text = "DON'T stop"
    seen = {}
    for pre in ("llama-bpe", "default"):
        overrides = {"tokenizer.ggml.pre": pre}
        with runtime.Model(bpe_vocab, vocab_only=True, kv_overrides=overrides, libs=libs) as m:
            seen[pre] = m.tokenize(text, add_special=False)
            assert m.metadata_value("tokenizer.ggml.pre") == "llama-bpe"
    with runtime.Model(bpe_vocab, vocab_only=True, libs=libs) as model:
        assert model.tokenize(text, add_special=False) == seen["llama-bpe"]
    assert seen["default"] != seen["llama-bpe"]
    assert len(seen["default"]) == len(seen["llama-bpe"]) + 1  # "'", "T" instead of "'T"


def test_bool_int_and_float_overrides_reach_llama_cpp(
    runtime: Any, libs: Any, byte_models: dict[str, Path]
) -> None:
    path = byte_models["plain"]
    with runtime.Model(path, libs=libs) as model:
        arch = model.metadata_value("general.architecture")
        assert model.tokenize("a")[0] == 1  # the file's vocabulary adds BOS
        n_ctx_train = int(libs.llama.llama_model_n_ctx_train(model.handle))
        plain = log_softmax_after(runtime, model, PROMPT)
    overrides = {
        "tokenizer.ggml.add_bos_token": False,
        f"{arch}.context_length": n_ctx_train + 64,
        f"{arch}.attention.layer_norm_rms_epsilon": 100.0,
    }
    with runtime.Model(path, libs=libs, kv_overrides=overrides) as model:
        assert model.tokenize("a") == model.tokenize("a", add_special=False)
        assert int(libs.llama.llama_model_n_ctx_train(model.handle)) == n_ctx_train + 64
        assert model.metadata_value(f"{arch}.context_length") == str(n_ctx_train)
        changed = log_softmax_after(runtime, model, PROMPT)
    assert max(abs(a - b) for a, b in zip(plain, changed, strict=True)) > 1e-3


def test_an_override_of_the_wrong_type_is_ignored_by_llama_cpp(
    runtime: Any, libs: Any, byte_models: dict[str, Path]
) -> None:
    with runtime.Model(byte_models["plain"], libs=libs) as model:
        arch = model.metadata_value("general.architecture")
        n_ctx_train = int(libs.llama.llama_model_n_ctx_train(model.handle))
    overrides = {f"{arch}.context_length": "4096"}  # llama.cpp reads it as an int
    with runtime.Model(byte_models["plain"], libs=libs, kv_overrides=overrides) as model:
        assert int(libs.llama.llama_model_n_ctx_train(model.handle)) == n_ctx_train


def test_sizes_the_struct_cannot_hold_are_refused(runtime: Any, libs: Any, bpe_vocab: Path) -> None:
    for overrides, what in (
        ({"k" * 128: 1}, "key 'kkk"),
        ({"é" * 64: 1}, "128 bytes in UTF-8"),
        ({"general.name": "x" * 128}, r"kv_overrides\['general.name'\] is 128 bytes"),
    ):
        with pytest.raises(ValueError, match=what):
            runtime.Model(bpe_vocab, vocab_only=True, kv_overrides=overrides, libs=libs)
    ok = {"k" * 127: 1, "general.name": "x" * 127}
    with runtime.Model(bpe_vocab, vocab_only=True, kv_overrides=ok, libs=libs) as model:
        assert model.n_vocab == 128256


@pytest.mark.parametrize(
    "options",
    [
        {"use_mmap": False},
        {"use_mmap": True},
        {"use_mlock": False},
        {"use_direct_io": True},
        {"load_mode": "none"},
        {"load_mode": "mmap"},
        {"lazy_mode": "off"},
        {"check_tensors": True},
        {"no_host": True},
        {"use_extra_bufts": False, "check_tensors": True, "use_mmap": False},
        {"tensor_split": [1.0], "split_mode": "layer"},
    ],
    ids=repr,
)
def test_ways_of_loading_give_the_same_tokens(
    runtime: Any, libs: Any, models: dict[str, Path], options: dict[str, Any]
) -> None:
    assert greedy(runtime, libs, models["plain"], **options) == greedy(
        runtime, libs, models["plain"]
    )


def test_load_mode_names_come_from_llama_h(runtime: Any, libs: Any, bpe_vocab: Path) -> None:
    with pytest.raises(ValueError, match=r"load_mode must be one of auto, direct_io, mlock"):
        runtime.Model(bpe_vocab, vocab_only=True, load_mode="mmap+mlock", libs=libs)
    with pytest.raises(ValueError, match=r"lazy_mode must be one of auto, off, on"):
        runtime.Model(bpe_vocab, vocab_only=True, lazy_mode="lazy", libs=libs)
    with pytest.raises(ValueError, match="use_direct_io=True is load_mode 'direct_io'"):
        runtime.Model(bpe_vocab, use_direct_io=True, use_mmap=True, libs=libs)
    with pytest.raises(ValueError, match=r"at most 16 devices"):
        runtime.Model(bpe_vocab, vocab_only=True, tensor_split=[1.0] * 17, libs=libs)


def test_a_release_without_load_mode_would_need_its_use_mmap_field(
    runtime: Any, libs: Any, bpe_vocab: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With load_mode hidden, use_mmap goes to the field of that name, which the pinned tree's
    struct no longer has: refused, as on a release with neither."""
    params = importlib.import_module("llama_bindings.params")
    real = params.has_field
    monkeypatch.setattr(params, "has_field", lambda f, s, n: n != "load_mode" and real(f, s, n))
    with pytest.raises(runtime.LlamaUnsupportedError, match=r"no llama_model_params.use_mmap"):
        runtime.Model(bpe_vocab, vocab_only=True, use_mmap=False, libs=libs)
    with pytest.raises(runtime.LlamaUnsupportedError, match=r"load_mode is not available"):
        runtime.Model(bpe_vocab, vocab_only=True, load_mode="none", libs=libs)


@pytest.mark.parametrize(
    ("field", "options"),
    [
        ("vocab_only", {"vocab_only": True}),
        ("no_host", {"no_host": True}),
        ("check_tensors", {"check_tensors": False}),
        ("lazy_mode", {"lazy_mode": "on"}),
        ("kv_overrides", {"kv_overrides": {"general.name": "x"}}),
        ("tensor_split", {"tensor_split": [1.0]}),
    ],
)
def test_a_field_the_release_lacks_is_refused(
    runtime: Any, libs: Any, bpe_vocab: Path, monkeypatch: pytest.MonkeyPatch, field: str,
    options: dict[str, Any],
) -> None:  # fmt: skip
    params = importlib.import_module("llama_bindings.params")
    real = params.has_field
    monkeypatch.setattr(params, "has_field", lambda f, s, n: n != field and real(f, s, n))
    with pytest.raises(runtime.LlamaUnsupportedError, match=rf"{field} is not available"):
        runtime.Model(bpe_vocab, libs=libs, **options)
