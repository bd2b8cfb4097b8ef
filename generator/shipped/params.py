"""llama.cpp's model and context parameters as Python arguments, checked before llama.cpp sees them.

An argument left ``None`` keeps llama.cpp's own default (``llama_model_default_params()`` /
``llama_context_default_params()`` of the release these bindings were generated from); the values
a context ended up with are :attr:`Context.settings <llama_bindings.runtime.Context.settings>`.
Names of enum values are taken from the bindings' declarations, so a release that lacks a field or
a value refuses it with :class:`~llama_bindings.errors.LlamaUnsupportedError`, never silently.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
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


def require_field(ffi: Any, struct: str, name: str, argument: str) -> None:
    """LlamaUnsupportedError naming ``argument`` if this release's ``struct`` lacks ``name``."""
    if not has_field(ffi, struct, name):
        raise LlamaUnsupportedError(
            f"llama.cpp {LLAMA_CPP_RELEASE} has no {struct}.{name}: {argument} is not available"
        )


def set_field(ffi: Any, params: Any, struct: str, name: str, value: object, argument: str) -> None:
    """``params.name = value``, or LlamaUnsupportedError if this release's struct lacks it."""
    require_field(ffi, struct, name, argument)
    setattr(params, name, value)


def check_count(value: int | None, argument: str, minimum: int) -> None:
    if value is not None and (not _is_int(value) or value < minimum):
        raise ValueError(f"{argument} must be an int >= {minimum}, not {value!r}")


def check_flag(value: bool | None, argument: str) -> None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"{argument} must be True, False or None, not {value!r}")


def default_threads() -> int:
    """A context's threads when none are given: the CPU count, at most 4 (llama.cpp's own
    default is 4, more threads than cores on a smaller machine)."""
    return max(1, min(4, os.cpu_count() or 1))


def deterministic_layout(
    deterministic: bool, n_ubatch: int | None, kv_unified: bool | None
) -> tuple[int | None, bool | None]:
    """``n_ubatch`` and ``kv_unified`` as a context gets them: with ``deterministic`` one token per
    physical batch and one KV buffer per sequence (ValueError when they were asked otherwise)."""
    check_flag(deterministic, "deterministic")
    if not deterministic:
        return n_ubatch, kv_unified
    if n_ubatch not in (None, 1):
        raise ValueError(
            f"deterministic=True decodes one token per pass: n_ubatch=1, not {n_ubatch}"
        )
    if kv_unified:
        raise ValueError("deterministic=True keeps one KV buffer per sequence: not kv_unified=True")
    return 1, False


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
    "kv_unified": None,
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


# llama_model_params -----------------------------------------------------------------------------

MODEL_PARAMS = "llama_model_params"

# A ``kv_overrides`` value: the Python type picks the llama_model_kv_override_type (bool first: a
# bool is an int in Python).
KvOverride = int | float | bool | str
_KV_TAGS: tuple[tuple[type, str], ...] = (
    (bool, "bool"), (int, "int"), (float, "float"), (str, "str"),
)  # fmt: skip


def check_kv_overrides(overrides: object) -> dict[str, KvOverride] | None:
    """``kv_overrides`` checked (a mapping of non-empty str keys to int, float, bool or str), as
    a dict in its order; the sizes llama.cpp's struct allows are checked when it is filled."""
    if overrides is None:
        return None
    if not isinstance(overrides, Mapping):
        raise TypeError(
            "kv_overrides must be a dict of GGUF key -> int, float, bool or str, not "
            f"{type(overrides).__name__}"
        )
    checked: dict[str, KvOverride] = {}
    for key, value in overrides.items():
        if not isinstance(key, str):
            raise TypeError(f"kv_overrides keys must be str, not {key!r}")
        if not key or "\0" in key:
            raise ValueError(f"kv_overrides key {key!r} must be a non-empty str without NUL")
        if not isinstance(value, int | float | str):
            raise TypeError(
                f"kv_overrides[{key!r}] must be an int, float, bool or str, not "
                f"{type(value).__name__}"
            )
        if isinstance(value, str) and "\0" in value:
            raise ValueError(f"kv_overrides[{key!r}] must not hold a NUL character")
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            raise ValueError(f"kv_overrides[{key!r}] = {value} does not fit an int64")
        checked[key] = value
    return checked


