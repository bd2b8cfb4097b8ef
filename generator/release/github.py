"""Publishing a release to GitHub Releases through its REST API, all or nothing.

1. refuse when a release for the tag exists (``GET /repos/{repo}/releases/tags/{tag}``),
2. delete drafts for the tag that an earlier attempt left (``GET /repos/{repo}/releases``, which
   lists drafts to a token that may push; the tag endpoint never shows them),
3. create a draft (``POST /repos/{repo}/releases``),
4. upload every asset to the draft's ``upload_url`` (``POST ...?name=FILE``),
5. publish it (``PATCH /repos/{repo}/releases/{id}`` with ``draft: false``).

When any step after 3 fails, the release's state is read again (``GET .../releases/{id}``)
before anything is deleted: a release that is published with every asset (the answer to step 5
was lost) is kept and reported as published; a draft is deleted (``DELETE``), so no
half-published release remains; a state that cannot be read deletes nothing and says so.

The token comes from ``$GITHUB_TOKEN``; it is sent only in the
Authorization header, to the API host and the upload host it names, and never printed, logged or
written (error messages carry method, path and HTTP status only).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

from generator.errors import UsageError
from generator.github_api import (
    DEFAULT_API_URL,
    TOKEN_ENV,
    GitHubApi,
    check_repo,
    optional_token,
)
from generator.release.errors import PublishError

UPLOAD_READ_TIMEOUT_S = 600.0
LIST_PAGE_SIZE = 100
LIST_PAGES_MAX = 10  # drafts sit at the top of the list; 1,000 releases is far enough


@dataclass(frozen=True)
class PublishedRelease:
    id: int
    html_url: str
    assets: list[str]


def token_from_env() -> str:
    token = optional_token()
    if not token:
        raise UsageError(f"publishing needs a token in ${TOKEN_ENV}")
    return token


class GitHubReleases(GitHubApi):
    """A small client for the endpoints above."""

    error = PublishError

    def __init__(
        self,
        repo: str,
        token: str,
        api_url: str = DEFAULT_API_URL,
        session: requests.Session | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.repo = check_repo(repo)
        super().__init__(token, api_url, session)
        self._progress = progress or (lambda text: print(text, file=sys.stderr, flush=True))

    # -- the steps ---------------------------------------------------------------------------
    def _releases_url(self) -> str:
        return f"{self.api_url}/repos/{self.repo}/releases"

    def exists(self, tag: str) -> bool:
        resp = self._request("GET", f"{self._releases_url()}/tags/{tag}", (200, 404))
        return resp.status_code == 200

    def _drafts_for(self, tag: str) -> list[int]:
        """Ids of draft releases for ``tag`` (left by an earlier attempt that did not finish)."""
        found: list[int] = []
        for page in range(1, LIST_PAGES_MAX + 1):
            resp = self._request(
                "GET", self._releases_url(), (200,),
                params={"per_page": LIST_PAGE_SIZE, "page": page},
            )  # fmt: skip
            items = self._decode(resp, "list releases")
            if not isinstance(items, list):
                raise PublishError("list releases: the answer is not a JSON list")
            found += [
                r["id"] for r in items
                if isinstance(r, dict) and r.get("draft") is True and r.get("tag_name") == tag
                and isinstance(r.get("id"), int)
            ]  # fmt: skip
            if len(items) < LIST_PAGE_SIZE:
                break
        return found

    def _state(self, release_id: int) -> dict[str, Any] | None:
        """The release as the API has it now (None: it does not exist)."""
        resp = self._request("GET", f"{self._releases_url()}/{release_id}", (200, 404))
        return None if resp.status_code == 404 else self._json(resp, "read release")

    def _upload_base(self, data: dict[str, Any]) -> str:
        template = str(data.get("upload_url", ""))
        base = template.split("{", 1)[0]
        parts, api = urlsplit(base), urlsplit(self.api_url)
        allowed = {api.netloc}
        if api.netloc == "api.github.com":
            allowed.add("uploads.github.com")
        if parts.scheme != api.scheme or parts.netloc not in allowed:
            raise PublishError("the draft's upload_url is not on the API's upload host")
        return base

    def publish(
        self, tag: str, name: str, body: str, assets: list[Path], commitish: str | None = None
    ) -> PublishedRelease:
        if self.exists(tag):
            raise PublishError(f"{self.repo} already has a release for tag {tag}; not replacing it")
        for stale in self._drafts_for(tag):
            self._progress(f"publish: draft release {stale} for {tag} left by an earlier attempt")
            self._delete_draft(stale)
        payload: dict[str, Any] = {"tag_name": tag, "name": name, "body": body, "draft": True}
        if commitish:
            payload["target_commitish"] = commitish
        resp = self._request("POST", self._releases_url(), (201,), json=payload)
        draft = self._json(resp, "create draft")
        release_id = draft.get("id")
        if not isinstance(release_id, int):
            raise PublishError("create draft: the answer has no release id")
        self._progress(f"publish: draft release {release_id} created for {tag}")
        try:
            upload_base = self._upload_base(draft)
            for path in sorted(assets, key=lambda p: p.name):
                self._progress(f"publish: upload {path.name}")
                with path.open("rb") as fh:
                    self._request(
                        "POST",
                        upload_base,
                        (201,),
                        read_timeout=UPLOAD_READ_TIMEOUT_S,
                        params={"name": path.name},
                        data=fh,
                        headers={
                            "Content-Type": "application/octet-stream",
                            "Content-Length": str(path.stat().st_size),
                        },
                    )
            resp = self._request(
                "PATCH", f"{self._releases_url()}/{release_id}", (200,), json={"draft": False}
            )
            final = self._json(resp, "publish draft")
        except BaseException as exc:
            published = self._settle(release_id, assets, exc)
            if published is not None:
                return published
            if isinstance(exc, PublishError):
                raise PublishError(f"{exc}; the draft release was deleted") from None
            raise
        return PublishedRelease(
            release_id, str(final.get("html_url", "")), sorted(p.name for p in assets)
        )

    def _settle(
        self, release_id: int, assets: list[Path], exc: BaseException
    ) -> PublishedRelease | None:
        """After a failed step: keep a release that is in fact published with every asset
        (returned), delete one that is still a draft (None), and delete nothing when its
        state cannot be read."""
        try:
            state = self._state(release_id)
        except PublishError as read_error:
            raise PublishError(
                f"{exc}; then reading release {release_id} failed ({read_error}), so it was "
                "not deleted: check whether it is published, and delete it by hand if not"
            ) from None
        if state is None:
            return None
        names = sorted(p.name for p in assets)
        uploaded = sorted(
            str(a.get("name")) for a in state.get("assets", []) if isinstance(a, dict)
        )
        if state.get("draft") is False and uploaded == names:
            self._progress(
                f"publish: the answer to publishing was lost ({exc}), but release {release_id} "
                "is published with every asset"
            )
            return PublishedRelease(release_id, str(state.get("html_url", "")), names)
        if state.get("draft") is False:
            raise PublishError(
                f"{exc}; release {release_id} is published but its assets are not the ones "
                f"uploaded ({', '.join(uploaded) or 'none'}): not deleting a published release, "
                "fix it by hand"
            ) from None
        self._delete_draft(release_id)
        return None

    def _delete_draft(self, release_id: int, attempts: int = 3) -> None:
        """Delete the draft; DELETE is idempotent, so it is retried (404 means already gone)."""
        last = ""
        for _ in range(attempts):
            try:
                self._request("DELETE", f"{self._releases_url()}/{release_id}", (204, 404))
            except PublishError as exc:
                last = str(exc)
                continue
            self._progress(f"publish: draft release {release_id} deleted")
            return
        raise PublishError(
            f"publishing failed and draft release {release_id} could not be deleted ({last}): "
            "delete it by hand"
        )
