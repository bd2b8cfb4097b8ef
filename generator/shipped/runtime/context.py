"""A llama.cpp context on a model: :class:`Context`, the facade. It checks its options and creates
the context, its session and sidecar; each other job is a module's, on those parts, never on
the Context: the adapters in :mod:`.adapters`, saved state in :mod:`.state`, embeddings in
:mod:`.embeddings`, a generation's request in :mod:`.generation` and its decode loops in
:mod:`.decoding`."""

from __future__ import annotations

import os
from collections.abc import Generator, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, Unpack

from .._about import MTP_API
from ..constants import SpeculativeMode
from ..errors import LlamaLoadError, LlamaRuntimeError, LlamaUnsupportedError
from ..lifetimes import NativeObject
from ..params import (
    FLASH_ATTN_CHOICES,
    RopeScaling,
    apply_rope,
    check_count,
    check_flag,
    choose,
    default_threads,
    deterministic_layout,
    ggml_type,
    requested_settings,
    set_field,
)
from .adapters import (
    ContextAdapters,
    ControlVectorData,
    LoraAdapter,
)
from .chat_request import ChatOptions, ChatResult, ChatStream, render
from .embeddings import embed_each_token, embed_pooled, pooling_of
from .generation import GenerateOptions, Plan, plan_request
from .llama_log import LLAMA_LOG
from .model import Model
from .results import LOGGER, ChatMessages, GenerationResult, Stream, run_to_end
from .session import NativeSession
from .slots import Slots
from .speculative import Sidecar, SpeculativeDecoding, mtp_wrapper
from .state import load_context_state, save_context_state, state_identity

if TYPE_CHECKING:
    from ..api import LlamaLibrary, LlamaMtpLibrary
    from .media import MediaPrompt

__all__ = ["LOGGER", "Context"]


