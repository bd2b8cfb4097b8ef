"""A loopback HTTP server serving GitHub's archive URL layout from a dict, for tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from tests.loopback import serve_handler


@dataclass
class Routes:
    """path -> body; ``truncate`` paths announce the full length but send only half, then close."""

    files: dict[str, bytes] = field(default_factory=dict)
    truncate: set[str] = field(default_factory=set)
    unannounced: set[str] = field(default_factory=set)  # sent without Content-Length
    requests: list[str] = field(default_factory=list)


@contextmanager
def serve(routes: Routes) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            routes.requests.append(self.path)
            body = routes.files.get(self.path)
            if body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/gzip")
            if self.path in routes.unannounced:
                self.close_connection = True  # the body ends where the connection does
            else:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.path in routes.truncate:
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    with serve_handler(Handler) as url:
        yield url
