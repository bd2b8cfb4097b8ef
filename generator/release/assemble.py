"""Assemble a release into ``--out``: archives, wheels, ``assets.json``, release notes,
``SHA256SUMS``.

Everything that can refuse the release is checked before the first byte is written: the gate
record, the native folders (commit, library hashes), the bindings in ``generated/`` (made from the
same commit) and the notes file. A native build is packed only when its gate record (the CI job's
``gates.json`` in its folder, else the releases.toml entry's) says every gate passed; every other
platform, and every recorded one with no build, is left out and named with the reason (on stderr,
in the release notes and in :attr:`AssembledRelease.left_out`). With nothing left to pack, the
release is refused. Each packed build also gets a wheel of the bindings with its libraries
inside (:mod:`generator.release.wheels`); one that cannot be made is named with the reason, and
the build's archive still ships. The files are then written to a
sibling work folder that replaces ``--out`` in one rename, so a failure leaves ``--out`` as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from generator.emit import PACKAGE_NAME
from generator.platforms import gate_key
from generator.release.archives import collect, write_archive
from generator.release.assets import ASSETS_NAME, Artifact, manifest, write_manifest
from generator.release.checksums import SUMS_NAME, write_sums
from generator.release.errors import ReleaseRefusedError
from generator.release.gates import (
    GATES_FILE,
    GateRecord,
    PlatformGates,
    read_ci_gates,
    require_platforms,
)
from generator.release.native import (
    BUILD_INFO_NAME,
    PACKED_ENTRIES,
    NativeBuild,
    find_native_builds,
)
from generator.release.notes import NOTES_NAME, read_notes, render_notes
from generator.release.wheels import WheelNotMadeError, make_wheel
from generator.releases import Release
from generator.sources.licenses import LICENSES_DIR, LLAMA_LICENSE

BINDINGS_MANIFEST = "abi_manifest.json"


@dataclass(frozen=True)
class ReleaseInputs:
    release: Release
    gates: GateRecord
    native_dir: Path
    generated_dir: Path
    notes_path: Path | None


@dataclass(frozen=True)
class AssembledRelease:
    out: Path
    tag: str
    artifacts: list[Artifact]
    files: list[str]  # every file in ``out``, sorted
    gates: list[PlatformGates]
    left_out: list[tuple[str, str]]  # (platform key, why), sorted
    wheels_left_out: list[tuple[str, str]]  # released builds with no wheel: (key, why), sorted


def release_tag(release: Release) -> str:
    return release.tag or release.ref


def _progress(text: str) -> None:
    print(f"release: {text}", file=sys.stderr, flush=True)


def _gates_for(build: NativeBuild, record: GateRecord) -> tuple[PlatformGates | None, str]:
    """The gates that admit ``build`` (None and why when it may not be released)."""
    gates = read_ci_gates(build.folder) or record.lookup(build.platform, build.backend)
    if gates is None:
        return None, (
            f"no gate record ({GATES_FILE} from its CI job, or releases.toml) for {build.folder}"
        )
    fails = gates.failures()
    if fails:
        return None, "gates did not all pass: " + "; ".join(fails)
    return gates, ""


def _unbuilt_jobs(native_dir: Path) -> list[tuple[str, str]]:
    """CI jobs whose build left only a gate record (no build-info.json): why each is missing."""
    out = []
    for folder in sorted(p for p in native_dir.iterdir() if p.is_dir()):
        if (folder / BUILD_INFO_NAME).is_file() or not (folder / GATES_FILE).is_file():
            continue
        gates = read_ci_gates(folder)
        assert gates is not None
        out.append((gates.key, "not built: " + "; ".join(gates.failures() or ["no libraries"])))
    return out


def _select(
    inputs: ReleaseInputs, found: list[NativeBuild]
) -> tuple[list[tuple[NativeBuild, PlatformGates]], list[tuple[str, str]]]:
    admitted: list[tuple[NativeBuild, PlatformGates]] = []
    left_out: list[tuple[str, str]] = _unbuilt_jobs(inputs.native_dir)
    for build in found:
        gates, why = _gates_for(build, inputs.gates)
        if gates is not None and not (build.folder / LICENSES_DIR / LLAMA_LICENSE).is_file():
            gates, why = (
                None,
                (
                    f"{build.folder} has no {LICENSES_DIR}/{LLAMA_LICENSE}: built by an older "
                    "llama-bindgen; build it again"
                ),
            )
        if gates is None:
            left_out.append((gate_key(build.platform, build.backend), why))
        else:
            admitted.append((build, gates))
    named = {key for key, _ in left_out} | {gate_key(b.platform, b.backend) for b in found}
    for key in sorted(set(inputs.gates.platforms) - named):
        left_out.append((key, f"its gates are recorded, and {inputs.native_dir} has no build"))
    for key, why in sorted(left_out):
        _progress(f"left out {key}: {why}")
    return admitted, sorted(left_out)


def refuse_unlicensed(found: list[NativeBuild]) -> None:
    """Refuse the release when a build's tree lacked llama.cpp's licence files (its
    build-info.json ``licenses`` says what was missing): such a build is never shipped."""
    for build in found:
        status = build.info.get("licenses", "present")
        if isinstance(status, str) and status.startswith("missing"):
            what = status.removeprefix("missing").lstrip(": ")
            raise ReleaseRefusedError(
                f"cannot ship {build.folder}: it was built from llama.cpp "
                f"{build.info.get('tag', '?')} (commit {build.info.get('commit', '?')}), whose "
                f"tree lacks {what} (a lean PyPI sdist's tree; its {BUILD_INFO_NAME} records "
                f"licenses = {status!r}); build from a tree that has its licence files"
            )


def bindings_package(generated: Path, commit: str) -> Path:
    """The bindings package in ``generated`` (the repository's generated/, holding
    llama_bindings/, or a package folder itself), checked against the release's commit."""
    nested = generated / PACKAGE_NAME / BINDINGS_MANIFEST
    manifest_path = nested if nested.is_file() else generated / BINDINGS_MANIFEST
    try:
        data = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReleaseRefusedError(
            f"{manifest_path}: no readable bindings manifest; run `llama-bindgen generate` ({exc})"
        ) from exc
    if not isinstance(data, dict) or data.get("commit") != commit:
        found = data.get("commit") if isinstance(data, dict) else None
        raise ReleaseRefusedError(
            f"{generated} holds bindings for commit {found!r}, the release is {commit}"
        )
    package = manifest_path.parent
    if not (package / LLAMA_LICENSE).is_file():
        raise ReleaseRefusedError(
            f"{package} has no {LLAMA_LICENSE}: generated from a tree without llama.cpp's LICENSE "
            "(a lean PyPI sdist's: such bindings never ship), or by an older llama-bindgen "
            "(generate them again)"
        )
    return package