class Context:
    """A llama.cpp context on ``model``: one sequence per generation, or ``n_seq_max`` together
    (:meth:`generate_batch`).

    ``speculative``: :class:`SpeculativeDecoding` (default: none). With draft-mtp the model must
    have NextN layers and be loaded with ``load_mtp=True``, the libraries must include the
    ``llama_mtp`` wrapper.

    llama.cpp's parameters (None keeps llama.cpp's own default; :attr:`settings` shows the
    values the context has). Four defaults are this runtime's, not llama.cpp's: ``n_ctx`` 2048
    (llama.cpp: 512; 0: the model's training context), ``n_batch`` 512 (llama.cpp: 2048; the
    logical batch), ``n_ubatch`` = ``n_batch`` (the physical batch), ``n_threads`` (generation)
    and ``n_threads_batch`` (prompts and drafts; default: ``n_threads``) the CPU count, at most 4
    (llama.cpp: 4, more threads than cores on a smaller machine). ``flash_attn`` (``"auto"``,
    ``"on"``, ``"off"``), ``type_k``/``type_v`` (KV
    cache element types by ggml name: ``"f16"``, ``"q8_0"``, ``"q4_0"``, ...; a quantised V
    cache needs flash attention), ``swa_full`` (a full-size cache for sliding-window attention
    layers), ``kv_unified`` (one KV buffer shared by every sequence instead of one per sequence;
    a saved state loads only into a context with the same layout), ``offload_kqv`` (the KV cache
    and its attention on the GPU), ``op_offload`` (host
    tensor operations offloaded), ``rope`` (:class:`RopeScaling` overrides). A context llama.cpp
    cannot create raises :class:`LlamaLoadError` with llama.cpp's error lines.

    ``deterministic=True``: a greedy generation gives the same tokens whatever the other
    sequences of the context run beside it (``n_ubatch`` 1: each token's logits computed alone;
    one KV buffer per sequence: its attention sums over its own cells in the same order). It
    sets both (``n_ubatch`` other than 1 or ``kv_unified=True`` with it: ValueError); measured on
    CPU, where prompts then decode one token per pass.

    Closing the context (or its model) frees it; every method and property then raises
    :class:`LlamaClosedError`, and an open :class:`Stream` of it raises at its next step.
    """

    def __init__(
        self,
        model: Model,
        *,
        n_ctx: int = 2048,
        n_batch: int = 512,
        n_ubatch: int | None = None,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        n_seq_max: int = 1,
        flash_attn: str | None = None,
        type_k: str | None = None,
        type_v: str | None = None,
        swa_full: bool | None = None,
        kv_unified: bool | None = None,
        offload_kqv: bool | None = None,
        op_offload: bool | None = None,
        rope: RopeScaling | None = None,
        embeddings: bool = False,
        pooling: str | None = None,
        speculative: SpeculativeDecoding | None = None,
        deterministic: bool = False,
    ) -> None:
        model.require_weights("a Context")
        n_ubatch, kv_unified = deterministic_layout(deterministic, n_ubatch, kv_unified)
        self.model, self.deterministic = model, deterministic
        self.speculative = speculative if speculative is not None else SpeculativeDecoding()
        self.ffi: Any = model.ffi
        self.llama: LlamaLibrary = model.llama
        self._mtp_lib: LlamaMtpLibrary | None = None
        self._busy, self._embeddings = False, embeddings
        check_flag(embeddings, "embeddings")
        if pooling is not None and not embeddings:
            raise ValueError("pooling= is for embeddings: pass embeddings=True with it")
        if embeddings and self.speculative.enabled:
            raise LlamaUnsupportedError("an embeddings context does not generate: no speculative=")
        counts = {"n_batch": n_batch, "n_ubatch": n_ubatch, "n_threads": n_threads}
        counts.update(n_threads_batch=n_threads_batch, n_seq_max=n_seq_max)
        check_count(n_ctx, "n_ctx", 0)
        for name, count in counts.items():
            check_count(count, name, 1)
        flags = {"swa_full": swa_full, "kv_unified": kv_unified}
        flags.update(offload_kqv=offload_kqv, op_offload=op_offload)
        for name, flag in flags.items():
            check_flag(flag, name)
        if rope is not None and not isinstance(rope, RopeScaling):
            raise TypeError(f"rope must be a RopeScaling, not {type(rope).__name__}")
        if self.speculative.enabled:
            self._mtp_lib = self._check_mtp_supported(model)
        params = self.llama.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_seq_max = n_ctx, n_batch, n_seq_max
        params.n_ubatch = n_ubatch if n_ubatch is not None else n_batch
        threads = n_threads if n_threads is not None else default_threads()
        params.n_threads = threads
        params.n_threads_batch = n_threads_batch if n_threads_batch is not None else threads
        self._set_options(params, flash_attn, {"type_k": type_k, "type_v": type_v}, flags)
        if rope is not None:
            apply_rope(self.ffi, params, rope)
        if embeddings:
            params.embeddings = True
        if pooling is not None:
            params.pooling_type = choose(
                self.ffi, "llama_pooling_type", "LLAMA_POOLING_TYPE_", "pooling", pooling
            )
        if MTP_API and self._mtp_lib is not None:
            # rollback snapshots for recurrent layers, and room to verify a whole draft
            params.n_rs_seq = self.speculative.draft_token_max
        self._requested = requested_settings(self.ffi, params)
        self._native = self._create(model, params)
        self._finalizer = self._native.finalize_with(self)
        self._sidecar: Sidecar | None = None
        if self._mtp_lib is not None:
            try:
                self._sidecar = Sidecar(
                    self._mtp_lib, self.ffi, self._native, self.speculative, n_seq_max
                )
            except BaseException:
                self.close()
                raise
        self._session = NativeSession(model, self._native, params)

    def _set_options(
        self,
        params: Any,
        flash_attn: str | None,
        kv_types: dict[str, str | None],
        flags: dict[str, bool | None],
    ) -> None:
        struct, ffi = "llama_context_params", self.ffi
        if flash_attn is not None:
            if not isinstance(flash_attn, str) or flash_attn not in FLASH_ATTN_CHOICES:
                names = ", ".join(FLASH_ATTN_CHOICES)
                raise ValueError(f"flash_attn must be one of {names}; not {flash_attn!r}")
            value = choose(
                ffi, "llama_flash_attn_type", "LLAMA_FLASH_ATTN_TYPE_", "flash_attn",
                FLASH_ATTN_CHOICES[flash_attn],
            )  # fmt: skip
            set_field(ffi, params, struct, "flash_attn_type", value, "flash_attn")
        for name, kv_type in kv_types.items():
            if kv_type is not None:
                set_field(ffi, params, struct, name, ggml_type(ffi, name, kv_type), name)
        for name, flag in flags.items():
            if flag is not None:
                set_field(ffi, params, struct, name, flag, name)

    def _create(self, model: Model, params: Any) -> NativeObject:
        """The llama.cpp context, registered to close before the model (and the draft model)."""
        draft = self.speculative.draft_model
        with LLAMA_LOG.capturing() as errors:
            ctx = self.llama.llama_init_from_model(model.handle, params)
        if ctx == self.ffi.NULL:
            raise LlamaLoadError("llama.cpp could not create the context", "; ".join(errors))
        native = NativeObject("context", ctx, self.llama.llama_free, self.ffi.NULL)
        native.depends_on(model.native)
        if draft is not None:
            native.depends_on(draft.native)
        return native

    @property
    def settings(self) -> dict[str, object]:
        """The llama.cpp parameters of this context: the counts as llama.cpp reports them (after
        its own adjustments, such as n_ctx rounded up), the rest as requested, llama.cpp's
        defaults included (``flash_attn_type`` ``auto`` is resolved by llama.cpp at creation:
        its log says how)."""
        handle, llama = self.handle, self.llama
        found: dict[str, object] = {
            "n_ctx": int(llama.llama_n_ctx(handle)),
            "n_batch": int(llama.llama_n_batch(handle)),
            "n_ubatch": int(llama.llama_n_ubatch(handle)),
            "n_seq_max": int(llama.llama_n_seq_max(handle)),
            "n_threads": int(llama.llama_n_threads(handle)),
            "n_threads_batch": int(llama.llama_n_threads_batch(handle)),
        }
        return {**self._requested, **found}

    def _check_mtp_supported(self, model: Model) -> LlamaMtpLibrary:
        if self.speculative.draft_model is not None:
            self.speculative.draft_model.require_weights("a draft model")
        kinds = self.speculative.kinds
        what = ", ".join(k.value for k in kinds)
        wrapper = mtp_wrapper(model.libs, what, kinds != (SpeculativeMode.DRAFT_MTP,))
        if SpeculativeMode.DRAFT_MTP not in kinds:
            return wrapper
        if model.n_nextn_layers <= 0:
            raise LlamaUnsupportedError(
                "the model has no NextN (MTP) layers: speculative mode draft-mtp needs a model "
                "with an MTP head"
            )
        if not model.load_mtp:
            raise LlamaUnsupportedError(
                "the model was loaded without its MTP layers: load it with Model(..., "
                "load_mtp=True) for speculative mode draft-mtp"
            )
        return wrapper

    @property
    def handle(self) -> Any:
        """The ``llama_context *``; :class:`LlamaClosedError` once the context is closed."""
        return self._native.pointer

    @property
    def closed(self) -> bool:
        return not self._native.alive

    @property
    def mtp_enabled(self) -> bool:
        self.handle  # noqa: B018  (a closed context raises)
        return self._mtp_lib is not None

    @property
    def n_ctx(self) -> int:
        return int(self.llama.llama_n_ctx(self.handle))

    # ---- LoRA adapters and control vectors (see .adapters) ----------------------------------

    @cached_property
    def _adapters(self) -> ContextAdapters:
        """What the context has set (made at the first use)."""
        sidecar, null = self._sidecar, self.ffi.NULL  # callables that do not hold the Context
        draft = sidecar.live_draft_context if sidecar is not None else lambda: null
        return ContextAdapters(self.model, self._native, self._session.forget_held, draft)

    @property
    def loras(self) -> dict[LoraAdapter, float]:
        """The LoRA adapters set on the context, with their scales."""
        self.handle  # noqa: B018  (a closed context raises)
        return dict(self._adapters.loras)

    def set_loras(self, loras: Mapping[LoraAdapter, float]) -> None:
        """Set exactly these LoRA adapters (:meth:`Model.load_lora`, of this context's model)
        with their scales (``{}``: none), for the generations that follow
        (``llama_set_adapters_lora``; llama.cpp scales an adapter's product by ``scale * alpha
        / rank``, by ``scale`` alone without ``adapter.lora.alpha``). A change forgets what
        the context holds, so prefix reuse never keeps a prefix computed under other adapters
        or scales; setting what is set already changes nothing.

        With draft-mtp the adapters are set on the sidecar's MTP context too (it runs on the
        same model's weights); a draft model's context (draft-simple) runs without them, and
        the n-gram strategies have no context: drafts may then be accepted less often, output
        stays the target's, which verifies every draft with the adapters. Not while a stream of
        the context is open.

        An activated LoRA (aLoRA: one whose GGUF names invocation tokens,
        :attr:`LoraAdapter.invocation_tokens`) applies as llama.cpp's server applies it: from one
        position before the last occurrence of its invocation tokens in the prompt (the tokens
        before that are computed without it, so prefix reuse keeps them across generations
        with and without it), and not at all in a generation whose prompt lacks them. One aLoRA
        at a time; ``generate_batch`` refuses one."""
        self.handle  # noqa: B018  (a closed context raises)
        if self._busy:
            raise LlamaRuntimeError("the context is generating (a stream is open)")
        self._adapters.set_loras(loras, self.model)

    def set_control_vector(
        self,
        vector: ControlVectorData,
        *,
        layer_start: int | None = None,
        layer_end: int | None = None,
        scale: float = 1.0,
    ) -> None:
        """Add a control vector to the output of layers ``layer_start`` .. ``layer_end``
        (inclusive; default 1 and the last layer) of the target (``llama_set_adapter_cvec``).
        ``vector``: a GGUF control-vector file (tensors ``direction.<layer>``, as llama.cpp's
        tools read them), ``n_embd`` floats per layer from layer 1 in one flat sequence or one
        row per layer, or ``{layer: floats}``; layers 1 .. ``n_layer - 1`` (none for layer
        0), those not given are zero. Each value is multiplied by ``scale``. It replaces the
        one set before; a change forgets what the context holds (as :meth:`set_loras`).
        The speculative sidecar's context runs without it (the target verifies every draft)."""
        self.handle  # noqa: B018  (a closed context raises)
        adapters = self._adapters
        layers, start, end = adapters.check_control_vector(vector, layer_start, layer_end, scale)
        if self._busy:
            raise LlamaRuntimeError("the context is generating (a stream is open)")
        adapters.set_control_vector(layers, start, end)

    def clear_control_vector(self) -> None:
        """Remove the control vector (nothing to do when none is set)."""
        self.handle  # noqa: B018  (a closed context raises)
        if self._busy:
            raise LlamaRuntimeError("the context is generating (a stream is open)")
        self._adapters.clear_control_vector()

    def save_state(self, seq: int | None = None) -> bytes:
        """The context's state as a versioned container (:mod:`.state`): the tokens its memory
        holds, the target's llama.cpp state (KV cache, recurrent state, outputs) and, with
        speculative decoding, the sidecar's draft or MTP context state, named with the
        llama.cpp release, the model and the speculative setup they were saved with. ``seq``:
        only that sequence (``llama_state_seq_get_data``), for :meth:`load_state` into any
        sequence of a context on the same model, release and speculative setup."""
        self._check_state_call(seq)
        return save_context_state(self._session, self._sidecar, self._identity(), seq)

    def load_state(
        self, state: bytes, tokens: Sequence[int] | None = None, *, seq: int | None = None
    ) -> None:
        """Restore a state from :meth:`save_state` (saved with the same llama.cpp release,
        model and speculative setup, else :class:`LlamaStateError` naming the difference; a
        truncated or altered state raises it too); the next generation reuses what it holds.
        A one-sequence state loads into sequence ``seq`` (default 0), replacing what that
        sequence holds and nothing else. A raw ``llama_state_get_data`` image (or, with ``seq``,
        a ``llama_state_seq_get_data`` one; no speculative decoding) needs ``tokens``, the tokens
        it holds (of sequence 0 for a whole-context image)."""
        self._check_state_call(seq)
        load_context_state(self._session, self._sidecar, self._identity(), state, tokens, seq)

    def _check_state_call(self, seq: int | None) -> None:
        self.handle  # noqa: B018  (a closed context raises)
        if self._busy:
            raise LlamaRuntimeError("the context is generating (a stream is open): no state now")
        n_seq = len(self._session.sequences)
        if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int)):
            raise TypeError(f"seq must be an int, not {type(seq).__name__}")
        if seq is not None and not 0 <= seq < n_seq:
            raise ValueError(f"seq {seq} is not a sequence of this context (n_seq_max {n_seq})")

    def save_state_file(self, path: str | os.PathLike[str]) -> None:
        """:meth:`save_state` into a file (written beside it, then renamed into place)."""
        target = os.fspath(path)
        partial = f"{target}.partial"
        with open(partial, "wb") as out:
            out.write(self.save_state())
        os.replace(partial, target)

    def load_state_file(self, path: str | os.PathLike[str]) -> None:
        """:meth:`load_state` from a file written by :meth:`save_state_file`."""
        with open(path, "rb") as src:
            self.load_state(src.read())

    def _used_adapters(self) -> ContextAdapters | None:
        """What the context has set, once adapters were used (None before: nothing is made)."""
        found: ContextAdapters | None = self.__dict__.get("_adapters")
        return found

    def _identity(self) -> dict[str, Any]:
        return state_identity(self.model, self.speculative, self._used_adapters())

    @property
    def pooling(self) -> str:
        """How :meth:`embed` pools token vectors: ``none`` (then :meth:`embed_tokens`), ``mean``,
        ``cls``, ``last`` or ``rank`` (a reranker's scores): the ``pooling=`` given, else the
        model's own (llama.cpp's ``llama_pooling_type``)."""
        return pooling_of(self._session)

    def embed(self, text: str | Sequence[int], *, normalize: bool = False) -> list[float]:
        """The pooled embedding of ``text`` (text or token ids), Euclidean-normalised when
        ``normalize``. The context must have ``embeddings=True`` and a pooling other than none;
        the input must fit one ``n_ubatch``."""
        self._check_embeddings()
        return embed_pooled(self.model, self._session, text, normalize)

    def embed_tokens(
        self, text: str | Sequence[int], *, normalize: bool = False
    ) -> list[list[float]]:
        """One embedding per token of ``text`` (pooling none), each Euclidean-normalised when
        ``normalize``."""
        self._check_embeddings()
        return embed_each_token(self.model, self._session, text, normalize)

    def _check_embeddings(self) -> None:
        if not self._embeddings:
            raise LlamaUnsupportedError(
                "this context was created without embeddings: create one with "
                "Context(model, embeddings=True)"
            )
        if self._busy:
            raise LlamaRuntimeError("the context is generating already (a stream is open)")

    def generate(
        self, prompt: str | Sequence[int] | MediaPrompt, **options: Unpack[GenerateOptions]
    ) -> GenerationResult:
        """Generate up to ``max_tokens`` tokens after ``prompt`` (text or token ids; text with
        ``media``: see below; or a :class:`MediaPrompt` the model's projector made).

        ``on_token(token, piece)`` is called for every accepted token in order; ``piece`` is the
        text that token releases: UTF-8 is decoded across tokens (a character split over tokens
        comes whole, with the token that completes it) and text that could begin a ``stop``
        sequence is held back until it cannot; text still held when the generation ends after its
        last token comes in one more call with token :data:`TAIL_TOKEN`. Joined, the pieces are
        ``result.text``. ``stop``: a stop sequence (text) or a sequence of them; anything else is
        a ``TypeError``. ``sampling``: a :class:`Sampling`
        (default: greedy); ``temperature``, ``top_k`` and ``seed`` are shorthands for its fields
        (not with ``sampling``). ``sampler``: a caller's own ``llama_sampler`` chain instead, used
        as it is (not reset, not freed; it must select a token, e.g. end with greedy or dist).
        ``grammar``: a GBNF grammar (root rule ``root``). ``reuse_prefix`` (default
        True): keep the longest common prefix of what the context holds and this prompt, and
        decode only the rest, with every speculative mode too (see :class:`PromptReuse`; False
        clears the context first). ``logprobs``: the log-probability of each token and of the
        ``logprobs`` most likely ones (with speculative decoding too: from the rows the target
        verified the draft with). ``cancel``: a :class:`Cancellation`. ``media``: images (or
        audio) for a text prompt that holds the projector's marker (``<__media__>``) once per
        item, in order; paths or the files' bytes, tokenized by the model's :class:`Projector`
        (``Model(..., mmproj=...)``); the prompt must end with text. A media item takes as many
        positions in the context as libmtmd gives it and is kept with the prefix like tokens
        (an unchanged image is not encoded again); every speculative mode runs after it, where
        the release's speculative decoding takes media rows (else
        :class:`LlamaUnsupportedError`).
        """
        return run_to_end(self._steps(self._plan(prompt, options)))

    def generate_batch(
        self, prompts: Sequence[str | Sequence[int]], **options: Unpack[GenerateOptions]
    ) -> list[GenerationResult]:
        """Generate after each of ``prompts`` (text or token ids) as independent sequences of
        this context, together: after the prompts, each step decodes one batch holding the next
        token of every sequence still going. Options as :meth:`generate`'s, for every sequence
        (each gets its own sampler chain from the same :class:`Sampling`, so the same seed), but
        not ``on_token`` or ``sampler``. Needs ``n_seq_max`` >= the number of prompts; prompt
        ``i`` goes to sequence ``i``, which keeps what it holds afterwards, so that the next
        batch (or :meth:`save_state` with ``seq=i``) continues from it: with ``reuse_prefix`` (the
        default) each sequence keeps its common prefix with its new prompt. With speculative
        decoding one sidecar serves every sequence: each step drafts and verifies one sequence
        (``llama_mtp_step``), the sequences in turn, and each result's metrics count that
        sequence's drafts alone."""
        if isinstance(prompts, str) or not prompts:
            raise TypeError("prompts must be a non-empty sequence of prompts (text or token ids)")
        refused = sorted({"on_token", "sampler", "media"} & set(options))
        if refused:
            raise TypeError(f"generate_batch does not take {', '.join(refused)}")
        n_seq_max = int(self.llama.llama_n_seq_max(self.handle))
        if len(prompts) > n_seq_max:
            raise ValueError(
                f"{len(prompts)} prompts need n_seq_max >= {len(prompts)}: this context has "
                f"{n_seq_max} (Context(..., n_seq_max=N))"
            )
        plans = [self._plan(prompt, options) for prompt in prompts]
        if any(plan.alora is not None for plan in plans):
            raise LlamaUnsupportedError(
                "generate_batch does not run aLoRAs yet (each sequence would need its own "
                "boundary): generate each prompt with generate()"
            )
        from .decoding import run_batch  # see _steps

        self._busy = True
        try:
            return run_batch(self.model, self.n_ctx, self._session, self._sidecar, plans)
        finally:
            self._busy = False

    def stream(
        self, prompt: str | Sequence[int] | MediaPrompt, **options: Unpack[GenerateOptions]
    ) -> Stream:
        """:meth:`generate` as an iterator of text pieces (the same pieces ``on_token`` gets,
        without the empty ones); the :class:`Stream`'s ``result`` is set at its end. Arguments
        are checked here; the context generates as the stream is read."""
        return Stream(self._steps(self._plan(prompt, options)))

    def chat(self, messages: ChatMessages, **options: Unpack[ChatOptions]) -> ChatResult:
        """:meth:`generate` the assistant's reply to ``messages`` (OpenAI-style mappings, with
        image and audio parts for the projector, an assistant's ``tool_calls``, tool replies;
        or :class:`ChatMessage`), rendered and parsed by llama.cpp's own chat layer (the model's
        Jinja template, or ``template=`` as Jinja text) as llama.cpp's server of the same release
        does; ``template=`` a name such as ``"chatml"`` (or libraries without the layer):
        ``llama_chat_apply_template``, which runs no Jinja. ``result.renderer`` says which ran.
        Options: :meth:`generate`'s (not ``media``) and :class:`ChatOptions`' (``tools``,
        ``tool_choice``, ``response_format``, ``reasoning``, ...); tool calls and JSON answers
        are constrained by the layer's grammar, with every speculative mode. The
        :class:`ChatResult` has the raw ``text`` and the reply parsed from it: ``content``,
        ``reasoning_content``, ``tool_calls``."""
        request = render(self.model, self._sidecar, messages, options)
        try:
            plan = request.plan(self._plan(request.prompt, request.options))
            return request.result(run_to_end(self._steps(plan)))
        finally:
            request.close()

    def stream_chat(self, messages: ChatMessages, **options: Unpack[ChatOptions]) -> ChatStream:
        """:meth:`chat` as a :class:`ChatStream` of :class:`ChatDelta` s: what each step adds to
        the content, the reasoning and the tool calls' arguments (as OpenAI's streams give
        them); its ``result`` is the :class:`ChatResult`. Arguments are checked here."""
        request = render(self.model, self._sidecar, messages, options)
        try:
            plan = request.plan(self._plan(request.prompt, request.options))
        except BaseException:
            request.close()
            raise
        return ChatStream(self._steps(plan), request)

    def slots(self, *, max_waiting: int = 64) -> Slots:
        """This context's ``n_seq_max`` sequences as :class:`Slots` that many threads submit
        requests to at once (continuous batching; each slot keeps its prefix, and speculates on
        its own with this context's speculative decoding); the context is busy with them until
        they are closed. ``max_waiting``: requests that may wait for a slot."""
        if self._busy:
            raise LlamaRuntimeError("the context is generating already (a stream is open)")
        self._busy = True
        try:
            return Slots(
                self.model, self.n_ctx, self._session, self._sidecar, self._plan_free,
                self._set_free, self._identity, max_waiting=max_waiting,
            )  # fmt: skip
        except BaseException:
            self._busy = False
            raise

    def _plan_free(
        self, prompt: str | Sequence[int] | MediaPrompt, options: GenerateOptions
    ) -> Plan:
        """:meth:`_plan` whether or not the context is busy (its slots hold it busy)."""
        if self._embeddings:
            raise LlamaUnsupportedError(
                "this context was created with embeddings=True, for embed(): create another "
                "Context on the model to generate"
            )
        adapters = self._used_adapters()
        return plan_request(self.model, self._session, self._sidecar, adapters, prompt, options)

    def _set_free(self) -> None:
        self._busy = False

    def _plan(self, prompt: str | Sequence[int] | MediaPrompt, options: GenerateOptions) -> Plan:
        """Everything checked before anything reaches llama.cpp (see :func:`plan_request`)."""
        plan = self._plan_free(prompt, options)
        if self._busy:
            raise LlamaRuntimeError("the context is generating already (a stream is open)")
        return plan

    def _steps(self, plan: Plan) -> Generator[str, None, GenerationResult]:
        """The generation: yields released text after every step, returns the result."""
        if self._busy:  # a stream made earlier may have started since this one was checked
            raise LlamaRuntimeError("the context is generating already (a stream is open)")
        # the decode loops load with the first generation, not with the runtime: import time
        # saved, measured (-X importtime, compiled, 5 runs): about 0.3 to 0.6 ms
        from .decoding import run_steps

        self._busy = True
        try:
            steps = run_steps(self.model, self.n_ctx, self._session, self._sidecar, plan)
            return (yield from steps)
        finally:
            self._busy = False

    def close(self) -> None:
        """Free the context (and its speculative sidecar); a second call does nothing."""
        self._native.release()
        self._finalizer.detach()

    def __enter__(self) -> Context:
        self.handle  # noqa: B018  (a closed context raises)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
