"""The server's HTTP application (Starlette): OpenAI's endpoints over a :class:`ServedModel`'s
slots, ``/health`` and ``/metrics``.

Every generation runs in a slot (:class:`~llama_bindings.runtime.Slots`) through
:mod:`~llama_bindings.openai_format`, so a response is what ``create_chat_completion`` /
``create_completion`` give on a context. A client that disconnects cancels its request, which
ends at the slots' next step. Errors are OpenAI's shape, ``{"error": {"message", "type", "param",
"code"}}``: 400 for a request the runtime refuses, 401 for a wrong key, 404 for an unknown model
or path, 413 for a body over the limit, 503 (with ``Retry-After``) when every slot is busy and
the queue is full or the server is stopping, 500 for anything else."""

from __future__ import annotations

import base64
import hmac
import json
import re
import struct
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final, TypeVar

import anyio
import anyio.to_thread
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import (
    LlamaChatParseError,
    LlamaClosedError,
    LlamaQueueFullError,
    LlamaSlotBusyError,
    LlamaStateError,
    LlamaUnsupportedError,
)
from ..openai_format import create_chat_completion, create_completion
from ..runtime import Cancellation, ChatTemplateError
from .metrics import ServerMetrics
from .requests import BadRequest, Checked, check_chat, check_completion, check_embeddings
from .served import ServedModel

T = TypeVar("T")
OPEN_PATHS: Final = frozenset({"/health"})  # answered without the API key
_END: Final = object()
_TOO_LARGE: Final = "llama_bindings.body_too_large"


