"""``llama-bindings serve`` (``python -m llama_bindings serve``): load the model, then serve it
with uvicorn until SIGTERM or Ctrl-C. On SIGTERM new requests get 503 and running ones have
``--shutdown-timeout`` seconds to end; then the slots are closed and everything freed."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any, Final

from ..params import default_threads
from ..rpc_worker import is_loopback

WARNING: Final = (
    "WARNING: serving on {host}, not on the loopback address, without an API key: anyone who "
    "reaches this port can use the model. Pass --api-key (or set {variable})."
)
NO_TEMPLATE: Final = (
    "WARNING: {model} has no chat template (tokenizer.chat_template): /v1/chat/completions "
    "refuses chats rather than guess a format; pass --chat-template (a name such as chatml, or "
    "Jinja text) or --chat-template-file. /v1/completions serves as it is."
)
MISSING: Final = (
    "the server needs its extra: pip install 'llama-bindings[server]' "
    "(starlette, uvicorn, sse-starlette, prometheus-client); missing: {name}"
)


def yielding_threads(threads: int | None, environ: dict[str, str]) -> bool:
    """Whether ggml's OpenMP threads should sleep instead of spin while they wait
    (``OMP_WAIT_POLICY=PASSIVE``): when they take every CPU this process may run on, the
    server's own threads (HTTP, the slots) and any other process would otherwise lose their
    cores to spinning. Set only when the environment does not set it. Measured on 2 cores,
    Gemma 3 270M, 4 clients: beside one busy process 32.6 generated tokens/s passive against
    21.6 spinning; on an idle machine 49.9 against 59.0 (medians of 3, 2026-12-07)."""
    if "OMP_WAIT_POLICY" in environ:
        return False
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (threads if threads is not None else default_threads()) >= (cpus or 1)


def main(argv: Sequence[str]) -> int:
    from .config import API_KEY_VARIABLE, parse_config

    try:
        config = parse_config(argv)
    except (OSError, ValueError) as exc:
        print(f"llama-bindings serve: {exc}", file=sys.stderr)
        return 2
    try:
        import uvicorn

        from .app import create_app
        from .served import ServedModel
    except ImportError as exc:
        print(MISSING.format(name=exc.name), file=sys.stderr)
        return 2
    if yielding_threads(config.threads, dict(os.environ)):
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # read by libgomp when ggml loads, below
        print("ggml's threads take every CPU: they sleep while waiting (OMP_WAIT_POLICY=PASSIVE; "
              "set it to ACTIVE to spin)", file=sys.stderr)  # fmt: skip
    if not is_loopback(config.host) and not config.api_key:
        print(WARNING.format(host=config.host, variable=API_KEY_VARIABLE), file=sys.stderr)
    print(f"loading {config.model} ({config.slots} slots of {config.ctx_size} cells, "
          f"speculative {config.speculative})", file=sys.stderr, flush=True)  # fmt: skip
    started = time.perf_counter()
    try:
        served = ServedModel(config)
    except Exception as exc:
        print(f"llama-bindings serve: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if served.template is None and served.model.chat_template is None:
        print(NO_TEMPLATE.format(model=config.model), file=sys.stderr)
    print(f"loaded in {time.perf_counter() - started:.1f} s; serving {config.model_id!r} on "
          f"http://{config.host}:{config.port}", file=sys.stderr, flush=True)  # fmt: skip
    app = create_app(served)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            app.stopping = True  # new requests: 503 while running ones end
            super().handle_exit(sig, frame)

    settings = uvicorn.Config(
        app, host=config.host, port=config.port, log_level="info", lifespan="on",
        timeout_graceful_shutdown=max(1, round(config.shutdown_timeout)),
    )  # fmt: skip
    try:
        Server(settings).run()
    finally:
        served.close()
    return 0
