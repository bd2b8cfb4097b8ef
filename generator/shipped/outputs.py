"""What a context's outputs become in Python: log-probabilities of tokens, embedding vectors.

Log-probabilities are those of the model's distribution at that position (a log-softmax of its
logits, before any sampler), as llama-cpp-python reports them; they are computed with numpy
(this module imports it only when log-probabilities are asked for).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import LlamaUnsupportedError


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token's log-probability and the ``top`` alternatives at its position
    (``(token, logprob)``, most probable first; the generated token is among them when it is
    one of the ``k`` most probable)."""

    token: int
    logprob: float
    top: tuple[tuple[int, float], ...]


class TextPiece(str):
    """A streamed piece of text (a ``str``) with the log-probabilities of the tokens released
    since the previous piece (``logprobs``); streams yield these when log-probabilities are
    asked for."""

    logprobs: tuple[TokenLogprob, ...]

    def __new__(cls, text: str, logprobs: tuple[TokenLogprob, ...]) -> TextPiece:
        piece = super().__new__(cls, text)
        piece.logprobs = logprobs
        return piece


def check_top(value: object) -> int | None:
    """``logprobs=``: None (off) or the number of alternatives to report (>= 0)."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"logprobs must be None or an int >= 0, not {value!r}")
    return value


def _numpy() -> Any:
    try:
        import numpy
    except ImportError as exc:  # pragma: no cover - numpy is installed where the tests run
        raise LlamaUnsupportedError("log-probabilities need numpy (pip install numpy)") from exc
    return numpy


def token_logprob(ffi: Any, logits: Any, n_vocab: int, token: int, top: int) -> TokenLogprob:
    """``token``'s log-probability under the ``n_vocab`` logits at ``logits`` (a ``float *``),
    and the ``top`` most probable tokens'."""
    np = _numpy()
    values = np.frombuffer(ffi.buffer(logits, 4 * n_vocab), dtype=np.float32).astype(np.float64)
    peak = values.max()
    logprobs = values - (peak + math.log(float(np.exp(values - peak).sum())))
    best: list[tuple[int, float]] = []
    if top > 0:
        k = min(top, n_vocab)
        index = np.argpartition(-logprobs, k - 1)[:k]
        index = index[np.argsort(-logprobs[index], kind="stable")]
        best = [(int(i), float(logprobs[i])) for i in index]
    return TokenLogprob(token, float(logprobs[token]), tuple(best))


def normalized(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to Euclidean length 1 (a zero vector stays zero)."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else list(vector)
