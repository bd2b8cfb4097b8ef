"""Errors of the release stage."""

from __future__ import annotations

from generator.errors import BindgenError


class ReleaseRefusedError(BindgenError):
    """The release entry, its gates or its inputs do not allow a release; nothing was written."""

    exit_code = 3


class PublishError(BindgenError):
    """Publishing to GitHub Releases failed; the draft release (if any) was deleted."""

    exit_code = 4
