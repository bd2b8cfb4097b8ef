"""LoRA adapters and control vectors: :class:`LoraAdapter` (loaded with
:meth:`Model.load_lora`) and :class:`ContextAdapters`, what one context has set (behind
:meth:`Context.set_loras` and :meth:`Context.set_control_vector`).

Lifetimes: an adapter belongs to its model (llama.cpp frees the adapters a model still has with
it), so it is registered to be freed before the model; closing the model closes its adapters.
Each adapter set on a context is tied to it by a small native object of its own (a *binding*,
freed before the adapter and before the context): freeing the adapter first takes it off the
context (``llama_set_adapters_lora`` with the others), so the context never holds a freed
adapter, whichever is closed first.

Changing what a context has set (adapters, scales, control vector) forgets the tokens its
sequences hold: a prefix computed under other weights is not reused (the next generation decodes
its prompt again)."""

from __future__ import annotations

import errno
import hashlib
import json
import math
import numbers
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any, cast

from .._ffi import SYMBOL_ERRORS
from ..errors import LlamaLoadError, LlamaRuntimeError, LlamaUnsupportedError
from ..lifetimes import NativeObject
from .llama_log import LLAMA_LOG
from .results import LLAMA_CPP_TAG

if TYPE_CHECKING:
    from ..api import LlamaLibrary
    from .model import Model

# What set_control_vector takes: a GGUF control-vector file, every layer's values in one flat
# sequence (layer 1 first), or {layer: values}.
ControlVectorData = str | os.PathLike[str] | Sequence[float] | Mapping[int, Sequence[float]]


def _function(llama: LlamaLibrary, name: str, what: str) -> Any:
    """``llama.<name>``, or :class:`LlamaUnsupportedError` where the release lacks it."""
    try:
        return getattr(llama, name)
    except SYMBOL_ERRORS:
        raise LlamaUnsupportedError(
            f"llama.cpp {LLAMA_CPP_TAG} has no {name}: {what} is not available with it"
        ) from None


def require_file(path: str | os.PathLike[str], what: str) -> None:
    """:class:`FileNotFoundError` unless ``path`` is a file (``what`` names it)."""
    if not os.path.isfile(path):
        why = "is not a file" if os.path.exists(path) else "does not exist"
        raise FileNotFoundError(errno.ENOENT, f"{what} {why}", os.fspath(path))


def _read_string(ffi: Any, read: Any) -> str | None:
    """A string from one of llama.cpp's ``(..., char * buf, size_t size) -> length`` calls."""
    capacity = 256
    for _ in range(2):
        buf = ffi.new("char[]", capacity)
        n = int(read(buf, capacity))
        if n < 0:
            return None
        if n < capacity:
            return str(ffi.string(buf).decode("utf-8", errors="replace"))
        capacity = n + 1
    return None