def error_response(
    status: int, message: str, kind: str, *, param: str | None = None, code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:  # fmt: skip
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


def _response_of(exc: BaseException) -> JSONResponse:
    """The OpenAI-shaped answer to what a request raised."""
    if isinstance(exc, BadRequest):
        kind = "not_found_error" if exc.status == 404 else "invalid_request_error"
        return error_response(exc.status, str(exc), kind, param=exc.param, code=exc.code)
    if isinstance(exc, LlamaQueueFullError | LlamaClosedError):
        return error_response(
            503, str(exc), "unavailable_error", code="overloaded", headers={"Retry-After": "1"}
        )
    if isinstance(exc, LlamaSlotBusyError):
        return error_response(409, str(exc), "invalid_request_error", code="slot_busy")
    if isinstance(exc, LlamaChatParseError):  # the model's reply, not the request
        return error_response(500, str(exc), "server_error")
    if isinstance(
        exc, TypeError | ValueError | LlamaUnsupportedError | ChatTemplateError | LlamaStateError
    ):
        return error_response(400, str(exc), "invalid_request_error")
    return error_response(500, f"{type(exc).__name__}: {exc}", "server_error")


class Guard:
    """ASGI middleware before the app: the API key (every path but ``/health``, compared in
    constant time; ``Authorization: Bearer KEY``), the body size limit (a ``Content-Length``
    over it is refused at once; a chunked body is cut where it passes it, and the handler answers
    413), and 503 once the server is stopping."""

    def __init__(self, app: ASGIApp, api_key: str | None, max_body_bytes: int) -> None:
        self.app, self.max_body_bytes = app, max_body_bytes
        self.key = api_key.encode() if api_key else None
        self.stopping = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v for k, v in scope["headers"]}
        refused = self._refusal(scope["path"], headers)
        if refused is not None:
            await refused(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body_bytes:
                    scope[_TOO_LARGE] = True
                    return {"type": "http.request", "body": b"", "more_body": False}
            return message

        await self.app(scope, counted, send)

    def _refusal(self, path: str, headers: Mapping[str, bytes]) -> Response | None:
        if self.stopping and path not in OPEN_PATHS:
            return error_response(
                503, "the server is stopping", "unavailable_error", headers={"Retry-After": "5"}
            )
        if self.key is not None and path not in OPEN_PATHS:
            given = headers.get("authorization", b"")
            token = given[7:] if given[:7].lower() == b"bearer " else b""
            if not hmac.compare_digest(token, self.key):
                return error_response(
                    401, "Incorrect API key provided", "invalid_request_error",
                    code="invalid_api_key",
                )  # fmt: skip
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            return error_response(
                413, _too_large_message(self.max_body_bytes), "invalid_request_error",
                code="request_too_large",
            )  # fmt: skip
        return None


def _too_large_message(limit: int) -> str:
    return f"the request body is over the server's limit ({limit} bytes)"


async def _json_body(request: Request, limit: int) -> dict[str, Any]:
    raw = await request.body()
    if request.scope.get(_TOO_LARGE):
        raise BadRequest(_too_large_message(limit), status=413, code="request_too_large")
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


async def _until_done(request: Request, call: Callable[[], T], cancel: Cancellation) -> T:
    """``call()`` in a worker thread; a client that disconnects meanwhile cancels it."""
    result: list[T] = []
    failed: list[Exception] = []
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            cancel.cancel()

        group.start_soon(watch)
        try:
            result.append(await anyio.to_thread.run_sync(call))
        except Exception as exc:
            failed.append(exc)
        group.cancel_scope.cancel()
    if failed:
        raise failed[0]
    return result[0]


async def _events(chunks: Any, cancel: Cancellation) -> AsyncIterator[str]:
    """A stream's chunks as server-sent events' data, then ``[DONE]``; an error after the first
    event (the chat layer refusing the finished reply, say) is one last event with OpenAI's error
    body, as llama.cpp's server sends it. When the client leaves, the request is cancelled at
    once, even while it waits for a slot (it leaves the queue; in a slot it ends at the next
    step), and the stream is closed once its reader thread is back."""
    idle = threading.Event()  # no reader thread is inside the stream
    idle.set()

    def read() -> Any:
        try:
            return next(chunks, _END)
        finally:
            idle.set()

    try:
        while True:
            idle.clear()
            try:
                # abandoned on cancel (the client left): the finally below cancels the request,
                # which ends the wait of the thread that reads it
                chunk = await anyio.to_thread.run_sync(read, abandon_on_cancel=True)
            except Exception as exc:  # after the headers: an error event
                yield bytes(_response_of(exc).body).decode("utf-8")
                return
            if chunk is _END:
                break
            yield json.dumps(chunk, ensure_ascii=False, separators=(",", ":"))
        yield "[DONE]"
    finally:
        cancel.cancel()
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(idle.wait)
            await anyio.to_thread.run_sync(chunks.close)


class Endpoints:
    """The handlers of one served model (each answers OpenAI-shaped errors through
    :meth:`counted`, which also counts the answer in the metrics)."""

    def __init__(self, served: ServedModel, metrics: ServerMetrics) -> None:
        self.served, self.config, self.metrics = served, served.config, metrics
        self.guard: Guard | None = None

    def counted(
        self, name: str, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def answer(request: Request) -> Response:
            try:
                response = await handler(request)
            except Exception as exc:
                response = _response_of(exc)
            self.metrics.requests.labels(name, str(response.status_code)).inc()
            return response

        return answer

    async def _body(self, request: Request) -> dict[str, Any]:
        return await _json_body(request, self.config.max_body_bytes)

    async def _generation(self, request: Request, check: Any, run: Any) -> Response:
        checked: Checked = check(await self._body(request), self.config.model_id)
        cancel = Cancellation()
        options = {**checked.options, "cancel": cancel}
        if check is check_chat and self.served.template is not None:
            options["template"] = self.served.template

        def call() -> Any:
            return run(self.served.slots, checked.input, stream=checked.stream, **options)

        if not checked.stream:
            return JSONResponse(await _until_done(request, call, cancel))
        chunks = await anyio.to_thread.run_sync(call)  # a refused request raises here
        # on SIGTERM a running stream gets the shutdown timeout to end, as other requests do
        return EventSourceResponse(
            _events(chunks, cancel), sep="\n", ping=15,
            shutdown_grace_period=self.config.shutdown_timeout,
        )  # fmt: skip

    async def chat(self, request: Request) -> Response:
        return await self._generation(request, check_chat, create_chat_completion)

    async def completions(self, request: Request) -> Response:
        return await self._generation(request, check_completion, create_completion)

    async def embeddings(self, request: Request) -> Response:
        inputs, encoding = check_embeddings(await self._body(request), self.config.model_id)
        vectors, tokens = await anyio.to_thread.run_sync(self.served.embed, inputs)
        data = [
            {"object": "embedding", "index": i, "embedding": _encoded(vector, encoding)}
            for i, vector in enumerate(vectors)
        ]
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        model = self.config.model_id
        return JSONResponse({"object": "list", "data": data, "model": model, "usage": usage})

    async def models(self, request: Request) -> Response:
        entry = {"id": self.config.model_id, "object": "model", "created": 0, "owned_by": "local"}
        return JSONResponse({"object": "list", "data": [entry]})

    async def health(self, request: Request) -> Response:
        if self.guard is not None and self.guard.stopping:
            return JSONResponse({"status": "stopping"}, status_code=503)
        return JSONResponse({"status": "ok", "slots": self.served.slots.n_slots})

    async def slot_list(self, request: Request) -> Response:
        slots = self.served.slots
        stats = await anyio.to_thread.run_sync(slots.stats)
        return JSONResponse([
            {"id": s.slot, "busy": s.busy, "requests": s.requests,
             "generated_tokens": s.generated_tokens, "acceptance_rate": s.acceptance_rate}
            for s in stats
        ])  # fmt: skip

    async def slot_action(self, request: Request) -> Response:
        """llama.cpp's server's slot actions: ``save`` and ``restore`` (a file in
        ``--slot-save-path``, the speculative sidecar's state with the target's), ``erase``; a
        slot generating is a 409, a state saved with another model or setup a 400."""
        slot, action = _slot_of(request), request.query_params.get("action")
        slots = self.served.slots
        if action == "erase":
            held = await anyio.to_thread.run_sync(slots.held_tokens, slot)
            await anyio.to_thread.run_sync(slots.clear_slot, slot)
            return JSONResponse({"id_slot": slot, "n_erased": held})
        if action not in ("save", "restore"):
            raise BadRequest("action must be save, restore or erase", param="action")
        path = _state_file(self.config.slot_save_path, await self._body(request))
        if action == "save":
            state = await anyio.to_thread.run_sync(slots.save_slot, slot)
            await anyio.to_thread.run_sync(path.write_bytes, state)
            held = await anyio.to_thread.run_sync(slots.held_tokens, slot)
            return JSONResponse(
                {"id_slot": slot, "filename": path.name, "n_saved": held, "n_written": len(state)}
            )
        if not path.is_file():
            raise BadRequest(f"no saved slot named {path.name!r}", param="filename", status=404)
        state = await anyio.to_thread.run_sync(path.read_bytes)
        await anyio.to_thread.run_sync(slots.load_slot, slot, state)
        held = await anyio.to_thread.run_sync(slots.held_tokens, slot)
        return JSONResponse(
            {"id_slot": slot, "filename": path.name, "n_restored": held, "n_read": len(state)}
        )

    async def scrape(self, request: Request) -> Response:
        return Response(generate_latest(self.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        # a reader of a waiting or running request holds a worker thread (anyio's default is
        # 40, below the default queue): room for every slot, the whole queue and the rest
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = max(
            limiter.total_tokens, self.served.slots.n_slots + self.config.max_waiting + 16
        )
        yield
        if self.guard is not None:
            self.guard.stopping = True
        timeout = self.config.shutdown_timeout
        await anyio.to_thread.run_sync(lambda: self.served.close(timeout=timeout))


def create_app(served: ServedModel) -> Guard:
    """The ASGI application serving ``served`` (its config's key, limits and model id): the
    :class:`Guard` around the Starlette app; set its ``stopping`` when the server stops."""
    ends = Endpoints(served, ServerMetrics(served.slots))
    routes = [
        Route("/v1/chat/completions", ends.counted("chat", ends.chat), methods=["POST"]),
        Route("/v1/completions", ends.counted("completions", ends.completions), methods=["POST"]),
        Route("/v1/embeddings", ends.counted("embeddings", ends.embeddings), methods=["POST"]),
        Route("/v1/models", ends.counted("models", ends.models), methods=["GET"]),
        Route("/slots", ends.counted("slots", ends.slot_list), methods=["GET"]),
        Route("/slots/{slot}", ends.counted("slots", ends.slot_action), methods=["POST"]),
        Route("/health", ends.health, methods=["GET"]),
        Route("/metrics", ends.scrape, methods=["GET"]),
    ]
    handlers = {404: _not_found, 405: _not_allowed}
    app = Starlette(routes=routes, lifespan=ends.lifespan, exception_handlers=handlers)
    ends.guard = Guard(app, served.config.api_key, served.config.max_body_bytes)
    return ends.guard


async def _not_found(request: Request, exc: Exception) -> Response:
    return error_response(404, f"no such endpoint: {request.url.path}", "not_found_error")


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return error_response(405, f"{request.method} is not allowed here", "invalid_request_error")


_STATE_NAME: Final = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def _slot_of(request: Request) -> int:
    given = request.path_params["slot"]
    if not given.isdigit():
        raise BadRequest(f"no slot {given!r}", param="slot", status=404)
    return int(given)


def _state_file(folder: str | None, body: Mapping[str, Any]) -> Path:
    """A slot state's file: a plain name in ``--slot-save-path`` (no folder, no ``..``)."""
    if folder is None:
        raise BadRequest("slot states need the server started with --slot-save-path DIR")
    name = body.get("filename")
    if not isinstance(name, str) or not _STATE_NAME.fullmatch(name):
        raise BadRequest(
            "filename must be a plain file name (letters, digits, '.', '_', '-')",
            param="filename",
        )
    return Path(folder) / name


def _encoded(vector: list[float], encoding: str) -> list[float] | str:
    if encoding == "float":
        return vector
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
