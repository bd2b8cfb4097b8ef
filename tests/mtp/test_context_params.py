"""llama.cpp's model and context parameters: checked in Python, llama.cpp's defaults kept when
unset, the values set reaching llama.cpp (``Context.settings``), its refusals with its reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]


def test_defaults_are_llama_cpps_own(runtime: Any, libs: Any, models: dict[str, Path]) -> None:
    defaults = libs.llama.llama_context_default_params()
    with runtime.Model(models["plain"], libs=libs) as model, runtime.Context(model) as ctx:
        settings = ctx.settings
    assert settings["flash_attn_type"] == {-1: "auto", 0: "off", 1: "on"}[defaults.flash_attn_type]
    assert settings["type_k"] == settings["type_v"] == "f16" == _ggml_name(libs, defaults.type_k)
    for name in ("swa_full", "offload_kqv", "op_offload", "embeddings"):
        assert settings[name] == getattr(defaults, name), name
    assert settings["rope_freq_base"] == defaults.rope_freq_base
    assert settings["n_ubatch"] == settings["n_batch"] == 512
    assert settings["n_threads"] == settings["n_threads_batch"]


def _ggml_name(libs: Any, value: int) -> str:
    names = {v: k for k, v in libs.ffi.typeof("enum ggml_type").relements.items()}
    return str(names[value]).removeprefix("GGML_TYPE_").lower()


def test_values_set_reach_llama_cpp(runtime: Any, libs: Any, models: dict[str, Path]) -> None:
    rope = runtime.RopeScaling(type="linear", freq_base=20000.0, freq_scale=0.5, yarn_orig_ctx=64)
    with runtime.Model(models["plain"], libs=libs) as model:
        with runtime.Context(
            model, n_ctx=256, n_batch=64, n_ubatch=32, n_threads=1, n_threads_batch=2,
            flash_attn="on", type_k="q8_0", type_v="q8_0", swa_full=False, offload_kqv=False,
            op_offload=False, rope=rope,
        ) as ctx:  # fmt: skip
            settings = ctx.settings
            assert len(ctx.generate([3, 4, 5], max_tokens=4).tokens) == 4
    assert settings["n_ubatch"] == 32 and settings["n_batch"] == 64
    assert (settings["n_threads"], settings["n_threads_batch"]) == (1, 2)
    assert settings["flash_attn_type"] == "on"
    assert settings["type_k"] == settings["type_v"] == "q8_0"
    assert (settings["swa_full"], settings["offload_kqv"], settings["op_offload"]) == (
        False, False, False,
    )  # fmt: skip
    assert settings["rope_scaling_type"] == "linear"
    assert (settings["rope_freq_base"], settings["rope_freq_scale"]) == (20000.0, 0.5)
    assert settings["yarn_orig_ctx"] == 64


def test_a_deterministic_context_decodes_one_token_per_pass_in_a_buffer_per_sequence(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    with runtime.Model(models["plain"], libs=libs) as model:
        with runtime.Context(model, n_ctx=256, n_seq_max=2, deterministic=True) as ctx:
            settings = ctx.settings
            assert ctx.deterministic
        with runtime.Context(model, n_ctx=256, n_seq_max=2) as ctx:
            plain = ctx.settings
    assert (settings["n_ubatch"], settings["kv_unified"]) == (1, False)
    assert plain["n_ubatch"] == plain["n_batch"] > 1 and not ctx.deterministic


def test_flash_attention_changes_nothing_the_user_sees_but_the_setting(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    with runtime.Model(models["plain"], libs=libs) as model:
        for choice in ("on", "off", "auto"):
            with runtime.Context(model, n_ctx=128, flash_attn=choice) as ctx:
                assert ctx.settings["flash_attn_type"] == choice
                assert len(ctx.generate([3, 4], max_tokens=3).tokens) == 3


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"flash_attn": "yes"}, ValueError, "flash_attn must be one of auto, off, on"),
        ({"flash_attn": True}, ValueError, "flash_attn must be one of"),
        ({"type_k": "q9_9"}, ValueError, "type_k must be one of .*q8_0"),
        ({"type_v": 8}, ValueError, "type_v must be one of"),
        ({"n_threads": 0}, ValueError, "n_threads must be an int >= 1"),
        ({"n_threads_batch": 1.5}, ValueError, "n_threads_batch must be an int >= 1"),
        ({"n_ubatch": 0}, ValueError, "n_ubatch must be an int >= 1"),
        ({"n_ctx": -1}, ValueError, "n_ctx must be an int >= 0"),
        ({"swa_full": "no"}, TypeError, "swa_full must be True, False or None"),
        ({"offload_kqv": 1}, TypeError, "offload_kqv must be True, False or None"),
        ({"rope": {"freq_base": 1.0}}, TypeError, "rope must be a RopeScaling"),
        ({"deterministic": 1}, TypeError, "deterministic must be True, False or None"),
        ({"deterministic": True, "n_ubatch": 8}, ValueError, "n_ubatch=1, not 8"),
        ({"deterministic": True, "kv_unified": True}, ValueError, "not kv_unified=True"),
    ],
)
def test_bad_context_options_are_refused_before_llama_cpp(
    runtime: Any, libs: Any, models: dict[str, Path], options: dict[str, Any], error: type,
    message: str,
) -> None:  # fmt: skip
    with runtime.Model(models["plain"], libs=libs) as model:
        with pytest.raises(error, match=message):
            runtime.Context(model, **options)


def test_rope_type_names_come_from_llama_h(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    with runtime.Model(models["plain"], libs=libs) as model:
        with pytest.raises(ValueError, match=r"longrope, none, .*yarn"):
            runtime.Context(model, rope=runtime.RopeScaling(type="ntk"))


def test_bad_model_options_are_refused(runtime: Any, libs: Any, models: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match="n_gpu_layers must be an int >= -1"):
        runtime.Model(models["plain"], libs=libs, n_gpu_layers=-2)
    with pytest.raises(ValueError, match="main_gpu must be an int >= 0"):
        runtime.Model(models["plain"], libs=libs, main_gpu=-1)
    with pytest.raises(ValueError, match=r"split_mode must be one of .*layer"):
        runtime.Model(models["plain"], libs=libs, split_mode="rows")
    with runtime.Model(models["plain"], libs=libs, n_gpu_layers=0, split_mode="none") as model:
        assert model.n_vocab > 0


def test_a_context_llama_cpp_refuses_says_why(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    """A quantised V cache without flash attention: llama.cpp refuses, its reason is raised."""
    with runtime.Model(models["plain"], libs=libs) as model:
        with pytest.raises(runtime.LlamaLoadError, match="could not create the context") as info:
            runtime.Context(model, n_ctx=128, flash_attn="off", type_v="q4_0")
    assert "flash_attn" in info.value.reason or "flash attention" in info.value.reason
