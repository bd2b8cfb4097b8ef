"""The target triple of the machine running the tests, for comparing cffi with clang."""

from __future__ import annotations

import platform
import sys

import pytest

_HOSTS = {
    ("linux", "x86_64"): "x86_64-linux-gnu",
    ("linux", "aarch64"): "aarch64-linux-gnu",
    ("darwin", "arm64"): "arm64-apple-darwin",
    ("darwin", "x86_64"): "x86_64-apple-darwin",
    ("win32", "amd64"): "x86_64-pc-windows-msvc",
    ("win32", "arm64"): "aarch64-pc-windows-msvc",
}


def host_triple() -> str:
    key = (sys.platform, platform.machine().lower())
    if key not in _HOSTS:
        pytest.fail(f"no target triple known for host {key}; add it to tests/gen/host.py")
    return _HOSTS[key]