class LoraAdapter:
    """A LoRA adapter (a GGUF file as llama.cpp's ``convert_lora_to_gguf.py`` writes it) loaded
    for ``model``: ``llama_adapter_lora_init``. Set it on contexts with
    :meth:`Context.set_loras`; one adapter can be set on many contexts of its model.

    A file llama.cpp refuses (not an adapter, another architecture, a tensor the model lacks or
    of another shape) raises :class:`LlamaLoadError` with llama.cpp's reason. Closing the
    adapter (``close()``, its ``with`` block, its collection, or closing its model) takes it off
    every context it is set on first (their held tokens are forgotten); after that its methods
    raise :class:`LlamaClosedError`."""

    def __init__(self, model: Model, path: str | os.PathLike[str]) -> None:
        require_file(path, "the LoRA adapter file")
        model.require_weights("a LoRA adapter")
        self.model = model
        self.path = os.fspath(path)
        self.ffi: Any = model.ffi
        self.llama: LlamaLibrary = model.llama
        init = _function(self.llama, "llama_adapter_lora_init", "a LoRA adapter")
        free = _function(self.llama, "llama_adapter_lora_free", "a LoRA adapter")
        with LLAMA_LOG.capturing() as errors:
            handle = init(model.handle, os.fsencode(path))
        if handle == self.ffi.NULL:
            raise LlamaLoadError(
                f"llama.cpp could not load the LoRA adapter {self.path!r} for this model",
                "; ".join(errors),
            )
        # what tells it from another adapter in a saved state (no path: states name no files)
        self.size = os.path.getsize(path)
        # the adapter's native object (a context's binding registers on it)
        self.native = NativeObject("LoRA adapter", handle, free, self.ffi.NULL)
        self.native.depends_on(model.native)
        self._finalizer = self.native.finalize_with(self)
        # the contexts it is set on (weakly: each context's bindings hold the adapter)
        self._users: weakref.WeakSet[ContextAdapters] = weakref.WeakSet()

    @property
    def handle(self) -> Any:
        """The ``llama_adapter_lora *``; :class:`LlamaClosedError` once closed."""
        return self.native.pointer

    @property
    def closed(self) -> bool:
        return not self.native.alive

    def metadata_value(self, key: str) -> str | None:
        """The adapter's GGUF metadata value for ``key`` as llama.cpp renders it, or None."""
        handle, llama = self.handle, self.llama
        return _read_string(
            self.ffi, lambda buf, n: llama.llama_adapter_meta_val_str(handle, key.encode(), buf, n)
        )

    @property
    def metadata(self) -> dict[str, str]:
        """Every scalar GGUF metadata value of the adapter (arrays are left out by llama.cpp)."""
        handle, llama, found = self.handle, self.llama, {}
        for i in range(int(llama.llama_adapter_meta_count(handle))):
            key = _read_string(self.ffi, partial(llama.llama_adapter_meta_key_by_index, handle, i))
            value = _read_string(
                self.ffi, partial(llama.llama_adapter_meta_val_str_by_index, handle, i)
            )
            if key is not None and value is not None:
                found[key] = value
        return found

    @property
    def alpha(self) -> float | None:
        """``adapter.lora.alpha`` (None: not in the file; llama.cpp then scales by the scale
        alone, else by ``scale * alpha / rank``)."""
        value = self.metadata_value("adapter.lora.alpha")
        return float(value) if value is not None else None

    @property
    def invocation_tokens(self) -> list[int]:
        """An activated LoRA's (aLoRA) invocation tokens (``adapter.alora.invocation_tokens``):
        the token sequence after which such an adapter is meant to apply; empty for a plain
        LoRA. The runtime reports them; it applies an adapter to the whole sequence."""
        handle = self.handle
        count = _function(
            self.llama, "llama_adapter_get_alora_n_invocation_tokens", "aLoRA invocation tokens"
        )
        tokens = _function(
            self.llama, "llama_adapter_get_alora_invocation_tokens", "aLoRA invocation tokens"
        )
        n = int(count(handle))
        return [int(t) for t in self.ffi.unpack(tokens(handle), n)] if n else []

    @cached_property
    def identity(self) -> str:
        """What tells this adapter from another in a saved state (never its path): the SHA-256
        of its file, read at the first save; of its metadata and size if the file is gone."""
        digest = hashlib.sha256()
        try:
            with open(self.path, "rb") as file:
                for block in iter(lambda: file.read(1 << 20), b""):
                    digest.update(block)
        except OSError:
            described = [sorted(self.metadata.items()), self.invocation_tokens, self.size]
            digest.update(json.dumps(described, sort_keys=True).encode())
        return digest.hexdigest()[:32]

    def check_idle(self) -> None:
        """Refuse to close while a context it is set on is in a generation step of another
        thread (:class:`LlamaRuntimeError`)."""
        for user in list(self._users):
            user.check_idle()

    def note_user(self, user: ContextAdapters) -> None:
        self._users.add(user)

    def close(self) -> None:
        """Take the adapter off every context, then free it; a second call does nothing."""
        if self.native.alive:
            self.check_idle()
        self.native.release()
        self._finalizer.detach()

    def __enter__(self) -> LoraAdapter:
        self.handle  # noqa: B018  (a closed adapter raises)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"LoraAdapter({self.path!r}, {state})"


# An aLoRA boundary no prompt reaches: the adapter stays off for the whole generation.
ALORA_NEVER = 1 << 31


def last_occurrence(tokens: Sequence[int], sequence: Sequence[int]) -> int | None:
    """Where the last occurrence of ``sequence`` in ``tokens`` starts (None: it does not)."""
    n = len(sequence)
    for start in range(len(tokens) - n, -1, -1):
        if list(tokens[start : start + n]) == list(sequence):
            return start
    return None


