"""A loopback server for the endpoints ``generator.tracking`` uses: the latest release and a
tag's commit of an upstream repository, and pull requests and issues of this one."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.loopback import JsonHandler, serve_handler


@dataclass
class FakeTracker:
    upstream: str
    repo: str
    token: str
    latest_tag: str = ""
    commits: dict[str, str] = field(default_factory=dict)  # tag -> sha
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    fail_with: int = 0  # answer every request with this status (0: behave)
    rate_limited: bool = False
    log: list[str] = field(default_factory=list)
    authorisations: list[str] = field(default_factory=list)
    _next: int = 0

    def number(self) -> int:
        self._next += 1
        return self._next


@contextmanager
def serve(state: FakeTracker) -> Iterator[str]:
    lock = threading.Lock()
    up, mine = f"/repos/{state.upstream}", f"/repos/{state.repo}"

    class Handler(JsonHandler):
        def _handle(self, method: str) -> None:
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            raw = self._body() if method in ("POST", "PATCH") else b""
            body = json.loads(raw) if raw else None
            with lock:
                state.log.append(f"{method} {url.path}")
                state.authorisations.append(self.headers.get("Authorization", ""))
                if state.rate_limited:
                    return self._send(
                        403,
                        {"message": "API rate limit exceeded"},
                        {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "0"},
                    )
                if state.fail_with:
                    return self._send(state.fail_with, {"message": "broken"})
                return self._route(method, url.path, query, body)

        def _route(self, method: str, path: str, query: dict[str, str], body: Any) -> None:
            if method == "GET" and path == f"{up}/releases/latest":
                if not state.latest_tag:
                    return self._send(404, {"message": "Not Found"})
                return self._send(200, {"tag_name": state.latest_tag})
            if method == "GET" and path.startswith(f"{up}/commits/"):
                sha = state.commits.get(path.rsplit("/", 1)[1])
                return self._send(200, {"sha": sha}) if sha else self._send(404, {})
            if path.startswith(f"{mine}/"):
                if self.headers.get("Authorization") != f"Bearer {state.token}":
                    return self._send(401, {"message": "Bad credentials"})
                kind = path[len(mine) + 1 :].split("/")[0]
                if kind in ("pulls", "issues"):
                    return self._items(kind, method, path, query, body)
            return self._send(404, {"message": "Not Found"})

        def _items(
            self, kind: str, method: str, path: str, query: dict[str, str], body: Any
        ) -> None:
            items = state.pulls if kind == "pulls" else state.issues
            tail = path.split(f"/{kind}", 1)[1].strip("/")
            if method == "GET" and not tail:
                found = [i for i in items.values() if i["state"] == query.get("state", "open")]
                if kind == "pulls" and "head" in query:
                    found = [
                        i
                        for i in found
                        if f"{state.repo.split('/')[0]}:{i['head']}" == query["head"]
                    ]
                if kind == "issues" and "labels" in query:
                    found = [i for i in found if query["labels"] in i.get("labels", [])]
                return self._send(200, found)
            if method == "POST" and not tail:
                number = state.number()
                items[number] = {
                    **body,
                    "number": number,
                    "state": "open",
                    "html_url": f"https://example.invalid/{kind}/{number}",
                }
                return self._send(201, items[number])
            if method == "PATCH" and tail.isdigit() and int(tail) in items:
                items[int(tail)].update(body)
                return self._send(200, items[int(tail)])
            return self._send(404, {"message": "Not Found"})

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

    with serve_handler(Handler) as url:
        yield url
