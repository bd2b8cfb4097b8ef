"""Errors the CLI turns into an exit code and a one-line reason."""

from __future__ import annotations


class BindgenError(Exception):
    """Base class of every error the toolchain reports to its user.

    ``exit_code`` is what ``llama-bindgen`` exits with when this error ends a command.
    """

    exit_code = 1


class GateFailedError(BindgenError):
    """A gate (symbols, layout, smoke, ...) ran and failed."""


class GateNotRunError(BindgenError):
    """No gate failed, but one could not run here: not a pass."""

    exit_code = 3


class UsageError(BindgenError):
    """The command line or a configuration file asks for something impossible."""

    exit_code = 2


class SourceError(BindgenError):
    """No provider could deliver a verified llama.cpp tree."""

    exit_code = 2


class DigestMismatchError(SourceError):
    """A tree's content digest is not the pinned one."""

    def __init__(self, what: str, expected: str, actual: str, message: str = "") -> None:
        super().__init__(
            message or f"{what}: content digest mismatch: expected {expected}, got {actual}"
        )
        self.expected = expected
        self.actual = actual


class UnsafeArchiveError(SourceError):
    """An archive member would escape the extraction folder or is not a plain file or folder."""
