"""llama.cpp's model and context parameters as Python arguments, checked before llama.cpp sees them.

An argument left ``None`` keeps llama.cpp's own default (``llama_model_default_params()`` /
``llama_context_default_params()`` of the release these bindings were generated from); the values
a context ended up with are :attr:`Context.settings <llama_bindings.runtime.Context.settings>`.
Names of enum values are taken from the bindings' declarations, so a release that lacks a field or
a value refuses it with :class:`~llama_bindings.errors.LlamaUnsupportedError`, never silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from ._about import LLAMA_CPP_RELEASE
from .errors import LlamaUnsupportedError

# Python names of llama.cpp's enum values: flash attention, RoPE scaling, pooling, split mode.
FLASH_ATTN_CHOICES = {"auto": "AUTO", "off": "DISABLED", "on": "ENABLED"}


@dataclass(frozen=True)
class RopeScaling:
    """RoPE / YaRN overrides of a context; ``None`` keeps what the model file says (llama.cpp's
    default). ``type``: ``"none"``, ``"linear"``, ``"yarn"`` or ``"longrope"``; ``freq_base`` and
    ``freq_scale`` > 0; ``yarn_ext_factor`` >= 0 (llama.cpp's -1 means "from the model", which
    ``None`` says here); ``yarn_orig_ctx`` >= 0 (0: the model's training context)."""

    type: str | None = None
    freq_base: float | None = None
    freq_scale: float | None = None
    yarn_ext_factor: float | None = None
    yarn_attn_factor: float | None = None
    yarn_beta_fast: float | None = None
    yarn_beta_slow: float | None = None
    yarn_orig_ctx: int | None = None

    def __post_init__(self) -> None:
        for name in ("freq_base", "freq_scale", "yarn_attn_factor"):
            _require(getattr(self, name), name, "a finite number > 0", lambda v: v > 0)
        for name in ("yarn_ext_factor", "yarn_beta_fast", "yarn_beta_slow"):
            _require(getattr(self, name), name, "a finite number >= 0", lambda v: v >= 0)
        if self.yarn_orig_ctx is not None and (
            not _is_int(self.yarn_orig_ctx) or self.yarn_orig_ctx < 0
        ):
            raise ValueError(
                f"RopeScaling.yarn_orig_ctx must be an int >= 0, not {self.yarn_orig_ctx!r}"
            )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _require(value: object, name: str, rule: str, ok: Any) -> None:
    if value is None:
        return
    real = isinstance(value, int | float) and not isinstance(value, bool)
    if not real or not math.isfinite(float(value)) or not ok(float(value)):  # type: ignore[arg-type]
        raise ValueError(f"RopeScaling.{name} must be {rule}, not {value!r}")


def has_field(ffi: Any, struct: str, name: str) -> bool:
    """Whether this release's ``struct`` has the field ``name``."""
    return any(field == name for field, _ in ffi.typeof(f"struct {struct}").fields)


def enum_values(ffi: Any, enum: str, prefix: str) -> dict[str, int]:
    """``enum``'s values by their lower-case names without ``prefix`` (``{}`` if the release has
    no such enum)."""
    try:
        elements = ffi.typeof(f"enum {enum}").relements
    except ffi.error:
        return {}
    return {
        name[len(prefix) :].lower(): int(value)
        for name, value in elements.items()
        if name.startswith(prefix) and not name.endswith(("_COUNT", "_MAX_VALUE"))
    }


def enum_name(ffi: Any, enum: str, prefix: str, value: int) -> str:
    """The Python name of ``enum``'s ``value`` (its number as text if it has none)."""
    names = {v: k for k, v in enum_values(ffi, enum, prefix).items()}
    return names.get(int(value), str(int(value)))


def choose(ffi: Any, enum: str, prefix: str, argument: str, value: str) -> int:
    """The value of ``enum`` that ``value`` names; a ValueError listing the names otherwise."""
    values = enum_values(ffi, enum, prefix)
    if not values:
        raise LlamaUnsupportedError(
            f"llama.cpp {LLAMA_CPP_RELEASE} has no {enum}: {argument} is not available"
        )
    if not isinstance(value, str) or value.lower() not in values:
        names = ", ".join(sorted(values))
        raise ValueError(f"{argument} must be one of {names}; not {value!r}")
    return values[value.lower()]


def set_field(ffi: Any, params: Any, struct: str, name: str, value: object, argument: str) -> None:
    """``params.name = value``, or LlamaUnsupportedError if this release's struct lacks it."""
    if not has_field(ffi, struct, name):
        raise LlamaUnsupportedError(
            f"llama.cpp {LLAMA_CPP_RELEASE} has no {struct}.{name}: {argument} is not available"
        )
    setattr(params, name, value)


def check_count(value: int | None, argument: str, minimum: int) -> None:
    if value is not None and (not _is_int(value) or value < minimum):
        raise ValueError(f"{argument} must be an int >= {minimum}, not {value!r}")


def check_flag(value: bool | None, argument: str) -> None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"{argument} must be True, False or None, not {value!r}")