def _write_wheels(
    builds: list[NativeBuild], package: Path, tag: str, work: Path
) -> tuple[list[Artifact], list[tuple[str, str]]]:
    """One wheel per build (:mod:`generator.release.wheels`); the builds whose wheel could not
    be made, with the reason."""
    artifacts: list[Artifact] = []
    left_out: list[tuple[str, str]] = []
    for build in builds:
        key = gate_key(build.platform, build.backend)
        try:
            wheel = make_wheel(build, package, tag, work)
        except WheelNotMadeError as exc:
            _progress(f"no wheel for {key}: {exc}")
            left_out.append((key, str(exc)))
            continue
        _progress(f"wheel {wheel.path.name}")
        artifacts.append(Artifact.of(wheel.path, "wheel", build.os_name, build.arch, build.backend))
    return artifacts, left_out


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ReleaseRefusedError(f"{out} exists and is not an empty folder")


def assemble_release(inputs: ReleaseInputs, out: Path) -> AssembledRelease:
    rel = inputs.release
    tag = release_tag(rel)
    require_platforms(rel.ref, inputs.gates)
    _check_out(out)
    found = find_native_builds(inputs.native_dir, rel.commit_label)
    refuse_unlicensed(found)
    admitted, left_out = _select(inputs, found)
    if not admitted:
        raise ReleaseRefusedError(
            "no native build passed every gate; nothing to release ("
            + "; ".join(f"{key}: {why}" for key, why in left_out)
            + ")"
        )
    builds = [b for b, _ in admitted]
    gates = {(b.platform, b.backend): g for b, g in admitted}
    package = bindings_package(inputs.generated_dir, rel.commit_label)
    bindings = sorted(p.name for p in inputs.generated_dir.iterdir() if not p.name.startswith("."))
    report = read_notes(inputs.notes_path)

    out.parent.mkdir(parents=True, exist_ok=True)
    work = out.parent / f".{out.name}.partial-{os.getpid()}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    try:
        artifacts: list[Artifact] = []
        for build in builds:
            name = build.archive_name(tag)
            _progress(f"pack {name}")
            stem = name.removesuffix("." + build.archive_ext)
            path = write_archive(work / name, collect(build.folder, stem, PACKED_ENTRIES))
            artifacts.append(Artifact.of(path, "native", build.os_name, build.arch, build.backend))
        bindings_name = f"llama-bindgen-bindings-{tag}.tar.gz"
        _progress(f"pack {bindings_name}")
        path = write_archive(
            work / bindings_name,
            collect(inputs.generated_dir, f"llama-bindgen-bindings-{tag}", tuple(bindings)),
        )
        artifacts.append(Artifact.of(path, "bindings", "any", "any", "any"))
        wheels, wheels_left_out = _write_wheels(builds, package, tag, work)
        artifacts += wheels
        write_manifest(work / ASSETS_NAME, manifest(tag, rel.commit_label, rel.digest, artifacts))
        notes = render_notes(
            tag=tag,
            commit=rel.commit_label,
            digest=rel.digest,
            gates=list(gates.values()),
            artifacts=artifacts,
            report=report,
            diff_summary=inputs.gates.diff_summary,
            left_out=left_out,
            wheels_left_out=wheels_left_out,
        )
        (work / NOTES_NAME).write_text(notes, encoding="utf-8")
        files = sorted(p.name for p in work.iterdir())
        write_sums(work, files)
        if out.exists():
            out.rmdir()
        os.replace(work, out)
    finally:
        if work.exists():
            shutil.rmtree(work)
    return AssembledRelease(
        out,
        tag,
        artifacts,
        sorted([*files, SUMS_NAME]),
        list(gates.values()),
        left_out,
        wheels_left_out,
    )
