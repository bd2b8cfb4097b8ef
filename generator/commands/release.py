"""``llama-bindgen release REF``: pack a gated release into ``--out`` and optionally publish it.

The REF's ``releases.toml`` entry must carry a ``[release.gates]`` record in which every gate of
every platform passed; otherwise nothing is written (exit code 3). The last stdout line is the
output folder (or, with ``--publish``, the published release's URL).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from generator.errors import UsageError
from generator.github_api import DEFAULT_API_URL, TOKEN_ENV
from generator.paths import checkout_generated, default_cache_dir, releases_path
from generator.release.assemble import ReleaseInputs, assemble_release, release_tag
from generator.release.checksums import check_sums
from generator.release.errors import PublishError
from generator.release.gates import parse_gate_record
from generator.release.github import GitHubReleases, token_from_env
from generator.release.notes import NOTES_NAME
from generator.releases import Release, load_releases, resolve_ref


def default_native_dir(key: str) -> Path:
    """Where ``llama-bindgen build`` puts the builds of the tree with cache key ``key``."""
    return default_cache_dir() / "native" / key


def recorded_release(args: argparse.Namespace, why: str) -> tuple[Release, Path]:
    """The ``releases.toml`` entry of ``args.ref`` (``--releases``, else the checkout's) and that
    file's path; a UsageError ending with ``why`` when the file has no such entry."""
    toml_path: Path = args.releases or releases_path()
    rel = resolve_ref(args.ref, load_releases(toml_path)).release
    if rel is None:
        raise UsageError(f"{args.ref} has no entry in {toml_path}; {why}")
    return rel, toml_path


def add_build_inputs(parser: argparse.ArgumentParser) -> None:
    """The options naming what a release entry's artifacts are made from: its native builds, its
    bindings and the releases.toml holding it."""
    parser.add_argument(
        "--native",
        type=Path,
        default=None,
        help="folder of native builds (default: <cache>/native/<key>: the short commit, or "
        "tag-<tag>-<digest12> for a tree whose commit is unknown)",
    )
    parser.add_argument(
        "--generated", type=Path, default=None, help="bindings folder (default: generated/)"
    )
    parser.add_argument(
        "--releases", type=Path, default=None, help="releases.toml to read (default: the repo's)"
    )


def run(args: argparse.Namespace) -> int:
    rel, toml_path = recorded_release(args, "only recorded releases ship")
    token = token_from_env() if args.publish else ""  # fail before packing anything
    if args.publish and not args.github_repo:
        raise UsageError("--publish needs --github-repo OWNER/NAME")
    notes_path: Path | None = args.notes
    if notes_path is None and isinstance(rel.extra.get("notes"), str) and rel.extra["notes"]:
        notes_path = toml_path.parent / rel.extra["notes"]
    inputs = ReleaseInputs(
        release=rel,
        gates=parse_gate_record(rel.ref, rel.extra),
        native_dir=args.native or default_native_dir(rel.cache_key),
        generated_dir=args.generated or checkout_generated("release without --generated"),
        notes_path=notes_path,
    )
    result = assemble_release(inputs, args.out)
    for artifact in result.artifacts:
        print(f"artifact {artifact.file} {artifact.size} sha256:{artifact.sha256}")
    if not args.publish:
        print(result.out)
        return 0
    problems = check_sums(result.out)
    if problems:  # what is uploaded is exactly what SHA256SUMS lists
        raise PublishError(f"{result.out}: {'; '.join(problems)}; nothing was published")
    client = GitHubReleases(args.github_repo, token, api_url=args.api_url)
    body = (result.out / NOTES_NAME).read_text(encoding="utf-8")
    published = client.publish(
        release_tag(rel),
        f"llama-bindgen for llama.cpp {release_tag(rel)}",
        body,
        [result.out / name for name in result.files],
        commitish=args.target,
    )
    print(f"published {len(published.assets)} assets")
    print(published.html_url or f"release {published.id}")
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "release",
        help="pack (and publish) a release whose gates all passed",
        description=(
            "Pack the native builds (one archive per platform and backend), a wheel of the "
            "bindings with each build's libraries inside (pip install --find-links OUT "
            "llama-bindings), the bindings in generated/, assets.json, release notes and "
            "SHA256SUMS into --out, for a "
            "releases.toml entry whose gates all passed. With --publish, create a GitHub release "
            f"through the REST API (token from ${TOKEN_ENV}); a failure leaves no release behind."
        ),
    )
    parser.add_argument("ref", metavar="REF")
    parser.add_argument(
        "--out", type=Path, default=Path("dist"), help="output folder, new or empty (dist)"
    )
    add_build_inputs(parser)
    parser.add_argument(
        "--notes", type=Path, default=None, help="API/ABI report (default: the entry's `notes`)"
    )
    parser.add_argument("--publish", action="store_true", help="publish to GitHub Releases")
    parser.add_argument(
        "--github-repo", metavar="OWNER/NAME", help="GitHub repository to publish to"
    )
    parser.add_argument(
        "--api-url", default=DEFAULT_API_URL, help=f"GitHub API base (default {DEFAULT_API_URL})"
    )
    parser.add_argument(
        "--target",
        default=None,
        help="commit or branch the release tag points at (default: "
        "the repository's default branch)",
    )
    parser.set_defaults(func=run)
