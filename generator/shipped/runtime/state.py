"""A context's or one sequence's saved state (:meth:`Context.save_state`): a versioned container
holding what the memory holds (the tokens of each sequence), the target context's llama.cpp
state, the speculative sidecar's draft or MTP context state, and what it was saved with (the
llama.cpp release, the model, the speculative setup), so that loading it elsewhere is refused
with the difference named instead of continuing from a state that does not fit.

Layout: ``LLBSTATE``, the format number and the header's length (little-endian ``uint32``), the
header (JSON: identity, scope, each sequence's token count, part sizes, the payload's SHA-256,
and where a sequence holds media, ``media``: each item's first index, positions and extra cells),
then the payload: the tokens (``int32``, sequence after sequence), the target's state, the draft
context's. The scope is ``context`` (every sequence, ``llama_state_get_data``) or ``sequence``
(one, ``llama_state_seq_get_data``: it loads into any sequence). The n-gram strategies' state is
not in it: they start again from the whole prompt at the next generation, as after any prompt.

:func:`save_context_state` and :func:`load_context_state` are what :meth:`Context.save_state` and
:meth:`Context.load_state` do with a context's session and sidecar."""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from .._about import LLAMA_CPP_COMMIT, LLAMA_CPP_RELEASE
from ..errors import LlamaStateError
from .llama_log import LLAMA_LOG

if TYPE_CHECKING:
    from .adapters import ContextAdapters
    from .model import Model
    from .session import NativeSession
    from .speculative import Sidecar, SpeculativeDecoding

MAGIC: Final = b"LLBSTATE"
FORMAT: Final = 1
_HEAD: Final = struct.Struct("<8sII")  # magic, format, header length
# what a state must have been saved with to load here, in the order a difference is reported
IDENTITY_KEYS: Final = ("llama_cpp", "model", "speculative", "adapters")
# the adapters of a context without any (also what a state saved before they were recorded had)
NO_ADAPTERS: Final[dict[str, Any]] = {"loras": [], "control": None}
# how the context that saved it keeps its KV cache (see Context.load_state)
LAYOUT_KEYS: Final = ("kv_streams",)
SCOPES: Final = ("context", "sequence")


def is_saved_state(data: bytes) -> bool:
    """Whether ``data`` is this container (else, a raw ``llama_state_get_data`` image)."""
    return data[: len(MAGIC)] == MAGIC


# a media item a sequence holds: (first index, positions it advances, cells beyond them)
Span = tuple[int, int, int]


@dataclass(frozen=True)
class SavedState:
    identity: dict[str, Any]
    scope: str  # one of SCOPES
    held: list[list[int]]  # the tokens of each sequence (one list for scope "sequence")
    target: bytes
    draft: bytes
    media: list[list[Span]] = field(default_factory=list)  # each sequence's; [] when none

    def to_bytes(self) -> bytes:
        tokens = [t for seq in self.held for t in seq]
        payload = struct.pack(f"<{len(tokens)}i", *tokens) + self.target + self.draft
        header = {
            **self.identity,
            "scope": self.scope,
            "held": [len(seq) for seq in self.held],
            "n_tokens": len(tokens),
            "target_bytes": len(self.target),
            "draft_bytes": len(self.draft),
            "sha256": hashlib.sha256(payload).hexdigest(),
        }
        if any(self.media):
            header["media"] = [[list(span) for span in spans] for spans in self.media]
        text = json.dumps(header, sort_keys=True).encode("utf-8")
        return _HEAD.pack(MAGIC, FORMAT, len(text)) + text + payload

    @classmethod
    def from_bytes(cls, data: bytes) -> SavedState:
        """The container in ``data``; :class:`LlamaStateError` for anything else."""
        if len(data) < _HEAD.size or not is_saved_state(data):
            raise LlamaStateError("not a saved state of llama_bindings (no LLBSTATE header)")
        _, version, n_header = _HEAD.unpack_from(data)
        if version != FORMAT:
            raise LlamaStateError(f"saved state format {version}; this runtime reads {FORMAT}")
        header = _header(data[_HEAD.size : _HEAD.size + n_header])
        payload = data[_HEAD.size + n_header :]
        n_tokens, n_target, n_draft = _sizes(header)
        scope = header.get("scope")
        if scope not in SCOPES:
            raise LlamaStateError(f"the saved state's scope {scope!r} is none of {SCOPES}")
        counts = _counts(header.get("held"), n_tokens, 1 if scope == "sequence" else None)
        if len(payload) != 4 * n_tokens + n_target + n_draft:
            raise LlamaStateError(
                f"the saved state is truncated or padded: {len(payload)} payload bytes, its header "
                f"says {4 * n_tokens + n_target + n_draft}"
            )
        if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
            raise LlamaStateError("the saved state was altered: its payload's SHA-256 differs")
        tokens = list(struct.unpack_from(f"<{n_tokens}i", payload))
        held, begin = [], 0
        for count in counts:
            held.append(tokens[begin : begin + count])
            begin += count
        target = payload[4 * n_tokens : 4 * n_tokens + n_target]
        draft = payload[len(payload) - n_draft :] if n_draft else b""
        identity = {key: header.get(key) for key in (*IDENTITY_KEYS, *LAYOUT_KEYS)}
        return cls(identity, scope, held, target, draft, _media(header.get("media"), held))

    def check_fits(self, current: dict[str, Any]) -> None:
        """:class:`LlamaStateError` naming the first difference from ``current``."""
        for key in IDENTITY_KEYS:
            saved = self.identity.get(key)
            if key == "adapters" and saved is None:
                saved = NO_ADAPTERS
            if saved != current[key]:
                what = "LoRA adapters or control vector" if key == "adapters" else key
                raise LlamaStateError(
                    f"the state was saved with another {what.replace('_', '.')}: "
                    f"{saved!r}; this context has {current[key]!r}"
                )


