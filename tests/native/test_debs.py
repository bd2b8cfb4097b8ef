"""generator.debs: private-state apt downloads; failures carry the caller's error type."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from generator.debs import fetch_and_unpack
from generator.errors import BindgenError


class _CallerError(BindgenError):
    pass


def _fake_tools(bin_dir: Path, apt_script: str) -> None:
    bin_dir.mkdir()
    for name, body in (("apt-get", apt_script), ("dpkg", "exit 0")):
        tool = bin_dir / name
        tool.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
        tool.chmod(0o755)


def test_a_failed_download_raises_the_caller_s_error_naming_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # update succeeds, download fails the way apt does for an unknown package
    _fake_tools(
        tmp_path / "bin",
        'for a in "$@"; do [ "$a" = download ] && { echo "E: Unable to locate package nope" >&2; '
        "exit 100; }; done; exit 0",
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(_CallerError, match=r"apt-get download of test packages failed \(100\)"):
        fetch_and_unpack(
            tmp_path / "work", ["nope"], tmp_path / "root", what="test packages",
            error=_CallerError,
        )  # fmt: skip


def test_private_sources_and_options_reach_apt_and_the_state_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """apt gets the caller's options and a sources part of its own; the downloaded .deb is
    unpacked, and the private apt state and .deb files are gone afterwards."""
    log = tmp_path / "apt.log"
    _fake_tools(
        tmp_path / "bin",
        f'echo "$@" >> {log}; '
        'for a in "$@"; do [ "$a" = download ] && touch pkg_1_all.deb; done; exit 0',
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    work = tmp_path / "work"
    unpacked = fetch_and_unpack(
        work, ["pkg"], tmp_path / "root", what="pkg", sources="Types: deb\n",
        apt_options=["-o", "APT::Architecture=arm64"],
    )  # fmt: skip
    assert unpacked == ["pkg_1_all.deb"]
    calls = log.read_text(encoding="utf-8").splitlines()
    assert len(calls) == 2 and calls[0].endswith(" update") and calls[1].endswith("download pkg")
    assert all(
        "APT::Architecture=arm64" in c and "Dir::Etc::SourceList=/dev/null" in c for c in calls
    )
    assert sorted(p.name for p in work.iterdir()) == []
