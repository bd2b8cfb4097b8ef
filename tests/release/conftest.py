"""The native build fixture, shared with tests/native."""

from tests.native.conftest import native_build

__all__ = ["native_build"]