def check_loras(model: Model, loras: object) -> dict[LoraAdapter, float]:
    """``{adapter: scale}`` checked: adapters of ``model``, open, finite scales."""
    if not isinstance(loras, Mapping):
        raise TypeError(
            "loras must be a mapping of LoraAdapter to scale, not " + type(loras).__name__
        )
    checked: dict[LoraAdapter, float] = {}
    for adapter, scale in loras.items():
        if not isinstance(adapter, LoraAdapter):
            raise TypeError(
                f"loras keys must be LoraAdapter (Model.load_lora), not {type(adapter).__name__}"
            )
        adapter.handle  # noqa: B018  (a closed adapter raises LlamaClosedError)
        if adapter.model is not model:
            raise ValueError(
                f"the LoRA adapter {adapter.path!r} was loaded for another model: load it with "
                "this context's model (model.load_lora(path))"
            )
        if isinstance(scale, bool) or not isinstance(scale, int | float):
            raise TypeError(f"the scale of {adapter.path!r} must be a number, not {scale!r}")
        if not math.isfinite(scale):
            raise ValueError(f"the scale of {adapter.path!r} must be finite, not {scale!r}")
        checked[adapter] = float(scale)
    return checked


def _is_array(value: object) -> bool:
    """A sequence or an array (numpy's too), not text and not a mapping."""
    return (
        hasattr(value, "__len__")
        and hasattr(value, "__iter__")
        and not isinstance(value, str | bytes | Mapping)
    )


def _layer_values(values: object, n_embd: int, what: str) -> list[float]:
    if not _is_array(values):
        raise TypeError(
            f"{what} must be a sequence of {n_embd} floats, not {type(values).__name__}"
        )
    floats = []
    for x in cast(Iterable[object], values):
        if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x):
            raise ValueError(f"{what} holds {x!r}: every value must be a finite number")
        floats.append(float(x))
    if len(floats) != n_embd:
        raise ValueError(
            f"{what} has {len(floats)} values: the model's n_embd is {n_embd} (one value per "
            "embedding dimension)"
        )
    return floats


def _rows(data: object, n_embd: int) -> dict[int, list[float]]:
    """Layers 1.. from one flat sequence (whole layers of ``n_embd``) or one row per layer."""
    items = list(cast(Iterable[object], data))
    if items and all(_is_array(row) for row in items):
        return {i + 1: _layer_values(row, n_embd, f"layer {i + 1}") for i, row in enumerate(items)}
    if not items or len(items) % n_embd != 0:
        raise ValueError(
            f"the control vector has {len(items)} values: a whole number of layers of the "
            f"model's n_embd {n_embd} (layer 1 first) is needed"
        )
    return {
        1 + i // n_embd: _layer_values(items[i : i + n_embd], n_embd, f"layer {1 + i // n_embd}")
        for i in range(0, len(items), n_embd)
    }


def control_vector_layers(data: object, n_embd: int, n_layer: int) -> dict[int, list[float]]:
    """``{layer: n_embd floats}`` from a flat sequence (whole layers, layer 1 first), one row
    per layer (a 2-D array), or a mapping ``{layer: floats}``; each layer in 1..``n_layer - 1``
    (llama.cpp has no control vector for layer 0)."""
    if isinstance(data, Mapping):
        layers = {}
        for layer, values in data.items():
            if isinstance(layer, bool) or not isinstance(layer, int):
                raise TypeError(f"control vector layers must be ints, not {layer!r}")
            layers[layer] = _layer_values(values, n_embd, f"the control vector of layer {layer}")
    elif _is_array(data):
        layers = _rows(data, n_embd)
    else:
        raise TypeError(
            "the control vector must be a GGUF file path, a sequence of floats (n_embd per "
            "layer, layer 1 first), one row per layer, or a mapping of layer to floats; not "
            f"{type(data).__name__}"
        )
    outside = sorted(layer for layer in layers if not 1 <= layer < n_layer)
    if outside:
        raise ValueError(
            f"control vector layer(s) {outside} outside 1..{n_layer - 1}: the model has "
            f"{n_layer} layers and none for layer 0"
        )
    return layers


def read_control_vector(path: str | os.PathLike[str], n_embd: int) -> dict[int, list[float]]:
    """The ``direction.<layer>`` tensors of a GGUF control-vector file (as llama.cpp's
    ``common`` loader reads them: F32, one dimension, ``n_embd`` values, layers from 1; several
    tensors for one layer add up)."""
    require_file(path, "the control vector file")
    # gguf (and numpy) load with the first control-vector file, not with the runtime: import
    # time saved, measured (-X importtime, 3 runs): about 95 to 150 ms
    import gguf

    try:
        reader = gguf.GGUFReader(os.fspath(path))
    except (ValueError, OSError) as exc:
        raise LlamaLoadError(f"not a GGUF file: {os.fspath(path)!r}", str(exc)) from exc
    layers: dict[int, list[float]] = {}
    for tensor in reader.tensors:
        prefix, _, index = tensor.name.partition(".")
        if prefix != "direction" or not index.isdigit() or int(index) == 0:
            raise ValueError(
                f"{os.fspath(path)!r}: tensor {tensor.name!r} is not a direction.<layer> "
                "tensor of layer 1 or above"
            )
        if tensor.tensor_type != gguf.GGMLQuantizationType.F32 or len(tensor.shape) != 1:
            raise ValueError(f"{os.fspath(path)!r}: tensor {tensor.name!r} is not 1-D F32")
        values = _layer_values([float(x) for x in tensor.data], n_embd, tensor.name)
        held = layers.get(int(index))
        layers[int(index)] = (
            values if held is None else [a + b for a, b in zip(held, values, strict=True)]
        )
    if not layers:
        raise ValueError(f"{os.fspath(path)!r} has no direction.<layer> tensors")
    return layers


