"""The layout probe, compiled by a platform's real compiler (``emit.probes`` writes its source).

It records ``sizeof``/``_Alignof`` of every struct and union the IR lays out, ``offsetof`` of every
named non-bit-field member, and ``sizeof`` of every enum, in one array behind a magic marker.
The values come back either by running the program (natively, or under qemu) or, where the
platform's binaries cannot run here, by reading the array out of the compiled object file: the
numbers are then still the real compiler's, only not executed.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from generator.emit.probes import MAGIC, render_probe
from generator.errors import BindgenError
from generator.ir.interface import Interface
from generator.native.host import execution_here, host_toolchain
from generator.platforms import CannotRunError, Platform

_WORD = struct.Struct("<Q")


class ProbeError(BindgenError):
    """The probe did not compile, did not run, or its output cannot be read."""


@dataclass(frozen=True)
class ProbeRunner:
    """How one platform compiles the probe and gets its numbers back."""

    platform: str
    triple: str  # the IR target whose clang layout this platform must match
    compiler: str
    run_prefix: tuple[str, ...] | None  # None: read the compiled object instead of running
    how: str  # words for reports: "ran natively", "ran under qemu-aarch64", ...
    env: Mapping[str, str] = field(default_factory=dict)  # added to the run's environment
    exe_suffix: str = ""


def probe_runner(plat: Platform) -> ProbeRunner:
    """The probe for ``plat`` on this machine: compiled by the toolchain that builds it here,
    run where the registry says its programs run, else read from the compiled object."""
    compiler = host_toolchain(plat).c_compiler
    suffix = ".exe" if plat.binary_format == "pe" else ""
    try:
        run = execution_here(plat)
    except CannotRunError as exc:
        how = f"read from the compiled object (not executed: {exc})"
        return ProbeRunner(plat.name, plat.layout_triple, compiler, None, how)
    return ProbeRunner(
        plat.name, plat.layout_triple, compiler, run.prefix, f"ran {run.how}", run.env, suffix
    )


def read_values_from_binary(blob: bytes, count: int) -> list[int]:
    """Find the magic marker in a compiled object or executable and read the array after it."""
    marker = _WORD.pack(MAGIC[0]) + _WORD.pack(MAGIC[1]) + _WORD.pack(count)
    at = blob.find(marker)
    if at < 0:
        raise ProbeError("layout probe array not found in the compiled object")
    if blob.find(marker, at + 1) >= 0:
        raise ProbeError("layout probe array found twice in the compiled object")
    start = at + len(marker)
    end = start + count * _WORD.size
    if end > len(blob):
        raise ProbeError("layout probe array is truncated in the compiled object")
    return [_WORD.unpack_from(blob, start + i * _WORD.size)[0] for i in range(count)]


def _run(cmd: list[str], what: str, log: Path, env: Mapping[str, str] | None = None) -> str:
    full_env = {**os.environ, **env} if env else None
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=full_env)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}\n")
    if proc.returncode != 0:
        raise ProbeError(f"layout probe: {what} failed (exit {proc.returncode}); log: {log}")
    return proc.stdout


def run_probe(
    interface: Interface,
    runner: ProbeRunner,
    include_dirs: list[Path],
    headers: list[str],
    workdir: Path,
) -> dict[tuple[str, ...], int]:
    """Compile the probe for ``runner`` and return its measurements by key."""
    if shutil.which(runner.compiler) is None:
        raise ProbeError(f"{runner.platform}: compiler {runner.compiler} not found")
    workdir.mkdir(parents=True, exist_ok=True)
    source, values = render_probe(interface, runner.triple, headers)
    src = workdir / "layout_probe.c"
    src.write_text(source, encoding="utf-8")
    log = workdir / "layout_probe.log"
    log.write_text("", encoding="utf-8")
    incs = [f"-I{d}" for d in include_dirs]
    if runner.run_prefix is None:
        obj = workdir / "layout_probe.o"
        _run([runner.compiler, "-std=c11", "-c", *incs, str(src), "-o", str(obj)], "compile", log)
        numbers = read_values_from_binary(obj.read_bytes(), len(values))
    else:
        exe = workdir / f"layout_probe{runner.exe_suffix}"
        _run([runner.compiler, "-std=c11", *incs, str(src), "-o", str(exe)], "compile", log)
        out = _run([*runner.run_prefix, str(exe)], f"run ({runner.how})", log, runner.env)
        try:
            numbers = [int(line) for line in out.split()]
        except ValueError as exc:
            raise ProbeError(f"layout probe printed something that is not a number: {exc}") from exc
    if len(numbers) != len(values):
        raise ProbeError(f"layout probe gave {len(numbers)} values, expected {len(values)}")
    return {v.key: n for v, n in zip(values, numbers, strict=True)}
