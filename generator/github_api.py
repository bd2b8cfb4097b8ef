"""The one small client for GitHub's REST API: a session with retries, timeouts, the token in the
Authorization header only, and one-line errors (method, path, HTTP status; never the token).

``release.github`` (publishing) and ``tracking`` (the newest upstream tag, pull requests, issues)
build on it.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any, ClassVar
from urllib.parse import urlsplit

import requests

from generator.errors import BindgenError, UsageError
from generator.sources.download import make_session

TOKEN_ENV = "GITHUB_TOKEN"
DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


class GitHubApiError(BindgenError):
    """A GitHub API call failed: unreachable, refused, rate limited, or an unexpected answer."""

    exit_code = 2


def optional_token() -> str:
    """``$GITHUB_TOKEN``, or "" (public endpoints work without one, at a lower rate limit)."""
    return os.environ.get(TOKEN_ENV, "").strip()


def check_repo(repo: str, option: str = "--github-repo") -> str:
    if not _REPO.match(repo):
        raise UsageError(f"{option} {repo!r} is not OWNER/NAME")
    return repo


class GitHubApi:
    """Requests against ``api_url``; subclasses name the error they raise."""

    error: ClassVar[type[BindgenError]] = GitHubApiError

    def __init__(
        self, token: str, api_url: str = DEFAULT_API_URL, session: requests.Session | None = None
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self._session = session or make_session()
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._session.headers.update(headers)

    def _request(
        self,
        method: str,
        url: str,
        expect: tuple[int, ...],
        read_timeout: float = READ_TIMEOUT_S,
        **kwargs: Any,
    ) -> requests.Response:
        shown = f"{method} {urlsplit(url).path}"
        try:
            resp = self._session.request(
                method, url, timeout=(CONNECT_TIMEOUT_S, read_timeout), **kwargs
            )
        except requests.RequestException as exc:
            raise self.error(f"{shown}: {type(exc).__name__}") from None
        if resp.status_code not in expect:
            raise self.error(f"{shown}: HTTP {resp.status_code}{_rate_limit_note(resp)}")
        return resp

    def _decode(self, resp: requests.Response, what: str) -> Any:
        try:
            return resp.json()
        except ValueError:
            raise self.error(f"{what}: the answer is not JSON") from None

    def _json(self, resp: requests.Response, what: str) -> dict[str, Any]:
        data = self._decode(resp, what)
        if not isinstance(data, dict):
            raise self.error(f"{what}: the answer is not a JSON object")
        return data

    def _list(self, resp: requests.Response, what: str) -> list[dict[str, Any]]:
        data = self._decode(resp, what)
        if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
            raise self.error(f"{what}: the answer is not a JSON list of objects")
        return data


def _rate_limit_note(resp: requests.Response) -> str:
    if resp.status_code not in (403, 429) or resp.headers.get("X-RateLimit-Remaining") != "0":
        return ""
    reset = resp.headers.get("X-RateLimit-Reset", "")
    when = time.strftime(" (resets %H:%M UTC)", time.gmtime(int(reset))) if reset.isdigit() else ""
    return f": rate limited{when}; a token in ${TOKEN_ENV} raises the limit"
