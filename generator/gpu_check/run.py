"""``run``: the GPU check on the machine with the GPU (no network there), from a kit.

Stages, each timed in the report: ``gpu`` (nvidia-smi: which GPU, which architecture; a machine
without an NVIDIA driver, or without nvcc, stops here, ``not-run``), ``tree`` (the kit's trimmed
tree extracted and its digest checked), then the gates (``build``: the CUDA backend for that
architecture only; ``symbols``; ``layout``: the compiled probe vs clang's layouts in ``ir.json``
vs cffi, and the generated loader's ABI guard; ``smoke``: greedy, draft-mtp with backend sampling
on the device, every strategy and a mix, on the kit's test models). The interface is the
committed ``generated/llama_bindings/ir.json``: nothing is parsed, libclang is not needed.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.bump.gates import GateOutcome, PlatformRun, platform_gates, smoke_gate_with_report
from generator.emit import PACKAGE_NAME
from generator.errors import UsageError
from generator.gpu_check.gpu import query_gpus, tool_version
from generator.gpu_check.kit import MODELS, TREE_ARCHIVE, TREE_FOLDER, read_kit
from generator.gpu_check.report import NOT_RUN, Report, overall_status
from generator.ir.interface import Interface
from generator.native.build import BuildResult, backend_missing_tools, build_native, cuda_compiler
from generator.platforms import host_platform_name
from generator.releases import UNKNOWN_COMMIT
from generator.smoke.devices import driver_missing_reason
from generator.sources.digest import tree_digest
from generator.sources.extract import safe_extract
from generator.sources.tree import Tree
from generator.sources.tree_metadata import load_tree_metadata

PLATFORM = "linux-x86_64"
LOG_TAIL = 3000


@dataclass(frozen=True)
class RunOptions:
    kit: Path
    out: Path  # the report and the gates' logs
    work: Path  # the extracted tree and the build
    bindings: Path  # the folder holding llama_bindings/
    backend: str = "cuda"
    jobs: int = 16
    cuda_arch: str | None = None  # None: the GPU's own
    installed: str = ""  # how the Python packages were installed (the script says)
    install_seconds: float | None = None


def _machine(options: RunOptions) -> dict[str, Any]:
    return {
        "python": f"{platform.python_version()} ({sys.executable})",
        "installed": options.installed,
        "host": f"{platform.system()} {platform.machine()} ({platform.platform()})",
        "nvcc": tool_version(cuda_compiler()),
    }


def _gpu_stage(report: Report, options: RunOptions) -> str | None:
    """Fill the report's ``gpu``; the CUDA architecture to build for, None when this machine
    cannot run the check (the report's reason then says why)."""
    gpus, why = query_gpus()
    report.gpu = {"gpus": [vars(g) for g in gpus], "nvidia_smi": why or "ok"}
    why = why or driver_missing_reason("cuda") or backend_missing_tools("cuda")
    if why:
        report.reason = why
        return None
    arch = options.cuda_arch or gpus[0].cuda_arch
    report.gpu |= {"name": gpus[0].name, "driver_version": gpus[0].driver_version,
                   "compute_cap": gpus[0].compute_cap, "cuda_arch": arch}  # fmt: skip
    return arch


def _tree_stage(kit: dict[str, Any], options: RunOptions) -> Tree:
    """The kit's tree in ``work/tree`` (extracted again unless it is there with the kit's
    digest), its digest checked."""
    want = kit["tree"]["digest"]
    folder = options.work / TREE_FOLDER
    meta = load_tree_metadata(folder) if folder.is_dir() else None
    if meta is None or meta.get("digest") != want or tree_digest(folder) != want:
        if folder.exists():
            import shutil

            shutil.rmtree(folder)
        safe_extract(options.kit / TREE_ARCHIVE, folder, TREE_FOLDER)
        got = tree_digest(folder)
        if got != want:
            raise UsageError(f"the kit's tree has digest {got}, its manifest says {want}")
    return Tree.read(folder)


def bindings_interface(bindings: Path, tree: Tree) -> Interface:
    """The committed bindings' interface (``ir.json``), made from ``tree``'s commit."""
    package = bindings / PACKAGE_NAME
    manifest = json.loads((package / "abi_manifest.json").read_text(encoding="utf-8"))
    # a tree whose source states no commit (a PyPI sdist) is named by its tag: the kit's trimmed
    # copy names another source in its label, so only a known commit is compared
    same = (
        manifest.get("commit") == tree.commit
        if tree.commit
        else manifest.get("tag") == tree.tag
        and str(manifest.get("commit")).startswith(UNKNOWN_COMMIT)
    )
    if not same:
        raise UsageError(
            f"{package} is for commit {manifest.get('commit')}, the kit's tree is "
            f"{tree.commit_label}: prepare the kit from the pinned tree"
        )
    return Interface.load(package / "ir.json")


def _gate_record(outcome: GateOutcome) -> dict[str, Any]:
    record: dict[str, Any] = {"status": outcome.status, "detail": outcome.detail,
                              "seconds": round(outcome.seconds, 3)}  # fmt: skip
    if outcome.status != "passed" and outcome.log is not None and outcome.log.is_file():
        text = outcome.log.read_text(encoding="utf-8", errors="replace")
        record["log_tail"] = text[-LOG_TAIL:]
    return record


def smoke_record(smoke: dict[str, Any]) -> dict[str, Any]:
    """The smoke's report with what a GPU check looks for pulled out: the device the models ran
    on (the smoke's ``a CUDA device is present`` check) and whether the MTP drafts were sampled
    on the backend (its note)."""
    device = [
        c["detail"] for c in smoke.get("checks", []) if c["name"].endswith("device is present")
    ]
    sampling = [n for n in smoke.get("notes", []) if n.startswith("backend sampling")]
    return {
        "device": device[0] if device else "",
        "backend_sampling": sampling[0] if sampling else "",
        "backend_sampling_on": bool(sampling) and sampling[0].startswith("backend sampling on"),
        **smoke,
    }


def _gates(
    report: Report, options: RunOptions, tree: Tree, api: Interface, arch: str | None
) -> None:
    """Build and gate (``platform_gates``), filling the report's gates, smoke and timings."""
    smoke: dict[str, Any] = {}

    def builder(root: Path, name: str) -> BuildResult:
        report.stage("build")
        return build_native(root, name, out=options.work / "native", jobs=options.jobs,
                            interface=api, backend=options.backend, cuda_arch=arch)  # fmt: skip

    def smoke_gate(run: PlatformRun) -> GateOutcome:
        report.stage("smoke")
        outcome, found = smoke_gate_with_report(run, models_dir=options.kit / MODELS)
        smoke.update(found.to_json())
        return outcome

    logs = options.out / "logs"
    run = PlatformRun(PLATFORM, tree, api, options.bindings, logs, backend=options.backend)

    def progress(text: str) -> None:  # after the build: symbols, layout, smoke
        print(f"gpu-check: {text}", file=sys.stderr, flush=True)
        report.stage("the gates after the build (symbols, layout)")

    outcomes = platform_gates(run, host_platform_name(), builder, smoke_gate, progress)
    report.gates = {o.gate: _gate_record(o) for o in outcomes}
    report.timings |= {o.gate: round(o.seconds, 3) for o in outcomes}
    report.smoke = smoke_record(smoke) if smoke else {}


def run_check(options: RunOptions) -> Report:
    """The GPU check (or, ``backend`` cpu, its dry run); the report, written into ``out``."""
    report = Report(options.backend, options.out)
    if options.install_seconds is not None:
        report.timings["install"] = round(options.install_seconds, 3)
    report.machine = _machine(options)
    report.stage("gpu")
    kit = read_kit(options.kit)
    if host_platform_name() != PLATFORM:
        report.finish(NOT_RUN, f"the check runs on {PLATFORM}, this is {host_platform_name()}")
        return report
    arch = None
    if options.backend == "cuda":
        since = time.monotonic()
        arch = _gpu_stage(report, options)
        report.timed("gpu", since)
        if arch is None:
            report.finish(NOT_RUN, report.reason)
            return report
    since = time.monotonic()
    report.stage("tree")
    tree = _tree_stage(kit, options)
    report.tree = {**kit["tree"], "root": str(tree.root), "vocabulary": kit["vocabulary"]}
    api = bindings_interface(options.bindings, tree)
    report.timed("tree", since)
    _gates(report, options, tree, api, arch)
    status = overall_status({gate: record["status"] for gate, record in report.gates.items()})
    reasons = [f"{g} {r['status']}: {r['detail']}" for g, r in report.gates.items()
               if r["status"] != "passed"]  # fmt: skip
    report.finish(status, "; ".join(reasons))
    return report
