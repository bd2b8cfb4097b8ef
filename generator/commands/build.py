"""``llama-bindgen build``: build llama.cpp's shared libraries and the MTP wrapper."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from generator.native.build import build_native
from generator.platforms import BUILT_BACKENDS, PLATFORMS


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "build",
        help="build libllama, ggml and libllama_mtp for a platform",
        description=(
            "Configure and build (CMake, Ninja, ccache when present) the shared libraries of a "
            "fetched llama.cpp tree and the MTP wrapper for one platform. Output: "
            "<out>/<platform>/{lib,include,build-info.json}; default <out> is "
            "<cache>/native/<key> (the short commit, or tag-<tag>-<digest12> for a tree whose "
            "commit is unknown). The last stdout line is the platform folder."
        ),
    )
    parser.add_argument("--tree", type=Path, required=True, help="llama.cpp tree (from `fetch`)")
    parser.add_argument("--platform", required=True, choices=sorted(PLATFORMS))
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: cache)")
    parser.add_argument(
        "--backend",
        default="cpu",
        choices=list(BUILT_BACKENDS),
        help="compute backend: cpu, or vulkan for linux-x86_64 "
        "(CUDA, Metal: see docs/reference/support-matrix.md)",
    )
    parser.add_argument(
        "--cuda-arch",
        default=None,
        metavar="ARCHS",
        help="CUDA architectures for --backend cuda, comma-separated (89, 90a, 86-real); "
        "default: llama.cpp's own list",
    )
    parser.add_argument("--jobs", "-j", type=int, default=2, help="parallel compile jobs (2)")
    parser.add_argument(
        "--force", action="store_true", help="configure and rebuild even when up to date"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = build_native(
        args.tree,
        args.platform,
        out=args.out,
        jobs=args.jobs,
        force=args.force,
        backend=args.backend,
        cuda_arch=args.cuda_arch,
    )
    print(f"platform: {result.platform.name}")
    print(f"backend: {result.info.get('backend', 'cpu')}")
    print(f"llama.cpp: {result.info['tag']} ({result.info['commit']})")
    print(f"mtp: {result.mtp.describe()}")
    if str(result.info.get("licenses", "present")).startswith("missing"):
        print(f"licenses: {result.info['licenses']} (release refuses to ship this build)")
    for rel in sorted(result.info["libraries"]):
        print(f"library: {rel} sha256:{result.info['libraries'][rel]}")
    print(result.platform_dir)
    return 0
