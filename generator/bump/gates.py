"""Per-platform verification gates of a bump: build, symbols, layout, smoke.

Each gate returns a :class:`GateOutcome`; none raises for a failed check, so the bump can report
every platform's every gate before it decides. Gates that cannot run (an earlier gate failed, a
prerequisite is missing) say so as ``not-run`` with the reason: only ``passed`` counts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from generator.emit import PACKAGE_NAME
from generator.emit.probes import probe_headers
from generator.errors import BindgenError
from generator.ir.interface import Interface
from generator.native.build import BuildResult, build_native, driverless_library_dirs
from generator.smoke.devices import driver_missing_reason
from generator.sources import mtmd_api
from generator.sources.tree import Tree
from generator.verify.layout_check import cffi_values, compare, ir_values
from generator.verify.layout_probe import ProbeError, probe_runner, run_probe
from generator.verify.symbols_gate import check_symbols

if TYPE_CHECKING:
    from generator.smoke import SmokeReport

PASSED = "passed"
FAILED = "failed"
NOT_RUN = "not-run"
GATES = ("build", "symbols", "layout", "smoke")


@dataclass(frozen=True)
class GateOutcome:
    gate: str
    status: str
    detail: str = ""
    log: Path | None = None
    seconds: float = 0.0  # how long the gate took (0 for one that did not run)


@dataclass(frozen=True)
class PlatformRun:
    """What the verify stage hands each gate."""

    platform: str
    tree: Tree
    api: Interface
    package_parent: Path  # folder holding the freshly generated llama_bindings/
    logs: Path
    build: BuildResult | None = None
    backend: str = "cpu"


Builder = Callable[[Path, str], BuildResult]
SmokeGate = Callable[[PlatformRun], GateOutcome]


def _write(log: Path, text: str) -> Path:
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(text, encoding="utf-8")
    return log


def build_gate(
    run: PlatformRun, builder: Builder | None = None
) -> tuple[GateOutcome, BuildResult | None]:
    """The build (by default build_native, given the bump's parse so it does not parse again)."""
    try:
        if builder is None:
            result = build_native(run.tree, run.platform, interface=run.api, backend=run.backend)
        else:
            result = builder(run.tree.root, run.platform)
    except BindgenError as exc:
        log = getattr(exc, "log", None)
        return GateOutcome("build", FAILED, str(exc), log if isinstance(log, Path) else None), None
    detail = f"mtp {result.mtp.describe()}"
    return GateOutcome("build", PASSED, detail, result.platform_dir / "build-info.json"), result


def symbols_gate(run: PlatformRun) -> GateOutcome:
    assert run.build is not None
    manifest = run.package_parent / PACKAGE_NAME / "abi_manifest.json"
    report = check_symbols(manifest, run.build)
    lines = [f"checked {report.checked} declared functions"]
    if run.backend != "cpu":
        backend_lib = run.build.platform.library_file(f"ggml-{run.backend}")
        if not (run.build.lib_dir / backend_lib).exists():
            log = _write(run.logs / "symbols.log", f"MISSING library {backend_lib}\n")
            return GateOutcome(
                "symbols", FAILED, f"the {run.backend} build has no {backend_lib}", log
            )
        lines.append(f"backend library {backend_lib} present")
    lines += [f"MISSING {m}" for m in report.missing]
    lines += [f"note: declared by ggml's headers, exported by no ggml library: {m}"
              for m in report.ggml_missing]  # fmt: skip
    log = _write(run.logs / "symbols.log", "\n".join(lines) + "\n")
    if report.passed:
        note = f"; {len(report.ggml_missing)} ggml declarations undefined upstream" if (
            report.ggml_missing) else ""  # fmt: skip
        return GateOutcome("symbols", PASSED, f"{report.checked} functions{note}", log)
    return GateOutcome(
        "symbols", FAILED, f"{len(report.missing)} missing: {', '.join(report.missing[:5])}", log
    )


_GUARD_CHECK = """
import sys
import llama_bindings
libs = llama_bindings.load(sys.argv[1])
print(int(libs.llama.llama_context_default_params().n_ctx))
"""


def _loading_env(run: PlatformRun) -> dict[str, str]:
    """The environment the loader check runs in: the bindings on the path and, for a GPU build
    whose driver this machine lacks (CUDA here), what loading it needs (loading checks the ABI,
    it runs nothing on a device)."""
    env = {**os.environ, "PYTHONPATH": str(run.package_parent)}
    if driver_missing_reason(run.backend) is not None:
        extra = [str(folder) for folder in driverless_library_dirs(run.backend)]
        env["LD_LIBRARY_PATH"] = os.pathsep.join([*extra, env.get("LD_LIBRARY_PATH", "")])
    return env


def layout_gate(run: PlatformRun, host_platform: str) -> GateOutcome:
    """Probe (real compiler) == clang IR for the platform's triple; on the host also == cffi, and
    the generated loader's ABI guard accepts the built libraries."""
    assert run.build is not None
    runner = probe_runner(run.build.platform)
    work = run.logs / "layout-probe"
    try:
        probe = run_probe(run.api, runner, _probe_includes(run), probe_headers(run.api), work)
    except ProbeError as exc:
        return GateOutcome("layout", FAILED, str(exc), work / "layout_probe.log")
    sources = {
        f"probe ({runner.how})": probe,
        f"clang {runner.triple}": ir_values(run.api, runner.triple),
    }
    if run.platform == host_platform:
        import cffi

        ffi = cffi.FFI()
        cdef = (run.package_parent / PACKAGE_NAME / "cdef.h").read_text(encoding="utf-8")
        ffi.cdef(cdef)
        sources["cffi"] = cffi_values(ffi, run.api, sorted(probe))
    problems = compare(sources)
    lines = [f"{len(probe)} measurements; sources: {', '.join(sources)}"]
    lines += [p.describe() for p in problems]
    if run.platform == host_platform and not problems:
        proc = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(_GUARD_CHECK), str(run.build.lib_dir)],
            cwd=run.package_parent,
            env=_loading_env(run),
            capture_output=True, text=True, check=False, timeout=600,
        )  # fmt: skip
        lines.append(f"ABI guard load: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
        if proc.returncode != 0:
            log = _write(run.logs / "layout.log", "\n".join(lines) + "\n")
            return GateOutcome("layout", FAILED, "the generated loader refused the build", log)
    log = _write(run.logs / "layout.log", "\n".join(lines) + "\n")
    if problems:
        return GateOutcome(
            "layout", FAILED, f"{len(problems)} disagreements: {problems[0].describe()}", log
        )
    return GateOutcome("layout", PASSED, f"{len(probe)} measurements agree ({runner.how})", log)


def _probe_includes(run: PlatformRun) -> list[Path]:
    """The build's include/ (llama.h, ggml's headers, llama_mtp.h) and, when the bindings carry
    libmtmd, the tree's folder of its headers."""
    assert run.build is not None
    extra = [mtmd_api.include_dir(run.tree.root)] if run.api.has_library(mtmd_api.LIBRARY) else []
    return [run.build.include_dir, *extra]


def smoke_gate(run: PlatformRun) -> GateOutcome:
    """Greedy generation with and without MTP on the test models (``generator.smoke``)."""
    return smoke_gate_with_report(run)[0]


def smoke_gate_with_report(
    run: PlatformRun, models_dir: Path | None = None
) -> tuple[GateOutcome, SmokeReport]:
    """The smoke gate, and the smoke's report (its checks and the modes it ran); ``models_dir``:
    the test models written beforehand (``smoke.write_test_models``)."""
    from generator.smoke import run_smoke, tree_image, vocabulary_for_tree

    assert run.build is not None
    report = run_smoke(
        run.platform,
        run.build.lib_dir,
        run.package_parent,
        run.logs / "smoke",
        backend=run.backend,
        vocabulary=vocabulary_for_tree(run.tree.root),
        image=tree_image(run.tree.root),
        models_dir=models_dir,
    )
    log = _write(run.logs / "smoke.log", report.table() + "\n")
    status = {"passed": PASSED, "failed": FAILED}.get(report.status, NOT_RUN)
    return GateOutcome("smoke", status, report.reason or report.status, log), report


def platform_gates(
    run: PlatformRun,
    host_platform: str,
    builder: Builder | None = None,
    smoke: SmokeGate = smoke_gate,
    progress: Callable[[str], None] | None = None,
) -> list[GateOutcome]:
    """Every gate of one platform, in order: build, then symbols, layout and smoke on what it
    built (each ``not-run`` when the build failed)."""
    start = time.perf_counter()
    built, result = build_gate(run, builder)
    built = replace(built, seconds=time.perf_counter() - start)
    if result is None:
        return [built, *(GateOutcome(g, NOT_RUN, "build failed") for g in GATES[1:])]
    if progress is not None:
        progress(f"{run.platform}: symbols, layout, smoke")
    verified = replace(run, build=result)
    checks: list[Callable[[], GateOutcome]] = [
        lambda: symbols_gate(verified),
        lambda: layout_gate(verified, host_platform),
        lambda: smoke(verified),
    ]
    return [built, *(_timed(check) for check in checks)]


def _timed(gate: Callable[[], GateOutcome]) -> GateOutcome:
    start = time.perf_counter()
    outcome = gate()
    return replace(outcome, seconds=time.perf_counter() - start)


def summarise(outcomes: dict[str, list[GateOutcome]]) -> str:
    """A plain-text table: one row per platform, one column per gate."""
    width = max([len("platform"), *(len(p) for p in outcomes)])
    head = f"{'platform':<{width}}  " + "  ".join(f"{g:<8}" for g in GATES)
    rows = [head, "-" * len(head)]
    for platform, results in outcomes.items():
        by_gate = {o.gate: o.status for o in results}
        rows.append(
            f"{platform:<{width}}  " + "  ".join(f"{by_gate.get(g, NOT_RUN):<8}" for g in GATES)
        )
    return "\n".join(rows)


def to_json(outcomes: dict[str, list[GateOutcome]]) -> str:
    return json.dumps(
        {
            p: [{"gate": o.gate, "status": o.status, "detail": o.detail,
                 "log": str(o.log) if o.log else "", "seconds": round(o.seconds, 3)}
                for o in results]
            for p, results in outcomes.items()
        },
        indent=2,
        sort_keys=True,
    )  # fmt: skip