class ContextAdapters:
    """What one context has set: LoRA adapters with their scales and a control vector. It
    refers to the context's native object, never to the Context: ``forget_held`` forgets what
    the context's sequences hold, ``draft_context`` gives its speculative sidecar's draft
    context (``ffi.NULL``: none)."""

    def __init__(
        self,
        model: Model,
        native: NativeObject,
        forget_held: Callable[[], None],
        draft_context: Callable[[], Any],
    ) -> None:
        self.model_native = model.native
        self.llama: LlamaLibrary = model.llama
        self.ffi: Any = model.ffi
        self.native = native
        self.forget_held = forget_held
        self.draft_context = draft_context
        self.loras: dict[LoraAdapter, float] = {}
        self.applied = True  # whether the adapters are on the contexts (an aLoRA turns them off)
        self.bindings: dict[LoraAdapter, NativeObject] = {}
        self.control: tuple[tuple[int, ...], tuple[float, ...]] | None = None
        model_handle = model.handle
        self.n_embd = int(self.llama.llama_model_n_embd(model_handle))
        self.n_layer = int(self.llama.llama_model_n_layer(model_handle))

    def check_idle(self) -> None:
        active = self.native.active_thread
        if self.native.alive and active is not None and active != threading.get_ident():
            raise LlamaRuntimeError(
                "a context this LoRA adapter is set on is in use by another thread (a "
                "generation step): cancel the generation and let it return before closing"
            )

    def _contexts(self) -> list[Any]:
        """The contexts to set adapters on: the target, and the sidecar's draft context where it
        is on the same model (draft-mtp's MTP context; not a draft model's)."""
        found = [self.native.pointer]
        draft = self.draft_context()
        if (
            draft != self.ffi.NULL
            and self.llama.llama_get_model(draft) == self.model_native.pointer
        ):
            found.append(draft)
        return found

    def describe(self) -> dict[str, Any]:
        """The adapters and control vector set, as a saved state records them."""
        loras = sorted([a.identity, scale] for a, scale in self.loras.items() if a.native.alive)
        control = None
        if self.control is not None:
            control = hashlib.sha256(repr(self.control).encode()).hexdigest()[:16]
        return {"loras": loras, "control": control}

    def alora_boundary(self, tokens: Sequence[int]) -> int | None:
        """Where the set aLoRA applies from in a generation after ``tokens``, as llama.cpp's
        server rules: from one position before the last occurrence of its invocation tokens
        (the tokens before it are computed without the adapter, so their cache is the base
        model's), or :data:`ALORA_NEVER` when they do not occur (the adapter stays off). None
        when the enabled adapters are not all aLoRAs: they apply everywhere. Two aLoRAs at once
        are refused, as the server does."""
        enabled = [a for a, scale in self.loras.items() if scale != 0.0 and a.native.alive]
        if not enabled:
            return None
        invocations = [a.invocation_tokens for a in enabled]
        if not all(invocations):
            return None
        if len(enabled) > 1:
            raise LlamaUnsupportedError(
                "more than one aLoRA is set: an aLoRA applies from its own invocation tokens, so "
                "set one at a time (llama.cpp's server refuses this too)"
            )
        start = last_occurrence(tokens, invocations[0])
        return ALORA_NEVER if start is None else max(0, start - 1)

    def switch(self, on: bool) -> None:
        """The set adapters on (``on``) or off, on every context they are set on."""
        if on != self.applied:
            self._apply_loras(on)

    def _apply_loras(self, on: bool = True) -> None:
        set_all = _function(self.llama, "llama_set_adapters_lora", "LoRA adapters on a context")
        pairs = [(a, s) for a, s in self.loras.items() if a.native.alive] if on else []
        adapters = self.ffi.new("struct llama_adapter_lora *[]", max(1, len(pairs)))
        scales = self.ffi.new("float[]", max(1, len(pairs)))
        for i, (adapter, scale) in enumerate(pairs):
            adapters[i], scales[i] = adapter.native.pointer, scale
        for ctx in self._contexts():
            status = int(set_all(ctx, adapters, len(pairs), scales))
            if status != 0:
                raise LlamaRuntimeError(f"llama_set_adapters_lora failed ({status})")
        self.applied = on

    def set_loras(self, loras: object, model: Model) -> None:
        """Set exactly ``loras`` (checked by :func:`check_loras`); nothing changes when they
        are what is set."""
        checked = check_loras(model, loras)
        if checked == self.loras:
            return
        _function(self.llama, "llama_set_adapters_lora", "LoRA adapters on a context")
        self.loras = checked
        self.forget_held()
        self._apply_loras()
        for adapter in [a for a in self.bindings if a not in checked]:
            self.bindings.pop(adapter).release()
        for adapter in checked:
            if adapter not in self.bindings:
                self._bind(adapter)

    def _bind(self, adapter: LoraAdapter) -> None:
        binding = NativeObject(
            "LoRA adapter's use by a context", self.native.pointer, self._detach_for(adapter),
            self.ffi.NULL,
        )  # fmt: skip
        binding.depends_on(adapter.native)
        binding.depends_on(self.native)
        self.bindings[adapter] = binding
        adapter.note_user(self)

    def _detach_for(self, adapter: LoraAdapter) -> Any:
        """What freeing ``adapter``'s binding does: take it off the context (if it is still
        set there), so the context never holds a freed adapter."""
        ref = weakref.ref(adapter)

        def detach(_ctx: Any) -> None:
            held = ref()
            if held is None or held not in self.loras:
                return
            del self.loras[held]
            self.bindings.pop(held, None)
            self.forget_held()
            if self.native.alive:
                self._apply_loras()

        return detach

    def check_control_vector(
        self, vector: object, layer_start: int | None, layer_end: int | None, scale: object
    ) -> tuple[dict[int, list[float]], int, int]:
        """:meth:`Context.set_control_vector`'s arguments checked: the layers' values (scaled)
        and the first and last layer they apply to (default: 1 and the last layer)."""
        last = self.n_layer - 1
        start = 1 if layer_start is None else layer_start
        end = last if layer_end is None else layer_end
        for name, value in (("layer_start", start), ("layer_end", end)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, not {value!r}")
        if not 1 <= start <= end <= last:
            raise ValueError(
                f"layer_start {start} .. layer_end {end}: a range within 1 .. {last} is needed "
                f"(the model has {self.n_layer} layers, none with a control vector at 0)"
            )
        if isinstance(scale, bool) or not isinstance(scale, int | float):
            raise TypeError(f"scale must be a number, not {scale!r}")
        if isinstance(vector, str | os.PathLike):
            layers = read_control_vector(vector, self.n_embd)
        else:
            layers = control_vector_layers(vector, self.n_embd, self.n_layer)
        scaled = {k: [x * scale for x in v] for k, v in layers.items()}
        return control_vector_layers(scaled, self.n_embd, self.n_layer), start, end

    def set_control_vector(
        self, layers: dict[int, list[float]], layer_start: int, layer_end: int
    ) -> None:
        """``layers`` (from :func:`control_vector_layers`) on layers ``layer_start`` to
        ``layer_end`` (inclusive) of the target context."""
        apply = _function(self.llama, "llama_set_adapter_cvec", "a control vector")
        n_embd, size = self.n_embd, self.n_embd * (self.n_layer - 1)
        flat = [0.0] * size  # every layer written: llama.cpp keeps a layer's old values otherwise
        for layer, values in layers.items():
            flat[(layer - 1) * n_embd : layer * n_embd] = values
        key = (layer_start, layer_end), tuple(flat)
        if key == self.control:
            return
        data = self.ffi.new("float[]", flat)
        with LLAMA_LOG.capturing() as errors:
            status = int(apply(self.native.pointer, data, size, n_embd, layer_start, layer_end))
        if status != 0:
            raise LlamaRuntimeError(f"llama_set_adapter_cvec failed: {'; '.join(errors)}")
        self.control = key
        self.forget_held()

    def clear_control_vector(self) -> None:
        apply = _function(self.llama, "llama_set_adapter_cvec", "a control vector")
        if self.control is None:
            return
        status = int(apply(self.native.pointer, self.ffi.NULL, 0, self.n_embd, -1, -1))
        if status != 0:
            raise LlamaRuntimeError(f"llama_set_adapter_cvec failed ({status}) clearing it")
        self.control = None
        self.forget_held()
