"""A context's embeddings (:meth:`Context.embed`, :meth:`Context.embed_tokens`): the input
checked to fit one ``n_ubatch``, decoded alone in sequence 0 with every output on, and the
vectors llama.cpp returns read back, pooled or one per token. It takes the context's model and
session, never the :class:`Context`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._ffi import SYMBOL_ERRORS
from ..errors import LlamaRuntimeError, LlamaUnsupportedError
from ..outputs import normalized
from ..params import enum_name
from .llama_log import LLAMA_LOG
from .session import NativeSession, fill_batch

if TYPE_CHECKING:
    from .model import Model


def pooling_of(session: NativeSession) -> str:
    """How the context pools token vectors (llama.cpp's ``llama_pooling_type``, by name)."""
    value = int(session.llama.llama_pooling_type(session.handle))
    return enum_name(session.ffi, "llama_pooling_type", "LLAMA_POOLING_TYPE_", value)


def embed_pooled(
    model: Model, session: NativeSession, text: str | Sequence[int], normalize: bool
) -> list[float]:
    """The pooled embedding of ``text`` (a reranker's class scores with pooling ``rank``)."""
    tokens = _input(model, session, text)
    pooled = pooling_of(session)
    if pooled == "none":
        raise LlamaUnsupportedError(
            "this context's pooling is none (one vector per token): use embed_tokens(), or "
            "create the Context with pooling='mean' (or cls, last)"
        )
    _encode(session, tokens)
    llama = session.llama
    vector = llama.llama_get_embeddings_seq(session.handle, 0)
    if vector == session.ffi.NULL:
        raise LlamaRuntimeError("llama.cpp returned no pooled embedding")
    if pooled == "rank":  # a reranker: its class scores
        size = int(llama.llama_model_n_cls_out(model.handle))
    else:
        size = _n_embd(model)
    values = list(session.ffi.unpack(vector, size))
    return normalized(values) if normalize else values


def embed_each_token(
    model: Model, session: NativeSession, text: str | Sequence[int], normalize: bool
) -> list[list[float]]:
    """One embedding per token of ``text`` (pooling none)."""
    tokens = _input(model, session, text)
    pooled = pooling_of(session)
    if pooled != "none":
        raise LlamaUnsupportedError(
            f"this context pools token vectors ({pooled}): create the Context with "
            "pooling='none' for one vector per token"
        )
    _encode(session, tokens)
    size, found = _n_embd(model), []
    for row in range(len(tokens)):
        vector = session.llama.llama_get_embeddings_ith(session.handle, row)
        if vector == session.ffi.NULL:
            raise LlamaRuntimeError(f"llama.cpp returned no embedding for token {row}")
        values = list(session.ffi.unpack(vector, size))
        found.append(normalized(values) if normalize else values)
    return found


def _n_embd(model: Model) -> int:
    try:
        return int(model.llama.llama_model_n_embd_out(model.handle))
    except SYMBOL_ERRORS:  # releases before llama_model_n_embd_out
        return int(model.llama.llama_model_n_embd(model.handle))


def _input(model: Model, session: NativeSession, text: str | Sequence[int]) -> list[int]:
    tokens = model.tokenize(text) if isinstance(text, str) else [int(t) for t in text]
    if not tokens:
        raise ValueError("the input has no tokens")
    n_ubatch = int(session.llama.llama_n_ubatch(session.handle))
    if len(tokens) > n_ubatch:
        raise ValueError(
            f"the input ({len(tokens)} tokens) does not fit one batch of n_ubatch {n_ubatch}: "
            "create the Context with a larger n_batch and n_ubatch"
        )
    return tokens


def _encode(session: NativeSession, tokens: list[int]) -> None:
    """Every token of ``tokens`` through the model, alone in sequence 0, outputs on."""
    session.clear_all()
    llama = session.llama
    batch = llama.llama_batch_init(len(tokens), 0, 1)
    try:
        fill_batch(batch, tokens, 0, outputs="all")
        with LLAMA_LOG.capturing() as errors:
            status = int(llama.llama_decode(session.handle, batch))
        if status != 0:
            raise LlamaRuntimeError(
                f"llama_decode failed ({status}) on the input: {'; '.join(errors)}"
            )
    finally:
        llama.llama_batch_free(batch)
