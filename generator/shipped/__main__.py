"""``python -m llama_bindings COMMAND`` (``llama-bindings COMMAND`` from a wheel). Commands:
``serve`` (:mod:`llama_bindings.server`, the OpenAI-compatible server) and ``rpc-server``
(:mod:`llama_bindings.rpc_worker`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

USAGE = "usage: python -m llama_bindings {serve | rpc-server} [--help | options]"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    if args[0] == "serve":
        from .server.cli import main as serve

        return serve(args[1:])
    if args[0] == "rpc-server":
        from .rpc_worker import main as rpc_server

        return rpc_server(args[1:])
    print(f"{USAGE}\nunknown command {args[0]!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