def _header(text: bytes) -> dict[str, Any]:
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LlamaStateError(f"the saved state's header is not readable: {exc}") from None
    if not isinstance(header, dict):
        raise LlamaStateError("the saved state's header is not an object")
    return header


def _count(n: object) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0


def _counts(counts: object, total: int, n_seq: int | None) -> list[int]:
    """Each sequence's token count (``n_seq`` of them when given), adding up to ``total``."""
    if (
        not isinstance(counts, list)
        or not counts
        or not all(_count(n) for n in counts)
        or sum(counts) != total
        or (n_seq is not None and len(counts) != n_seq)
    ):
        raise LlamaStateError(f"the saved state's token counts {counts!r} do not add up")
    return counts


def _media(media: object, held: list[list[int]]) -> list[list[Span]]:
    """Each sequence's media items (none when the header has no ``media``): each a run of
    placeholders (negative values) inside what the sequence holds."""
    if media is None:
        return [[] for _ in held]
    if not isinstance(media, list) or len(media) != len(held):
        raise LlamaStateError("the saved state's media do not match its sequences")
    found: list[list[Span]] = []
    for spans, tokens in zip(media, held, strict=True):
        if not isinstance(spans, list):
            raise LlamaStateError("the saved state's media do not match its sequences")
        checked: list[Span] = []
        for span in spans:
            if not (isinstance(span, list) and len(span) == 3 and all(_count(n) for n in span)):
                raise LlamaStateError(f"the saved state's media item {span!r} is not readable")
            start, n_pos, extra = span
            inside = tokens[start : start + n_pos]
            if n_pos < 1 or len(inside) != n_pos or any(t >= 0 for t in inside):
                raise LlamaStateError(
                    f"the saved state's media item {span!r} is not where its sequence holds media"
                )
            checked.append((start, n_pos, extra))
        found.append(checked)
    return found


def _sizes(header: dict[str, Any]) -> tuple[int, int, int]:
    sizes = tuple(header.get(k) for k in ("n_tokens", "target_bytes", "draft_bytes"))
    if not all(_count(n) for n in sizes):
        raise LlamaStateError(f"the saved state's header has no valid part sizes: {sizes}")
    return sizes  # type: ignore[return-value]


def state_identity(
    model: Model, speculative: SpeculativeDecoding, adapters: ContextAdapters | None
) -> dict[str, Any]:
    """What a context's state is saved with, and must fit to load (``adapters``: what the
    context has set, None before it set any)."""
    return {
        "llama_cpp": {"release": LLAMA_CPP_RELEASE, "commit": LLAMA_CPP_COMMIT},
        "model": model.identity,
        "speculative": speculative.describe(),
        "adapters": adapters.describe() if adapters is not None else NO_ADAPTERS,
    }