def apply_rope(ffi: Any, params: Any, rope: RopeScaling) -> None:
    """Write the overrides ``rope`` sets into ``llama_context_params``."""
    struct = "llama_context_params"
    if rope.type is not None:
        value = choose(
            ffi,
            "llama_rope_scaling_type",
            "LLAMA_ROPE_SCALING_TYPE_",
            "RopeScaling.type",
            rope.type,
        )
        set_field(ffi, params, struct, "rope_scaling_type", value, "RopeScaling.type")
    for item in fields(rope):
        if item.name == "type":
            continue
        value = getattr(rope, item.name)
        if value is not None:
            target = item.name if item.name.startswith("yarn_") else f"rope_{item.name}"
            set_field(ffi, params, struct, target, value, f"RopeScaling.{item.name}")


def ggml_type(ffi: Any, argument: str, value: str) -> int:
    """A KV cache element type by its ggml name (``"f16"``, ``"q8_0"``, ...)."""
    return choose(ffi, "ggml_type", "GGML_TYPE_", argument, value)


# The llama_context_params fields :attr:`Context.settings` reports (those this release has), and
# for an enum field, the enum and the prefix its Python names drop.
SETTINGS_FIELDS: dict[str, tuple[str, str] | None] = {
    "flash_attn_type": ("llama_flash_attn_type", "LLAMA_FLASH_ATTN_TYPE_"),
    "type_k": ("ggml_type", "GGML_TYPE_"),
    "type_v": ("ggml_type", "GGML_TYPE_"),
    "swa_full": None,
    "offload_kqv": None,
    "op_offload": None,
    "embeddings": None,
    "pooling_type": ("llama_pooling_type", "LLAMA_POOLING_TYPE_"),
    "rope_scaling_type": ("llama_rope_scaling_type", "LLAMA_ROPE_SCALING_TYPE_"),
    "rope_freq_base": None,
    "rope_freq_scale": None,
    "yarn_ext_factor": None,
    "yarn_attn_factor": None,
    "yarn_beta_fast": None,
    "yarn_beta_slow": None,
    "yarn_orig_ctx": None,
}


def requested_settings(ffi: Any, params: Any) -> dict[str, object]:
    """What ``llama_context_params`` asks for, enum values by their Python names (flash
    attention as ``auto``/``on``/``off``); 0 and -1 in the RoPE fields mean "from the model"."""
    flash = {upper.lower(): name for name, upper in FLASH_ATTN_CHOICES.items()}
    found: dict[str, object] = {}
    for name, enum in SETTINGS_FIELDS.items():
        if not has_field(ffi, "llama_context_params", name):
            continue
        value = getattr(params, name)
        if enum is None:
            found[name] = value
            continue
        text = enum_name(ffi, *enum, value)
        found[name] = flash.get(text, text) if name == "flash_attn_type" else text
    return found
