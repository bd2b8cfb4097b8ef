"""``llama-bindgen smoke``: greedy generation with and without MTP through the generated runtime."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from generator.emit import PACKAGE_NAME
from generator.errors import GateFailedError, GateNotRunError, UsageError
from generator.paths import checkout_generated
from generator.platforms import BUILT_BACKENDS, PLATFORMS, REFERENCE_PLATFORM
from generator.releases import UNKNOWN_COMMIT


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "smoke",
        help="generate with and without MTP on test models (or a real MTP GGUF) and compare",
        description=(
            "Run greedy generation with and without MTP speculative decoding where the "
            "platform's programs run here: through the generated "
            f"{PACKAGE_NAME}.runtime on the platform's own Python (natively; linux-aarch64 under "
            "qemu with Debian's arm64 Python), or through a C driver compiled for the platform "
            "where no Python for it exists here (windows-x86_64 under wine). Checks identical "
            "output, drafted > 0, accepted > 0, 0 < acceptance < 1 on the partial test model "
            "and the typed refusal for a model without NextN layers; prints a table of the "
            "metrics. Libraries come from --lib-dir or from `llama-bindgen build` (reused when "
            "up to date). Exit 1 when a check fails, 3 when a platform cannot run here (macOS, "
            "Android, Windows on Arm: not-run, with the reason)."
        ),
    )
    parser.add_argument(
        "--platform", action="append", choices=sorted(PLATFORMS), default=None,
        help=f"platform to smoke-test (repeatable; default {REFERENCE_PLATFORM})",
    )  # fmt: skip
    parser.add_argument(
        "--tree",
        type=Path,
        default=None,
        help="llama.cpp tree to build (default: fetch the bindings' commit)",
    )
    parser.add_argument(
        "--backend",
        default="cpu",
        choices=list(BUILT_BACKENDS),
        help="compute backend to smoke-test (vulkan: every layer on the Vulkan device; here "
        "Mesa's lavapipe unless VK_ICD_FILENAMES names another driver)",
    )
    parser.add_argument(
        "--lib-dir",
        type=Path,
        default=None,
        help="use these libraries instead of building (one platform only)",
    )
    parser.add_argument(
        "--bindings",
        type=Path,
        default=None,
        help=f"folder containing {PACKAGE_NAME}/ (default: <repo>/generated)",
    )
    parser.add_argument(
        "--model",
        type=Path,
        default=None,
        help="a real MTP GGUF to compare on instead of the test models",
    )
    parser.add_argument("--max-tokens", type=int, default=48, help="tokens per generation (48)")
    parser.add_argument(
        "--draft-max", type=int, default=None,
        help="draft_token_max (default: the wrapper's LLAMA_MTP_DRAFT_DEFAULT)",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, default=None, help="also write the reports here")
    parser.set_defaults(func=run)


def _bindings_commit(bindings_parent: Path) -> str:
    """The ref to fetch the bindings' tree by: their commit, or their tag when the commit is
    unknown (recorded as ``unknown (...)``: a tag from a PyPI sdist)."""
    manifest = bindings_parent / PACKAGE_NAME / "abi_manifest.json"
    if not manifest.is_file():
        raise UsageError(f"{manifest} not found: run `llama-bindgen generate` first")
    data = json.loads(manifest.read_text(encoding="utf-8"))
    commit: str = data["commit"]
    if commit.startswith(UNKNOWN_COMMIT) and data.get("tag"):
        return str(data["tag"])
    return commit


def run(args: argparse.Namespace) -> int:
    from generator.native.build import build_native
    from generator.smoke import (
        NOT_RUN,
        SmokeReport,
        not_run_reason,
        run_smoke,
        tree_image,
        vocabulary_for_tree,
    )

    platforms: list[str] = args.platform or [REFERENCE_PLATFORM]
    if args.lib_dir is not None and len(platforms) != 1:
        raise UsageError("--lib-dir takes one --platform")
    if args.model is not None and not args.model.is_file():
        raise UsageError(f"model {args.model} not found")
    bindings_parent: Path = (
        args.bindings or checkout_generated("smoke without --bindings")
    ).resolve()
    commit = _bindings_commit(bindings_parent)  # refuses a folder without bindings up front
    if args.lib_dir is not None and not args.lib_dir.is_dir():
        raise UsageError(f"--lib-dir {args.lib_dir}: no such folder")
    tree: Path | None = args.tree
    if args.lib_dir is None and tree is None:
        from generator.sources.fetch import fetch_tree

        tree = fetch_tree(commit, github_base=None).root
    reports = []
    with tempfile.TemporaryDirectory(prefix="llama-bindgen-smoke-") as tmp:
        for platform in platforms:
            reason = not_run_reason(platform)
            if reason is not None:
                report = SmokeReport(platform, NOT_RUN, reason)
                print(report.table())
                reports.append(report)
                continue
            if args.lib_dir is not None:
                lib_dir: Path = args.lib_dir.resolve()
            else:
                assert tree is not None
                lib_dir = build_native(tree, platform, backend=args.backend).lib_dir
            report = run_smoke(
                platform, lib_dir, bindings_parent, Path(tmp) / platform,
                model=args.model, max_tokens=args.max_tokens, draft_token_max=args.draft_max,
                backend=args.backend, vocabulary=vocabulary_for_tree(tree),
                image=tree_image(tree),
            )  # fmt: skip
            print(report.table())
            reports.append(report)
    if args.json is not None:
        args.json.write_text(
            json.dumps([r.to_json() for r in reports], indent=2, sort_keys=True) + "\n",
            encoding="utf-8",
        )
    failed = [r.platform for r in reports if r.status == "failed"]
    not_run = [r for r in reports if r.status == NOT_RUN]
    summary = ", ".join(f"{r.platform} {r.status}" for r in reports)
    print(f"smoke: {summary}")
    if failed:
        raise GateFailedError(f"smoke failed on {', '.join(failed)}")
    if not_run:
        raise GateNotRunError("; ".join(f"{r.platform} not run: {r.reason}" for r in not_run))
    return 0