def save_context_state(
    session: NativeSession, sidecar: Sidecar | None, identity: dict[str, Any], seq: int | None
) -> bytes:
    """The state of a context's every sequence (``seq`` None) or of sequence ``seq``, with its
    sidecar's draft context state, as a :class:`SavedState`'s bytes."""
    null = session.ffi.NULL
    draft = sidecar.draft_context() if sidecar is not None else null
    if seq is None:
        held = [list(s.tokens) for s in session.sequences]
        while len(held) > 1 and not held[-1]:
            held.pop()
        target = session.full_state(session.handle)
        drafted = session.full_state(draft) if draft != null else b""
    else:
        held = [list(session.sequences[seq].tokens)]
        target = session.seq_state(session.handle, seq)
        drafted = session.seq_state(draft, seq) if draft != null else b""
    scope = "context" if seq is None else "sequence"
    identity = {**identity, "kv_streams": session.kv_streams}
    scoped = session.sequences[: len(held)] if seq is None else [session.sequences[seq]]
    media = [list(s.spans) for s in scoped]
    return SavedState(identity, scope, held, target, drafted, media).to_bytes()


def load_context_state(
    session: NativeSession,
    sidecar: Sidecar | None,
    identity: dict[str, Any],
    state: bytes,
    tokens: Sequence[int] | None,
    seq: int | None,
) -> None:
    """``state`` (a :class:`SavedState`'s bytes, or a raw llama.cpp image of ``tokens``) checked
    against the context's ``identity`` and layout, and loaded (see :meth:`Context.load_state`)."""
    if not is_saved_state(state):
        if sidecar is not None or tokens is None:
            raise LlamaStateError(
                "not a saved state of llama_bindings (save it with Context.save_state); a raw "
                "llama.cpp state loads only without speculative decoding, with tokens="
            )
        scope = "context" if seq is None else "sequence"
        _restore(session, sidecar, SavedState({}, scope, [list(tokens)], state, b""), seq)
        return
    saved = SavedState.from_bytes(state)
    saved.check_fits(identity)
    streams, here = saved.identity.get("kv_streams"), session.kv_streams
    if streams is not None and here is not None and streams != here:
        raise LlamaStateError(
            f"the state was saved from a context with {streams} KV streams; this one has "
            f"{here}: llama.cpp loads a state only into the same layout (the "
            "same n_seq_max, or kv_unified=True on both sides)"
        )
    if saved.scope == "context" and seq is not None:
        raise LlamaStateError(
            "this state holds the whole context: load it without seq= (save one sequence "
            "with save_state(seq=i))"
        )
    if tokens is not None and [list(tokens)] != saved.held[:1]:
        raise LlamaStateError("tokens= differs from the tokens the saved state holds")
    if len(saved.held) > len(session.sequences):
        raise LlamaStateError(
            f"the state holds {len(saved.held)} sequences; this context has n_seq_max "
            f"{len(session.sequences)}"
        )
    _restore(session, sidecar, saved, seq)


def _restore(
    session: NativeSession, sidecar: Sidecar | None, saved: SavedState, seq: int | None
) -> None:
    """``saved``'s parts into the target and the draft context (every sequence, or sequence
    ``seq``, default 0, for a one-sequence state); what each sequence holds follows."""
    draft = sidecar.draft_context() if sidecar is not None else session.ffi.NULL
    parts = [(session.handle, saved.target)]
    if saved.draft:
        parts.append((draft, saved.draft))
    into = 0 if seq is None else seq
    for ctx, data in parts:
        with LLAMA_LOG.capturing() as errors:
            if saved.scope == "context":
                loaded = session.restore_full_state(ctx, data)
            else:
                loaded = session.restore_seq_state(ctx, data, into)
        if not loaded:
            _forget(session, sidecar, saved.scope, into)
            raise LlamaStateError(
                "llama.cpp rejected the saved state (what it was loaded into is emptied): "
                + ("; ".join(errors) or "no reason logged")
            )
    media = saved.media or [[] for _ in saved.held]
    if saved.scope == "context":
        session.forget_held()
        for i, tokens in enumerate(saved.held):
            session.sequences[i].tokens = list(tokens)
            session.sequences[i].spans = list(media[i])
    else:
        session.sequences[into].forget()
        session.sequences[into].tokens = list(saved.held[0])
        session.sequences[into].spans = list(media[0])
    if sidecar is not None:  # drops a draft the sidecar may still hold
        for i, held in enumerate(session.sequences):
            if saved.scope == "context" or i == into:
                sidecar.seq_rm(len(held.tokens), i)


def _forget(session: NativeSession, sidecar: Sidecar | None, scope: str, seq: int) -> None:
    """What a rejected state was loaded into, emptied."""
    if scope == "sequence":
        session.clear(sidecar, seq)
    elif sidecar is not None:
        for i in range(len(session.sequences)):
            session.clear(sidecar, i)
    else:
        session.clear_all()
