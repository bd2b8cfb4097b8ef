"""The runtime's exceptions (``llama_bindings.runtime`` re-exports them)."""

from __future__ import annotations


class LlamaRuntimeError(RuntimeError):
    """llama.cpp refused or failed an operation."""


class LlamaUnsupportedError(LlamaRuntimeError):
    """The requested combination is not supported; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class LlamaClosedError(LlamaRuntimeError):
    """The model or context was closed: no llama.cpp object is behind it any more."""


class LlamaLoadError(LlamaRuntimeError):
    """llama.cpp could not load a model or create a context; ``reason`` holds the error lines
    llama.cpp logged during the call (empty when it logged none)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(f"{message}: {reason}" if reason else message)
        self.reason = reason


class LlamaStateError(LlamaRuntimeError):
    """A saved state cannot be loaded here: it is truncated or altered, or it was saved with
    another llama.cpp release, model or speculative setup (the message names the difference)."""


class LlamaMediaError(LlamaRuntimeError, ValueError):
    """A media item (an image or audio) cannot be used: its bytes do not decode, a data URI is
    malformed, or libmtmd cannot preprocess it."""
