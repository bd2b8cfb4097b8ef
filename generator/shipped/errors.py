"""The runtime's exceptions (``llama_bindings.runtime`` re-exports them)."""

from __future__ import annotations

from typing import Any


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


class LlamaQueueFullError(LlamaRuntimeError):
    """Every slot of a context's :class:`Slots` is busy and as many requests as it lets wait
    are waiting: try again later (a server answers 503)."""


class LlamaSlotBusyError(LlamaRuntimeError):
    """A slot of a context's :class:`Slots` is generating: its state can be saved, loaded or
    cleared once the request ends (a server answers 409)."""


class LlamaSchemaError(LlamaRuntimeError, ValueError):
    """A JSON schema that is invalid, or that llama.cpp cannot turn into a grammar (its message
    says why)."""


class LlamaChatParseError(LlamaRuntimeError, ValueError):
    """Generated text that the chat format's parser (llama.cpp's, for the model's template)
    refuses; raised after a chat's generation, ``result`` is that generation's result (its
    ``text`` unparsed), else None."""

    result: Any = None


class LlamaRpcError(LlamaRuntimeError):
    """An RPC server (llama.cpp's ``ggml-rpc`` worker) cannot be used; ``endpoint`` names it and
    ``reason`` says why. Raised by the runtime's checks before llama.cpp connects: llama.cpp
    itself aborts the process on each of these (``GGML_ABORT`` in ``ggml-rpc.cpp``)."""

    def __init__(self, endpoint: str, reason: str) -> None:
        super().__init__(f"RPC server {endpoint}: {reason}")
        self.endpoint = endpoint
        self.reason = reason


class LlamaRpcUnreachableError(LlamaRpcError):
    """Nothing accepts a connection at the endpoint (refused, no route, or no answer in time)."""


class LlamaRpcHandshakeError(LlamaRpcError):
    """The endpoint accepted the connection but did not answer the RPC handshake as a server of
    this protocol does (it closed the connection, answered something else, or is busy serving
    another client: a ggml-rpc server serves one client at a time)."""


class LlamaRpcVersionError(LlamaRpcError):
    """The server speaks another RPC protocol version than these libraries (``server`` and
    ``client``: (major, minor, patch)); llama.cpp refuses a different major version or a newer
    minor one."""

    def __init__(
        self, endpoint: str, server: tuple[int, int, int], client: tuple[int, int, int]
    ) -> None:
        def text(version: tuple[int, int, int]) -> str:
            return ".".join(str(part) for part in version)

        super().__init__(
            endpoint,
            f"the server speaks RPC protocol {text(server)}, these libraries speak "
            f"{text(client)}: run a worker built from the same llama.cpp release",
        )
        self.server = server
        self.client = client
