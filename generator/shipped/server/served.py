"""The model a server serves: loaded once with its projector, LoRA adapters and draft model, one
context whose ``slots`` sequences are the server's :class:`~llama_bindings.runtime.Slots`, and,
made at the first ``/v1/embeddings`` request, a second context for embeddings (one request at a
time)."""

from __future__ import annotations

import threading
from contextlib import ExitStack
from typing import Any

from ..runtime import Context, Model, Slots, SpeculativeDecoding, SpeculativeMode, Strategy
from .config import ServerConfig, lora_of


def speculative_of(config: ServerConfig, draft: Model | None) -> SpeculativeDecoding:
    """``config.speculative`` as the runtime's options."""
    kinds = list(config.modes)
    options: dict[str, Any] = {}
    if config.draft_max is not None:
        options["draft_token_max"] = config.draft_max
    if draft is not None:
        options["draft_model"] = draft
    if kinds == [SpeculativeMode.NONE]:
        if options:
            raise ValueError("--draft-max and --draft-model need a --speculative mode")
        return SpeculativeDecoding()
    return SpeculativeDecoding(strategies=tuple(Strategy(kind) for kind in kinds), **options)


class ServedModel:
    """Everything a server holds native (see the module's text); :meth:`close` frees it all."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.template = config.template  # read once: a file that changes later is not read again
        self._stack = ExitStack()
        self._embedding_lock = threading.Lock()
        self._embedder: Context | None = None
        try:
            self._load(config)
        except BaseException:
            self._stack.close()
            raise

    def _load(self, config: ServerConfig) -> None:
        stack = self._stack
        mtp = SpeculativeMode.DRAFT_MTP in config.modes
        model_options: dict[str, Any] = {"load_mtp": mtp, "mmproj": config.mmproj}
        if not config.repack:
            model_options["use_extra_bufts"] = False
        self.model = stack.enter_context(Model(config.model, **model_options))
        draft = None
        if config.draft_model is not None:
            draft = stack.enter_context(Model(config.draft_model))
        context_options: dict[str, Any] = {
            "n_ctx": config.ctx_size * config.slots,
            "n_seq_max": config.slots,
            "kv_unified": None if config.deterministic else config.kv_unified,
            "deterministic": config.deterministic,
            "speculative": speculative_of(config, draft),
        }
        for setting, option in (
            ("threads", "n_threads"),
            ("batch_size", "n_batch"),
            ("ubatch_size", "n_ubatch"),
        ):
            if getattr(config, setting) is not None:
                context_options[option] = getattr(config, setting)
        self.context = stack.enter_context(Context(self.model, **context_options))
        if config.lora:
            adapters = {}
            for item in config.lora:
                path, scale = lora_of(item)
                adapters[stack.enter_context(self.model.load_lora(path))] = scale
            self.context.set_loras(adapters)
        self.slots: Slots = self.context.slots(max_waiting=config.max_waiting)
        stack.callback(self.slots.close)

    def embed(self, inputs: list[str] | list[list[int]]) -> tuple[list[list[float]], int]:
        """The pooled, normalised embedding of each input (one at a time, in a context of its
        own, made at the first call), and the tokens they came to."""
        with self._embedding_lock:
            if self._embedder is None:
                self._embedder = self._stack.enter_context(
                    Context(self.model, n_ctx=self.config.ctx_size, embeddings=True,
                            pooling="mean", n_batch=self.config.ctx_size)
                )  # fmt: skip
            embedder = self._embedder
            token_lists = [
                self.model.tokenize(item) if isinstance(item, str) else item for item in inputs
            ]
            vectors = [embedder.embed(tokens, normalize=True) for tokens in token_lists]
            return vectors, sum(len(tokens) for tokens in token_lists)

    def close(self, *, timeout: float | None = None) -> None:
        """Let running requests end (at most ``timeout`` seconds), then free everything."""
        self.slots.close(cancel=False, timeout=timeout)
        self._stack.close()  # the slots' close callback cancels what is left
