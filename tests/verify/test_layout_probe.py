"""The layout probe, compiled by each platform's real compiler, agrees with clang's IR layout;
and a header that moved a field is caught, field by field."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from generator.emit.probes import probe_headers
from generator.ir.interface import Interface
from generator.parse.frontend import parse_interface, tree_source
from generator.parse.options import ParseOptions
from generator.platforms import get_platform
from generator.sources import mtmd_api
from generator.verify.layout_check import compare, ir_values
from generator.verify.layout_probe import (
    MAGIC,
    ProbeError,
    ProbeRunner,
    read_values_from_binary,
    run_probe,
)
from generator.verify.layout_probe import probe_runner as registry_probe_runner

PLATFORMS = ("linux-x86_64", "linux-aarch64", "windows-x86_64", "macos-arm64")
# built here (zig) but never run here: its probe is read from the compiled object
READ_NOT_RUN = ("macos-arm64",)


def probe_runner(name: str) -> ProbeRunner:
    return registry_probe_runner(get_platform(name))


@pytest.fixture(scope="module")
def interface(tree_pin: Path) -> Interface:
    options = ParseOptions(tree=tree_pin)
    return parse_interface(options, tree_source(tree_pin))


def includes(tree: Path) -> list[Path]:
    return [tree / "include", tree / "ggml" / "include", mtmd_api.include_dir(tree)]


@pytest.mark.parametrize("platform", PLATFORMS)
def test_probe_agrees_with_clang(
    platform: str, interface: Interface, tree_pin: Path, tmp_path: Path
) -> None:
    runner = probe_runner(platform)
    # every platform run here runs its probe program (natively, qemu, wine)
    assert (runner.run_prefix is None) == (platform in READ_NOT_RUN), runner.how
    probe = run_probe(interface, runner, includes(tree_pin), probe_headers(interface), tmp_path)
    clang = ir_values(interface, runner.triple)
    problems = compare({f"probe ({runner.how})": probe, f"clang {runner.triple}": clang})
    assert not problems, "\n".join(p.describe() for p in problems)
    # the fields this project exists for are among what was measured
    assert ("offset", "llama_context_params", "n_rs_seq") in probe
    assert ("offset", "llama_context_params", "ctx_type") in probe
    assert len(probe) > 300
    # libmtmd's structs too (mtmd.h, mtmd-helper.h), from the tree's tools/mtmd
    assert ("offset", "mtmd_context_params", "media_marker") in probe
    assert ("size", "mtmd_helper_init_opt") in probe


def test_inserted_field_is_caught(interface: Interface, tree_pin: Path, tmp_path: Path) -> None:
    """A tree whose llama_context_params gained a field, probed against the unmodified IR."""
    shadow = tmp_path / "include"
    shadow.mkdir()
    header = (tree_pin / "include" / "llama.h").read_text()
    anchor = "        uint32_t n_rs_seq;"
    assert header.count(anchor) == 1
    # a field inserted before n_rs_seq: everything after it moves, as in a real upstream bump
    shadow.joinpath("llama.h").write_text(
        header.replace(anchor, "        uint64_t inserted_by_test;\n" + anchor, 1)
    )
    runner = probe_runner("linux-x86_64")
    probe = run_probe(
        interface,
        runner,
        [shadow, *includes(tree_pin)[1:]],
        probe_headers(interface),
        tmp_path / "w",
    )
    problems = compare({"probe": probe, "clang": ir_values(interface, runner.triple)})
    named = {p.key for p in problems}
    for fld in ("n_rs_seq", "ctx_type"):
        assert ("offset", "llama_context_params", fld) in named
    assert ("size", "llama_context_params") in named
    assert all(k[1] == "llama_context_params" for k in named), named
    text = "\n".join(p.describe() for p in problems)
    assert "offsetof(llama_context_params, ctx_type): probe = " in text


def test_reader_finds_exactly_one_array() -> None:
    words = [*MAGIC, 3, 7, 8, 9]
    blob = b"junk" + b"".join(struct.pack("<Q", w) for w in words) + b"tail"
    assert read_values_from_binary(blob, 3) == [7, 8, 9]
    with pytest.raises(ProbeError, match="not found"):
        read_values_from_binary(blob, 4)
    with pytest.raises(ProbeError, match="twice"):
        read_values_from_binary(blob + blob, 3)
    with pytest.raises(ProbeError, match="truncated"):
        read_values_from_binary(blob[: -(4 + 16)], 3)


def test_cross_toolchains_present() -> None:
    """The cross-platform layout tests need these; CI installs them (they must not be skipped)."""
    for tool in ("gcc", "aarch64-linux-gnu-gcc", "qemu-aarch64", "x86_64-w64-mingw32-gcc"):
        assert shutil.which(tool), f"{tool} missing: .ci/run installs it"
