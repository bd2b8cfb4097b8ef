"""A loopback server that implements the GitHub Releases endpoints `release --publish` uses.

State lives in :class:`FakeGitHub`: releases by id (tag, draft flag, uploaded assets). Uploads of
a name in ``fail_uploads`` answer 500; ``fail_patch`` makes publishing the draft answer 422;
``lose_patch_answer`` publishes it and then closes the connection without an answer. The list
endpoint shows drafts (as GitHub does to a token that may push); the tag endpoint does not.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.loopback import JsonHandler, serve_handler


@dataclass
class FakeRelease:
    id: int
    tag: str
    name: str
    body: str
    draft: bool
    assets: dict[str, bytes] = field(default_factory=dict)


@dataclass
class FakeGitHub:
    repo: str
    token: str
    releases: dict[int, FakeRelease] = field(default_factory=dict)
    fail_uploads: set[str] = field(default_factory=set)
    fail_patch: bool = False
    lose_patch_answer: bool = False
    log: list[str] = field(default_factory=list)
    bad_auth: int = 0
    _next_id: int = 1

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id


@contextmanager
def serve(state: FakeGitHub) -> Iterator[str]:
    lock = threading.Lock()
    base = f"/repos/{state.repo}/releases"
    upload = f"/uploads/repos/{state.repo}/releases"

    class Handler(JsonHandler):
        def _authorised(self) -> bool:
            if self.headers.get("Authorization") != f"Bearer {state.token}":
                state.bad_auth += 1
                self._body()
                self._send(401, {"message": "Bad credentials"})
                return False
            return True

        def _release_json(self, rel: FakeRelease) -> dict[str, Any]:
            host = f"http://{self.headers['Host']}"
            return {
                "id": rel.id,
                "tag_name": rel.tag,
                "draft": rel.draft,
                "html_url": f"{host}/{state.repo}/releases/tag/{rel.tag}",
                "upload_url": f"{host}{upload}/{rel.id}/assets{{?name,label}}",
                "assets": [{"name": name} for name in sorted(rel.assets)],
            }

        def _handle(self, method: str) -> None:
            url = urlsplit(self.path)
            with lock:
                state.log.append(f"{method} {url.path}")
                if not self._authorised():
                    return
                self._route(method, url.path, parse_qs(url.query))

        def _route(self, method: str, path: str, query: dict[str, list[str]]) -> None:
            if method == "GET" and path.startswith(f"{base}/tags/"):
                tag = path.rsplit("/", 1)[1]
                hits = [r for r in state.releases.values() if r.tag == tag and not r.draft]
                self._send(200, self._release_json(hits[0])) if hits else self._send(404, {})
                return
            if method == "GET" and path == base:
                page = int(query.get("page", ["1"])[0])
                size = int(query.get("per_page", ["30"])[0])
                newest_first = sorted(state.releases.values(), key=lambda r: -r.id)
                chunk = newest_first[(page - 1) * size : page * size]
                self._send(200, [self._release_json(r) for r in chunk])
                return
            if method == "POST" and path == base:
                data = json.loads(self._body())
                rel = FakeRelease(
                    state.new_id(), data["tag_name"], data["name"], data["body"], data["draft"]
                )
                state.releases[rel.id] = rel
                self._send(201, self._release_json(rel))
                return
            m = re.fullmatch(rf"{re.escape(upload)}/(\d+)/assets", path)
            if method == "POST" and m:
                body = self._body()
                rel = state.releases.get(int(m.group(1)))
                name = query.get("name", [""])[0]
                if rel is None:
                    self._send(404, {})
                elif name in state.fail_uploads:
                    self._send(500, {"message": "upload failed"})
                else:
                    rel.assets[name] = body
                    self._send(201, {"name": name, "size": len(body)})
                return
            m = re.fullmatch(rf"{re.escape(base)}/(\d+)", path)
            if m and method == "GET":
                found = state.releases.get(int(m.group(1)))
                self._send(200, self._release_json(found)) if found else self._send(404, {})
                return
            if m and method in ("PATCH", "DELETE"):
                body = self._body()
                rid = int(m.group(1))
                if rid not in state.releases:
                    self._send(404, {})
                elif method == "DELETE":
                    del state.releases[rid]
                    self._send(204)
                elif state.fail_patch:
                    self._send(422, {"message": "Validation Failed"})
                else:
                    state.releases[rid].draft = bool(json.loads(body).get("draft", True))
                    if state.lose_patch_answer:
                        self.close_connection = True  # done, but the client never hears it
                        return
                    self._send(200, self._release_json(state.releases[rid]))
                return
            self._body()
            self._send(404, {"message": "Not Found"})

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

        def do_DELETE(self) -> None:
            self._handle("DELETE")

    with serve_handler(Handler) as url:
        yield url