def kv_override_array(ffi: Any, overrides: Mapping[str, KvOverride]) -> Any:
    """A ``struct llama_model_kv_override[]`` holding ``overrides`` and, last, the entry with an
    empty key that ends the list for llama.cpp; a key or string value longer than the struct's
    arrays hold (with their NUL) raises ValueError."""
    struct = "struct llama_model_kv_override"
    require_field(ffi, MODEL_PARAMS, "kv_overrides", "kv_overrides")
    tags = enum_values(ffi, "llama_model_kv_override_type", "LLAMA_KV_OVERRIDE_TYPE_")
    array = ffi.new(f"{struct}[]", len(overrides) + 1)  # zeroed: the last key is empty
    for i, (key, value) in enumerate(overrides.items()):
        entry = array[i]
        entry.key = _fitting(key, len(entry.key), f"the kv_overrides key {key!r}")
        tag = next(name for kind, name in _KV_TAGS if isinstance(value, kind))
        if tag not in tags:
            raise LlamaUnsupportedError(
                f"llama.cpp {LLAMA_CPP_RELEASE} has no {tag} overrides: kv_overrides[{key!r}]"
            )
        entry.tag = tags[tag]
        if isinstance(value, str):
            entry.val_str = _fitting(value, len(entry.val_str), f"kv_overrides[{key!r}]")
        else:
            setattr(entry, {"bool": "val_bool", "int": "val_i64"}.get(tag, "val_f64"), value)
    return array


def _fitting(text: str, capacity: int, what: str) -> bytes:
    data = text.encode("utf-8")
    if len(data) >= capacity:
        raise ValueError(
            f"{what} is {len(data)} bytes in UTF-8; llama.cpp's llama_model_kv_override holds "
            f"at most {capacity - 1}"
        )
    return data


def check_choice(value: object, argument: str) -> None:
    """A name of an enum value (checked against the release's enum once it is loaded)."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{argument} must be a str or None, not {value!r}")


def check_tensor_split(values: object) -> tuple[float, ...] | None:
    """``tensor_split``: a sequence of finite numbers >= 0 (a share of the model per device)."""
    if values is None:
        return None
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise TypeError(f"tensor_split must be a sequence of numbers or None, not {values!r}")
    for value in values:
        real = isinstance(value, int | float) and not isinstance(value, bool)
        if not real or not math.isfinite(value) or value < 0:
            raise ValueError(f"tensor_split must hold finite numbers >= 0, not {value!r}")
    return tuple(float(v) for v in values)


def tensor_split_array(ffi: Any, values: Sequence[float], max_devices: int) -> Any:
    """``float[max_devices]`` (what llama.cpp reads) holding ``values``, zeros after them."""
    require_field(ffi, MODEL_PARAMS, "tensor_split", "tensor_split")
    if len(values) > max_devices:
        raise ValueError(
            f"tensor_split has {len(values)} values; these libraries split across at most "
            f"{max_devices} devices (llama_max_devices())"
        )
    return ffi.new("float[]", [*values, *([0.0] * (max_devices - len(values)))])


def check_load_options(flags: Mapping[str, bool | None], load_mode: str | None) -> None:
    """The load flags and ``load_mode``, before any library is loaded."""
    for name, flag in flags.items():
        check_flag(flag, name)
    check_choice(load_mode, "load_mode")
    given = [name for name, flag in flags.items() if flag is not None]
    if load_mode is not None and given:
        raise ValueError(
            f"load_mode= and {'=, '.join(given)}= say the same thing: pass one or the other"
        )


def apply_load_options(
    ffi: Any, params: Any, flags: Mapping[str, bool | None], load_mode: str | None
) -> None:
    """Write how the file is read into ``params``: ``load_mode`` by name, or the flags, as
    fields where the release has them, else translated to its ``load_mode``."""
    given = {name: flag for name, flag in flags.items() if flag is not None}
    if load_mode is None and given and has_field(ffi, MODEL_PARAMS, "load_mode"):
        load_mode = load_mode_of(**flags)
        if load_mode is None:
            return  # what llama.cpp's default (auto) does already
    elif load_mode is None:
        for name, flag in given.items():
            set_field(ffi, params, MODEL_PARAMS, name, flag, name)
        return
    value = choose(ffi, "llama_load_mode", "LLAMA_LOAD_MODE_", "load_mode", load_mode)
    set_field(ffi, params, MODEL_PARAMS, "load_mode", value, "load_mode")


def load_mode_of(
    use_mmap: bool | None = None, use_mlock: bool | None = None, use_direct_io: bool | None = None
) -> str | None:
    """The ``llama_load_mode`` (its Python name) that the flags of releases before it ask for;
    None: llama.cpp's default (auto: mmap where the devices allow it, no mlock, no direct I/O)."""
    if use_direct_io:
        if use_mmap or use_mlock:
            raise ValueError(
                "use_direct_io=True is load_mode 'direct_io' in this release: it reads the file "
                "without mmap or mlock, so not with use_mmap=True or use_mlock=True"
            )
        return "direct_io"
    if use_mlock:
        return "mlock" if use_mmap is False else "mmap_mlock"
    if use_mmap is None:
        return None
    return "mmap" if use_mmap else "none"
