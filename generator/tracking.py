"""Tracking upstream: llama.cpp's newest release tag, and the pull request (or, when a gate
failed, the issue) that carries a bump of it into this repository.

Endpoints (GitHub REST, through ``github_api``):

* ``GET /repos/{upstream}/releases/latest`` (its ``tag_name``), then
  ``GET /repos/{upstream}/commits/{tag}`` (its ``sha``);
* ``GET /repos/{repo}/pulls?state=open&head={owner}:{branch}``, ``POST /repos/{repo}/pulls``,
  ``PATCH /repos/{repo}/pulls/{number}``: one pull request per tag, opened once and updated after;
* ``GET /repos/{repo}/issues?state=open&labels={label}``, ``POST /repos/{repo}/issues``,
  ``PATCH /repos/{repo}/issues/{number}``: one issue per tag whose bump failed a gate, found by
  its title among the open issues with the label.

Nothing here pushes: the workflow pushes the bump's branch (never the default branch) first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from generator.github_api import GitHubApi, check_repo

UPSTREAM = "ggml-org/llama.cpp"
ISSUE_LABEL = "upstream-bump"
PAGE_SIZE = 100
_BUILD_TAG = re.compile(r"^b(\d+)$")


@dataclass(frozen=True)
class UpstreamRelease:
    tag: str
    commit: str


@dataclass(frozen=True)
class Proposal:
    kind: str  # "pull request" or "issue"
    number: int
    url: str
    created: bool


def is_newer(tag: str, pinned: str) -> bool | None:
    """Whether ``tag`` is a later llama.cpp build tag (``bNNNN``) than ``pinned``; None when
    either is not a build tag (then only "differs" can be said)."""
    new, old = _BUILD_TAG.match(tag), _BUILD_TAG.match(pinned)
    if new is None or old is None:
        return None
    return int(new.group(1)) > int(old.group(1))


def pull_title(tag: str) -> str:
    return f"Bump llama.cpp to {tag}"


def issue_title(tag: str) -> str:
    return f"Bump to llama.cpp {tag} failed its gates"


class TrackingClient(GitHubApi):
    def latest(self, upstream: str = UPSTREAM) -> UpstreamRelease:
        base = f"{self.api_url}/repos/{check_repo(upstream, '--upstream')}"
        release = self._json(self._request("GET", f"{base}/releases/latest", (200,)), "latest")
        tag = release.get("tag_name")
        if not isinstance(tag, str) or not tag:
            raise self.error(f"{upstream}: the latest release has no tag_name")
        commit = self._json(self._request("GET", f"{base}/commits/{tag}", (200,)), tag).get("sha")
        if not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{40}", commit):
            raise self.error(f"{upstream} {tag}: the commit is not a 40-digit hex sha")
        return UpstreamRelease(tag, commit)

    def propose_pull(self, repo: str, branch: str, base: str, tag: str, body: str) -> Proposal:
        """Open the pull request of ``branch`` for ``tag``, or update the open one."""
        url = f"{self.api_url}/repos/{check_repo(repo)}/pulls"
        owner = repo.split("/", 1)[0]
        query = {"state": "open", "head": f"{owner}:{branch}", "per_page": PAGE_SIZE}
        found = self._list(self._request("GET", url, (200,), params=query), "pulls")
        fields = {"title": pull_title(tag), "body": body}
        if found:
            number = int(found[0]["number"])
            data = self._json(
                self._request("PATCH", f"{url}/{number}", (200,), json=fields), "pull"
            )
            return Proposal("pull request", number, str(data.get("html_url", "")), False)
        create = {**fields, "head": branch, "base": base, "maintainer_can_modify": True}
        data = self._json(self._request("POST", url, (201,), json=create), "pull")
        return Proposal("pull request", int(data["number"]), str(data.get("html_url", "")), True)

    def propose_issue(self, repo: str, tag: str, body: str) -> Proposal:
        """Open the issue for ``tag``'s failed bump, or update the open one."""
        url = f"{self.api_url}/repos/{check_repo(repo)}/issues"
        query = {"state": "open", "labels": ISSUE_LABEL, "per_page": PAGE_SIZE}
        found = self._list(self._request("GET", url, (200,), params=query), "issues")
        title = issue_title(tag)
        same = [i for i in found if i.get("title") == title and "pull_request" not in i]
        if same:
            number = int(same[0]["number"])
            data = self._patch_issue(url, number, {"body": body})
            return Proposal("issue", number, str(data.get("html_url", "")), False)
        fields: dict[str, Any] = {"title": title, "body": body, "labels": [ISSUE_LABEL]}
        data = self._json(self._request("POST", url, (201,), json=fields), "issue")
        return Proposal("issue", int(data["number"]), str(data.get("html_url", "")), True)

    def _patch_issue(self, url: str, number: int, fields: dict[str, Any]) -> dict[str, Any]:
        return self._json(self._request("PATCH", f"{url}/{number}", (200,), json=fields), "issue")
