"""A model loaded from a GGUF file: :class:`Model`."""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._about import LOAD_MTP_PARAM, MTP_API, NEXTN_COUNT_FUNCTION
from ..errors import LlamaLoadError, LlamaRuntimeError, LlamaUnsupportedError
from ..lifetimes import NativeObject
from ..loader import Libraries, load
from ..params import (
    MODEL_PARAMS,
    KvOverride,
    apply_load_options,
    check_choice,
    check_count,
    check_flag,
    check_kv_overrides,
    check_load_options,
    check_tensor_split,
    choose,
    kv_override_array,
    set_field,
    tensor_split_array,
)
from ..rpc_protocol import Endpoint
from .adapters import LoraAdapter
from .chat_layer import ChatTemplates
from .devices import (
    CONNECTIONS,
    connect_servers,
    device_array,
    local_offload_devices,
    parse_endpoints,
)
from .llama_log import LLAMA_LOG
from .media import Projector
from .results import LLAMA_CPP_TAG, ChatMessages, ChatTemplateError, role_content

if TYPE_CHECKING:
    from ..api import LlamaLibrary


class Model:
    """A model loaded from a GGUF file. ``load_mtp``: also load the MTP (NextN) layers, which
    speculative mode draft-mtp needs. ``n_gpu_layers`` (-1: all), ``main_gpu``, ``split_mode``
    (``"none"``, ``"layer"``, ``"row"``, ...) and ``tensor_split`` (each device's share, at most
    ``llama_max_devices()`` numbers >= 0): offloading; ``use_extra_bufts``: llama.cpp's repacked
    weight layouts for the CPU (on by default; with them a row's logits depend on the batch it is
    computed in, see :class:`SpeculativeDecoding`); ``no_host``: no host buffer, so extra buffer
    types can be used.

    ``vocab_only``: load the vocabulary alone, no weights (llama.cpp's ``ggml-vocab-*.gguf``
    files): tokenize, detokenize, token_bytes, the metadata and the chat template work, a
    :class:`Context` is refused (:meth:`require_weights`). ``check_tensors``: check the tensor
    data as it is read. How the file is read: ``load_mode`` (``"auto"``, ``"none"``,
    ``"mmap"``, ``"mlock"``, ``"mmap_mlock"``, ``"direct_io"``) and ``lazy_mode`` (``"off"``,
    ``"auto"``, ``"on"``) where the release has them, or llama-cpp-python's flags ``use_mmap``,
    ``use_mlock`` and ``use_direct_io``: set as such on releases before ``load_mode``, on later
    ones translated to it (``use_mmap=False``: ``"none"``, ``use_mlock=True``: ``"mmap_mlock"``,
    or ``"mlock"`` with ``use_mmap=False``; ``use_direct_io=True``: ``"direct_io"``).
    ``kv_overrides``: GGUF metadata values to use instead of the file's (``{key: int | float |
    bool | str}``), where llama.cpp reads them while loading (:meth:`metadata_value` still gives
    the file's); a value whose type is not the one llama.cpp reads the key as is ignored, with a
    warning in llama.cpp's log.

    None keeps llama.cpp's default (``llama_model_default_params()`` of the loaded libraries,
    :mod:`~llama_bindings.params`); an argument the release's ``llama_model_params`` lacks raises
    :class:`LlamaUnsupportedError`. Not exposed: ``devices`` (set from ``rpc_servers``) and
    ``tensor_buft_overrides`` (they take ggml backend device and buffer-type handles, which the
    runtime does not hand out),
    ``progress_callback`` (a C callback per load), and ``no_alloc`` (a model without its
    weights allocated, for llama.cpp's memory estimate: nothing here can run on it).

    ``rpc_servers``: ``host:port`` of RPC workers (``python -m llama_bindings rpc-server``,
    from the same llama.cpp release) whose devices take layers too, in that order, before this
    machine's GPUs (llama.cpp's order); the CPU keeps what is not offloaded, so with
    ``n_gpu_layers`` below the model's layer count the model is split over this machine and the
    servers, by ``tensor_split`` (one share per server device, then per local GPU) or else by
    their free memory. Each server is checked before llama.cpp connects (reachable, answers the
    RPC handshake, same protocol version): a failed check raises
    :class:`~llama_bindings.errors.LlamaRpcError` where llama.cpp would end the process. A
    server lost after loading still ends it (llama.cpp's ``GGML_ABORT``): see
    :mod:`~llama_bindings.runtime.devices`. The protocol is unauthenticated and unencrypted:
    reach a server on another machine through an SSH tunnel or a VPN, never an open network.

    ``libs``: opened libraries (default: :func:`load` with ``lib_dir``). ``verbose``:
    llama.cpp's log to stderr (True) or to the ``llama_bindings.llama_cpp`` logger (False);
    ``None`` keeps the process-wide setting, which starts as False (see :func:`set_llama_log`).
    A file llama.cpp cannot load raises :class:`LlamaLoadError` with the error lines llama.cpp
    logged, whatever the log's routing.

    ``mmproj``: a multimodal projector GGUF for the model (:class:`Projector`, libmtmd), so
    that prompts can hold images and audio (``Context.generate(..., media=[...])``, content parts
    in ``chat``); with options: :meth:`load_projector`.

    Lifetimes: closing a model (``close()``, leaving its ``with`` block, or its collection)
    first closes every :class:`Context` on it, every context that uses it as a draft model,
    every :class:`LoraAdapter` loaded for it (:meth:`load_lora`) and its :class:`Projector`;
    after that, every method and property of those objects raises :class:`LlamaClosedError`.
    The arrays given to llama.cpp (``kv_overrides``, ``tensor_split``) live as long as the model.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        load_mtp: bool = False,
        n_gpu_layers: int | None = None,
        main_gpu: int | None = None,
        split_mode: str | None = None,
        tensor_split: Sequence[float] | None = None,
        use_extra_bufts: bool | None = None,
        no_host: bool | None = None,
        vocab_only: bool | None = None,
        check_tensors: bool | None = None,
        load_mode: str | None = None,
        lazy_mode: str | None = None,
        use_mmap: bool | None = None,
        use_mlock: bool | None = None,
        use_direct_io: bool | None = None,
        kv_overrides: Mapping[str, KvOverride] | None = None,
        mmproj: str | os.PathLike[str] | None = None,
        rpc_servers: Sequence[str] | None = None,
        libs: Libraries | None = None,
        lib_dir: str | os.PathLike[str] | None = None,
        verbose: bool | None = None,
    ) -> None:
        if not os.path.isfile(path):
            what = "is not a file" if os.path.exists(path) else "does not exist"
            raise FileNotFoundError(errno.ENOENT, f"the model file {what}", os.fspath(path))
        check_count(n_gpu_layers, "n_gpu_layers", -1)
        check_count(main_gpu, "main_gpu", 0)
        flags = {
            "use_extra_bufts": use_extra_bufts,
            "no_host": no_host,
            "vocab_only": vocab_only,
            "check_tensors": check_tensors,
        }
        for name, flag in flags.items():
            check_flag(flag, name)
        load_flags = {"use_mmap": use_mmap, "use_mlock": use_mlock, "use_direct_io": use_direct_io}
        check_load_options(load_flags, load_mode)
        check_choice(lazy_mode, "lazy_mode")
        split = check_tensor_split(tensor_split)
        overrides = check_kv_overrides(kv_overrides)
        endpoints = parse_endpoints(rpc_servers) if rpc_servers is not None else ()
        if load_mtp and not MTP_API:
            raise LlamaUnsupportedError(
                f"llama.cpp {LLAMA_CPP_TAG} has no MTP API: load_mtp is not available"
            )
        self.libs = libs if libs is not None else load(lib_dir)
        LLAMA_LOG.install(self.libs, verbose)
        self.ffi: Any = self.libs.ffi
        self.llama: LlamaLibrary = self.libs.llama
        self.load_mtp = load_mtp
        self.llama.llama_backend_init()
        params = self.llama.llama_model_default_params()
        if n_gpu_layers is not None:
            params.n_gpu_layers = n_gpu_layers
        if main_gpu is not None:
            params.main_gpu = main_gpu
        if split_mode is not None:
            params.split_mode = choose(
                self.ffi, "llama_split_mode", "LLAMA_SPLIT_MODE_", "split_mode", split_mode
            )
        self._set_flags(params, flags, load_flags, load_mode, lazy_mode)
        self._arrays = self._set_arrays(params, split, overrides)
        if endpoints:
            self._set_devices(params, endpoints)
        if load_mtp and LOAD_MTP_PARAM:
            params.load_mtp = True  # (releases before load_mtp always load the NextN layers)
        self._vocab_only = bool(params.vocab_only)
        self._load(path, params)
        CONNECTIONS.add(self, endpoints)
        self._projector: Projector | None = None
        if mmproj is not None:
            try:
                self.load_projector(mmproj)
            except BaseException:
                self.close()
                raise

    def _set_flags(
        self,
        params: Any,
        flags: Mapping[str, bool | None],
        load_flags: Mapping[str, bool | None],
        load_mode: str | None,
        lazy_mode: str | None,
    ) -> None:
        """The flags given (None: llama.cpp's default), the load mode and the lazy mode."""
        for name, flag in flags.items():
            if flag is not None:
                set_field(self.ffi, params, MODEL_PARAMS, name, flag, name)
        apply_load_options(self.ffi, params, load_flags, load_mode)
        if lazy_mode is not None:
            value = choose(self.ffi, "llama_lazy_mode", "LLAMA_LAZY_MODE_", "lazy_mode", lazy_mode)
            set_field(self.ffi, params, MODEL_PARAMS, "lazy_mode", value, "lazy_mode")

    def _set_devices(self, params: Any, endpoints: Sequence[Endpoint]) -> None:
        """The RPC servers' devices (each server checked first), then this machine's GPUs, as
        ``params.devices``; the model keeps the array."""
        offload = [*connect_servers(self.libs, endpoints), *local_offload_devices(self.libs)]
        self._arrays.append(device_array(self.libs, offload))
        params.devices = self._arrays[-1]

    def _set_arrays(
        self, params: Any, split: Sequence[float] | None, overrides: dict[str, KvOverride] | None
    ) -> list[Any]:
        """Point ``params`` at the arrays of ``tensor_split`` and ``kv_overrides``; the model
        keeps them (releases that borrow the pointers read them after the load)."""
        arrays: list[Any] = []
        # the arrays cffi allocated are kept, not the fields read back: a field gives a pointer
        # that does not own its memory, and the array would be freed at once
        if split is not None:
            max_devices = int(self.llama.llama_max_devices())
            arrays.append(tensor_split_array(self.ffi, split, max_devices))
            params.tensor_split = arrays[-1]
        if overrides:
            arrays.append(kv_override_array(self.ffi, overrides))
            params.kv_overrides = arrays[-1]
        return arrays

    def _load(self, path: str | os.PathLike[str], params: Any) -> None:
        with LLAMA_LOG.capturing() as errors:
            handle = self.llama.llama_model_load_from_file(os.fsencode(path), params)
        if handle == self.ffi.NULL:
            raise LlamaLoadError(
                f"llama.cpp could not load the model {os.fspath(path)!r}", "; ".join(errors)
            )
        self._native = NativeObject("model", handle, self.llama.llama_model_free, self.ffi.NULL)
        self._finalizer = self._native.finalize_with(self)
        self._vocab: Any = self.llama.llama_model_get_vocab(handle)

    @property
    def vocab_only(self) -> bool:
        """Whether the model was loaded without its weights (``vocab_only=True``)."""
        self._native.pointer  # noqa: B018  (raises once closed)
        return self._vocab_only

    def require_weights(self, what: str) -> None:
        """Raise :class:`LlamaUnsupportedError` if the model has no weights (``vocab_only``):
        ``what`` (such as ``"a Context"``) needs them. A closed model raises LlamaClosedError."""
        self._native.pointer  # noqa: B018  (raises once closed)
        if self._vocab_only:
            raise LlamaUnsupportedError(
                f"the model was loaded with vocab_only=True: it has no weights, so {what} is not "
                "available (tokenize, detokenize and the metadata are)"
            )

    def load_lora(self, path: str | os.PathLike[str]) -> LoraAdapter:
        """Load the LoRA adapter GGUF at ``path`` for this model (``llama_adapter_lora_init``);
        set it on a context with :meth:`Context.set_loras`. A file llama.cpp refuses (another
        architecture, a tensor the model lacks or of another shape) raises
        :class:`LlamaLoadError` with llama.cpp's reason; a release without the adapter API
        raises :class:`LlamaUnsupportedError`. The adapter is freed before the model."""
        return LoraAdapter(self, path)

    def load_projector(
        self,
        path: str | os.PathLike[str],
        *,
        use_gpu: bool | None = None,
        n_threads: int | None = None,
        warmup: bool | None = None,
        image_min_tokens: int | None = None,
        image_max_tokens: int | None = None,
        max_image_side: int | None = None,
        max_image_pixels: int | None = None,
    ) -> Projector:
        """Load the multimodal projector GGUF at ``path`` (see :class:`Projector` for the
        options and errors) as :attr:`projector`, closing the one loaded before."""
        projector = Projector(
            self, path, use_gpu=use_gpu, n_threads=n_threads, warmup=warmup,
            image_min_tokens=image_min_tokens, image_max_tokens=image_max_tokens,
            max_image_side=max_image_side, max_image_pixels=max_image_pixels,
        )  # fmt: skip
        if self._projector is not None:
            self._projector.close()
        self._projector = projector
        return projector

    @property
    def projector(self) -> Projector | None:
        """The multimodal projector loaded with ``mmproj`` (None: the model takes text only)."""
        self._native.pointer  # noqa: B018  (raises once closed)
        return self._projector

    @property
    def handle(self) -> Any:
        """The ``llama_model *``; :class:`LlamaClosedError` once the model is closed."""
        return self._native.pointer

    @property
    def native(self) -> NativeObject:
        """The model's native object (contexts register on it to be closed first)."""
        return self._native

    @property
    def vocab(self) -> Any:
        """The model's ``llama_vocab *`` (it lives as long as the model)."""
        self._native.pointer  # noqa: B018  (raises once closed)
        return self._vocab

    @property
    def closed(self) -> bool:
        return not self._native.alive

    @property
    def n_nextn_layers(self) -> int:
        """Number of NextN (MTP) layers the model file has (0: no MTP head)."""
        handle = self.handle
        if not MTP_API:
            return 0
        if NEXTN_COUNT_FUNCTION:
            return int(self.llama.llama_model_n_layer_nextn(handle))
        # Releases before llama_model_n_layer_nextn: the GGUF key the loader reads.
        arch = self.metadata_value("general.architecture")
        value = self.metadata_value(f"{arch}.nextn_predict_layers") if arch else None
        return int(value) if value is not None and value.isdigit() else 0

    def metadata_value(self, key: str) -> str | None:
        """The model's GGUF metadata value for ``key`` as llama.cpp renders it, or None."""
        capacity = 256
        for _ in range(2):
            buf = self.ffi.new("char[]", capacity)
            n = int(self.llama.llama_model_meta_val_str(self.handle, key.encode(), buf, capacity))
            if n < 0:
                return None
            if n < capacity:
                return str(self.ffi.string(buf).decode("utf-8", errors="replace"))
            capacity = n + 1
        return None

    @property
    def identity(self) -> dict[str, object]:
        """What tells this model from another (a saved state names it): llama.cpp's description,
        its parameter count, size in bytes, vocabulary size and NextN layers."""
        buf = self.ffi.new("char[]", 256)
        self.llama.llama_model_desc(self.handle, buf, 256)
        return {
            "desc": self.ffi.string(buf).decode("utf-8", errors="replace"),
            "n_params": int(self.llama.llama_model_n_params(self.handle)),
            "size": int(self.llama.llama_model_size(self.handle)),
            "n_vocab": self.n_vocab,
            "n_nextn_layers": self.n_nextn_layers,
        }

    @property
    def n_vocab(self) -> int:
        return int(self.llama.llama_vocab_n_tokens(self.vocab))

    def tokenize(
        self, text: str, *, add_special: bool = True, parse_special: bool = False
    ) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 8
        for _ in range(2):
            buf = self.ffi.new("llama_token[]", capacity)
            n = int(
                self.llama.llama_tokenize(
                    self.vocab, data, len(data), buf, capacity, add_special, parse_special
                )
            )
            if n >= 0:
                return [int(buf[i]) for i in range(n)]
            capacity = -n
        raise LlamaRuntimeError("llama_tokenize failed")

    def token_bytes(self, token: int, *, special: bool = False) -> bytes:
        """The bytes of one token (pieces of a multi-byte character are partial UTF-8); a
        special token's text only with ``special`` (else none)."""
        capacity = 32
        for _ in range(2):
            buf = self.ffi.new("char[]", capacity)
            n = int(self.llama.llama_token_to_piece(self.vocab, token, buf, capacity, 0, special))
            if n >= 0:
                return bytes(self.ffi.buffer(buf, n))
            capacity = -n
        raise LlamaRuntimeError(f"llama_token_to_piece failed for token {token}")

    def detokenize(self, tokens: Sequence[int]) -> str:
        self.handle  # noqa: B018  (a closed model raises, with no tokens as well)
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", errors="replace")

    def is_end_of_generation(self, token: int) -> bool:
        return bool(self.llama.llama_vocab_is_eog(self.vocab, token))

    @property
    def chat_template(self) -> str | None:
        """The chat template of the model's GGUF metadata (``tokenizer.chat_template``), if any."""
        text = self.llama.llama_model_chat_template(self.handle, self.ffi.NULL)
        if text == self.ffi.NULL:
            return None
        return str(self.ffi.string(text).decode("utf-8", errors="replace"))

    def chat_templates(self, template: str | None = None) -> ChatTemplates:
        """This model's chat templates in llama.cpp's own chat layer (its Jinja engine, tools,
        reasoning, JSON schemas; see :class:`ChatTemplates`), or ``template`` (a Jinja text)
        instead; close the result (or use it in a ``with``) before the model."""
        templates = ChatTemplates(self.libs, self.handle, template)
        templates.native.depends_on(self.native)  # closed with the model, first
        return templates

    def apply_chat_template(
        self,
        messages: ChatMessages,
        *,
        template: str | None = None,
        add_generation_prompt: bool = True,
    ) -> str:
        """The prompt text for ``messages`` (``ChatMessage`` or ``{"role", "content"}`` mappings)
        in ``template`` (a template text or a name llama.cpp knows, such as ``"chatml"``;
        default: the model's own), with the assistant's turn opened when ``add_generation_prompt``.
        llama.cpp recognises the template among the ones it supports; it does not run Jinja."""
        self.handle  # noqa: B018  (a closed model raises)
        chosen = template if template is not None else self.chat_template
        if chosen is None:
            raise ChatTemplateError(
                "the model has no chat template (its GGUF metadata has no tokenizer.chat_template)"
                ": pass template=, a template text or a name such as 'chatml'"
            )
        keep: list[Any] = []
        chat = self.ffi.new("struct llama_chat_message[]", max(1, len(messages)))
        for i, message in enumerate(messages):
            role, content = role_content(message)
            keep += [
                self.ffi.new("char[]", role.encode()),
                self.ffi.new("char[]", content.encode()),
            ]
            chat[i].role, chat[i].content = keep[-2], keep[-1]
        tmpl = chosen.encode("utf-8")
        capacity = 2 * sum(len(c) for c in keep) + 256
        for _ in range(2):
            buf = self.ffi.new("char[]", capacity)
            n = int(
                self.llama.llama_chat_apply_template(
                    tmpl, chat, len(messages), add_generation_prompt, buf, capacity
                )
            )
            if n < 0:
                raise ChatTemplateError(
                    "llama.cpp does not support this chat template (it recognises the templates "
                    "of common model families, or names such as 'chatml')"
                )
            if n <= capacity:
                return bytes(self.ffi.buffer(buf, n)).decode("utf-8", errors="replace")
            capacity = n
        raise LlamaRuntimeError("llama_chat_apply_template failed")

    def close(self) -> None:
        """Close the contexts that use the model, then free it; a second call does nothing."""
        self._native.release()
        self._finalizer.detach()

    def __enter__(self) -> Model:
        self.handle  # noqa: B018  (a closed model raises)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
