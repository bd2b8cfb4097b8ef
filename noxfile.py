"""Thin nox sessions over the ``llama-bindgen`` CLI. Each session installs the project itself."""

from __future__ import annotations

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "tests"]

# The llama.cpp trees the test suite reads; fetched (and verified) before pytest runs.
TEST_TREES = ("b11312", "63d93d1")
LINTED = ("generator", "tests", "noxfile.py")


def _install(session: nox.Session) -> None:
    session.install("-e", ".[dev]")


@nox.session
def bump(session: nox.Session) -> None:
    """Bump to a llama.cpp release: ``nox -s bump -- b11312``."""
    if not session.posargs:
        session.error("usage: nox -s bump -- REF   (a tag such as b11312, or a commit)")
    _install(session)
    session.run("llama-bindgen", "bump", *session.posargs)


@nox.session
def fetch(session: nox.Session) -> None:
    """Fetch and verify a llama.cpp tree: ``nox -s fetch -- b11312``."""
    _install(session)
    session.run("llama-bindgen", "fetch", *(session.posargs or ["b11312"]))


@nox.session
def tests(session: nox.Session) -> None:
    """The whole test suite (fetches the test trees first; later runs use the cache)."""
    _install(session)
    for ref in TEST_TREES:
        session.run("llama-bindgen", "fetch", ref, silent=True)
    session.run("pytest", *(session.posargs or ["-ra"]))


@nox.session
def lint(session: nox.Session) -> None:
    """ruff and mypy --strict over the toolchain and the emitted bindings."""
    _install(session)
    session.run("ruff", "check", *LINTED)
    session.run("ruff", "format", "--check", *LINTED)
    session.run("mypy", "generator")
