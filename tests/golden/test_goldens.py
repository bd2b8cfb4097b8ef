"""The emitter against committed expectations, one small header per C construct, no llama.cpp
tree needed. A mismatch fails with a unified diff; `python -m tests.golden --update` accepts it."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import cffi
import pytest

from tests.gen.host import host_triple
from tests.golden import harness

STEMS = harness.header_stems()
_rendered: dict[str, dict[str, str]] = {}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("golden")


def _render(stem: str, scratch: Path) -> dict[str, str]:
    """Each header is parsed and rendered once per session."""
    if stem not in _rendered:
        _rendered[stem] = harness.render(stem, scratch / stem)
    return _rendered[stem]


def test_there_are_headers() -> None:
    assert len(STEMS) >= 10, f"golden headers missing from {harness.HEADERS}"


@pytest.mark.parametrize("stem", STEMS)
def test_matches_expectations(stem: str, scratch: Path) -> None:
    problems = harness.mismatches(stem, _render(stem, scratch))
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


def test_every_expectation_is_checked() -> None:
    """No expectation folder without its header, no file that nothing compares."""
    problems = harness.orphans()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def _ffi(files: dict[str, str], how: str) -> Any:
    """The cffi ``FFI`` of the emitted declarations: parsed from ``cdef.h`` (in-line), or the
    emitted out-of-line module's (pre-parsed, as the bindings import it)."""
    if how == "pre-parsed":
        namespace: dict[str, Any] = {}
        exec(compile(files["_ffi_abi.py"], "_ffi_abi.py", "exec"), namespace)
        return namespace["ffi"]
    ffi = cffi.FFI()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # cffi warns when it has to guess
        ffi.cdef(files["cdef.h"])
    return ffi


@pytest.mark.parametrize("how", ["in-line", "pre-parsed"])
@pytest.mark.parametrize("stem", STEMS)
def test_cffi_lays_out_the_cdef_as_clang(stem: str, how: str, scratch: Path) -> None:
    """Every record the cdef defines has, in cffi, the size, alignment and member offsets clang
    gave for this machine: a record cffi would lay out differently must stay out of the cdef.
    The same holds for the pre-parsed module, whose tables leave layout to the backend."""
    files = _render(stem, scratch)
    layouts: dict[str, Any] = json.loads(files["abi_manifest.json"])["targets"]
    triple = host_triple()
    if triple not in layouts:
        pytest.skip(f"cffi lays out for this machine ({triple}), not one of {harness.TARGETS}")
    cdef = files["cdef.h"]
    ffi = _ffi(files, how)
    for name, layout in layouts[triple]["structs"].items():
        tagged = f"{layout['kind']} {name}"
        if f"{tagged} {{" in cdef:
            c_name = tagged
        elif f"}} {name};" in cdef:
            c_name = name  # typedef struct { ... } name;
        else:
            continue  # opaque in the cdef: cffi knows no layout, none to compare
        got = {"size": ffi.sizeof(c_name), "align": ffi.alignof(c_name)}
        assert got == {"size": layout["size"], "align": layout["align"]}, name
        for member in layout["fields"]:
            if "bit_width" not in member:
                assert ffi.offsetof(c_name, member["name"]) == member["offset"], (name, member)
