"""``llama-bindgen gpu-check``: the prepared check of the CUDA backend on a machine with an
NVIDIA GPU and no network (``prepare`` here, ``run`` there; ``tools/gpu-check`` runs it)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from generator.emit import PACKAGE_NAME
from generator.errors import UsageError

DEFAULT_KIT = Path("gpu-kit")


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "gpu-check",
        help="prepare or run the GPU check (CUDA gates and smoke on an NVIDIA GPU, offline)",
        description=(
            "prepare: write the kit (the pinned tree trimmed to what the builds read, the "
            "Python wheels the build and gates import, the smoke's test models) into --kit and "
            "print its size. run: on a machine with an NVIDIA GPU, build the CUDA backend for "
            "that GPU's architecture, run the gates (build, symbols, layout with the ABI guard, "
            "smoke) and write gpu-check.json into --out; exit 0 passed, 1 failed, 3 not run "
            "here (no NVIDIA driver, no nvcc). --backend cpu is a dry run of the kit."
        ),
    )
    actions = parser.add_subparsers(dest="action", required=True)
    prepare = actions.add_parser("prepare", help="write the kit (here, with network)")
    prepare.add_argument("--tree", type=Path, required=True, help="the pinned tree (`fetch`)")
    prepare.add_argument("--kit", type=Path, default=DEFAULT_KIT, help="kit folder (gpu-kit)")
    prepare.set_defaults(func=run_prepare)
    run = actions.add_parser("run", help="run the check from a kit (on the GPU machine)")
    run.add_argument("--kit", type=Path, default=DEFAULT_KIT, help="kit folder (gpu-kit)")
    run.add_argument("--out", type=Path, required=True, help="folder for gpu-check.json")
    run.add_argument("--work", type=Path, default=None,
                     help="tree and build folder (default: <cache>/gpu-check)")  # fmt: skip
    run.add_argument("--backend", choices=("cuda", "cpu"), default="cuda",
                     help="cuda, or cpu for a dry run of the kit (no GPU checked)")  # fmt: skip
    run.add_argument("--cuda-arch", default=None, help="default: the GPU's (nvidia-smi)")
    run.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 2)
    run.add_argument(
        "--bindings", type=Path, default=None,
        help=f"folder containing {PACKAGE_NAME}/ (default: <repo>/generated)",
    )  # fmt: skip
    run.add_argument("--installed", default="", help="how the packages were installed")
    run.add_argument("--install-seconds", type=float, default=None)
    run.set_defaults(func=run_check)


def run_prepare(args: argparse.Namespace) -> int:
    from generator.gpu_check.kit import prepare_kit
    from generator.sources.tree import Tree

    manifest = prepare_kit(Tree.read(args.tree), args.kit)
    print(f"tree: {manifest['tree']['provider']} ({manifest['tree']['digest']})")
    print(f"models: {', '.join(manifest['models'])} ({manifest['vocabulary']} vocabulary)")
    print(f"wheels: {len(manifest['wheels'])} for CPython {', '.join(manifest['python_versions'])}")
    print(f"size: {manifest['bytes']} bytes ({manifest['bytes'] / 2**20:.1f} MiB)")
    print(args.kit.resolve())
    return 0


def run_check(args: argparse.Namespace) -> int:
    from generator.gpu_check.kit import read_kit
    from generator.gpu_check.run import RunOptions
    from generator.gpu_check.run import run_check as check
    from generator.paths import checkout_generated, default_cache_dir

    read_kit(args.kit)  # a missing kit is a usage error, before anything is written
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    options = RunOptions(
        kit=args.kit.resolve(),
        out=args.out.resolve(),
        work=(args.work or default_cache_dir() / "gpu-check").resolve(),
        bindings=(args.bindings or checkout_generated("gpu-check run")).resolve(),
        backend=args.backend,
        jobs=args.jobs,
        cuda_arch=args.cuda_arch,
        installed=args.installed,
        install_seconds=args.install_seconds,
    )
    report = check(options)
    print(f"gpu-check: {report.status}" + (f" ({report.reason})" if report.reason else ""))
    print(options.out / "gpu-check.json", file=sys.stderr)
    return report.exit_code
