"""Each golden header's layouts three ways: clang's (the IR and the ABI manifest), the host C
compiler's (the layout probe, compiled and run) and cffi's (the emitted cdef, loaded): every
record and enum the probe measures has clang's values in the compiled probe, and every record the
cdef lays out has them in cffi too. A record cffi would lay out otherwise is in the cdef only as
an opaque declaration (``emit.cffi_layouts``), which this test sees as not laid out."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import cffi
import pytest

from generator.emit.cdef import build_cdef, declarations_text
from generator.emit.probes import expected_values, key_text
from generator.ir import Interface
from generator.native.host import host_toolchain, zig_toolchain
from generator.parse.frontend import HOST_TARGET, ParseOptions, parse_interface
from generator.platforms import get_platform
from generator.verify.layout_probe import ProbeRunner, probe_runner, run_probe
from tests.golden.harness import HEADERS, SOURCE, TARGETS, header_stems

# Headers with constructs gcc does not take (enum e : uint8_t before C23, __fp16 on x86_64):
# their probe is compiled by zig's clang (PyPI ziglang, a dev dependency) instead of gcc.
CLANG_ONLY = frozenset({"enum_types", "unbindable_types"})


def _runner(stem: str) -> ProbeRunner:
    """The host's probe (gcc, run natively), or the same with zig's clang as the compiler."""
    plat = get_platform("linux-x86_64")
    runner = probe_runner(plat)
    if stem not in CLANG_ONLY:
        return runner
    zig = zig_toolchain(dataclasses.replace(host_toolchain(plat), zig_target="x86_64-linux-gnu"))
    assert zig.zig_target and zig.c_compiler != runner.compiler, "ziglang is not installed"
    return dataclasses.replace(runner, compiler=zig.c_compiler, how="zig cc, ran natively")


def _interface(stem: str, work: Path) -> tuple[Interface, Path]:
    header = HEADERS / f"{stem}.h"
    include = work / "include"
    include.mkdir(parents=True)
    (work / "ggml" / "include").mkdir(parents=True)
    shutil.copy2(header, include / header.name)
    (include / "llama.h").write_text(f'#include "{header.name}"\n', encoding="utf-8")
    options = ParseOptions(tree=work, wrapper_header=None, targets=TARGETS)
    return parse_interface(options, SOURCE), include


def _cffi_values(api: Interface) -> dict[str, int]:
    """cffi's size of each enum type the cdef names, and its size, alignment and field offsets of
    each record the cdef lays out, by probe key."""
    cdef = build_cdef(api)
    ffi = cffi.FFI()
    ffi.cdef(declarations_text(cdef))
    found: dict[str, int] = {}
    text = declarations_text(cdef)
    for enum in api.enums:  # an enum type the cdef defines has the compiler's size
        defined = f"enum {enum.name} {{" in text or f"}} {enum.name};" in text
        if defined and HOST_TARGET in enum.sizes:
            found[key_text(("enum", enum.name))] = int(ffi.sizeof(enum.c_name))
    for record in cdef.bound_records:
        layout = record.layouts.get(HOST_TARGET)
        if record.opaque or layout is None:
            continue
        name = record.c_name
        found[key_text(("size", record.name))] = int(ffi.sizeof(name))
        found[key_text(("align", record.name))] = int(ffi.alignof(name))
        for member in layout.fields:
            if member.bit_width is None:
                key = key_text(("offset", record.name, member.name))
                found[key] = int(ffi.offsetof(name, member.name))
    return found


@pytest.mark.parametrize("stem", header_stems())
def test_clang_the_compiler_and_cffi_agree(stem: str, tmp_path: Path) -> None:
    api, include = _interface(stem, tmp_path / "tree")
    clang = expected_values(api, HOST_TARGET)
    runner = _runner(stem)
    measured = run_probe(api, runner, [include], [f"{stem}.h"], tmp_path / "probe")
    compiled = {key_text(key): value for key, value in measured.items()}
    assert compiled == clang, f"{runner.compiler} and clang disagree on {stem}.h"
    laid_out: dict[str, Any] = _cffi_values(api)
    assert laid_out == {key: clang[key] for key in laid_out}, f"cffi and clang disagree on {stem}.h"
