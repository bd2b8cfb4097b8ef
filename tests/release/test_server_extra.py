"""The wheels' ``server`` extra: what ``llama_bindings.server`` imports, declared in each wheel's
metadata as ``pip`` reads it, and the same list as pyproject.toml's ``server`` extra (what the
tests install)."""

from __future__ import annotations

import email
import tomllib

from packaging.requirements import Requirement

from generator.release.render import render
from generator.release.wheels import DEPENDENCIES, SERVER_DEPENDENCIES
from tests.repo import REPO_ROOT


def test_the_extra_is_pyprojects() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert tuple(project["project"]["optional-dependencies"]["server"]) == SERVER_DEPENDENCIES


def test_the_metadata_declares_the_extra() -> None:
    text = render(
        "release/wheel_metadata.j2", name="llama-bindings", version="1.0", tag="b1", commit="c",
        backend="cpu", platform="linux-x86_64", generator_version="0", requires_python=">=3.11",
        dependencies=list(DEPENDENCIES), extras={"server": SERVER_DEPENDENCIES},
    )  # fmt: skip
    meta = email.message_from_string(text)
    assert meta.get_all("Provides-Extra") == ["server"]
    required = [Requirement(r) for r in meta.get_all("Requires-Dist") or []]
    always = [str(r) for r in required if r.marker is None]
    server = [r for r in required if r.marker is not None]
    assert always == list(DEPENDENCIES)
    assert [f"{r.name}{r.specifier}" for r in server] == [
        str(Requirement(d)) for d in SERVER_DEPENDENCIES
    ]
    assert all(r.marker is not None and r.marker.evaluate({"extra": "server"}) for r in server)
    assert not any(r.marker is not None and r.marker.evaluate({"extra": ""}) for r in server)
