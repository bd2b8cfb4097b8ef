"""The bump pipeline: one llama.cpp ref through every stage, changing the repository only when
every gate of every platform built here passed.

Stages: fetch -> generate (into a work folder) -> diff (against the pinned bindings) -> build
(each platform this machine can build) -> verify (symbols, layout, smoke per platform) -> record
(generated/, releases.toml, CHANGELOG.md, the API/ABI report). Work files and logs live under
``<cache>/bump/<key>/`` (the tree's cache key), never in the repository. (The fetch itself may
add the tag's PyPI source to ``tag-sources.toml``: that is the fetch's record, not the pin.)
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit

from generator import __version__
from generator.bump.gates import (
    FAILED,
    GATES,
    NOT_RUN,
    PASSED,
    Builder,
    GateOutcome,
    PlatformRun,
    SmokeGate,
    platform_gates,
    smoke_gate,
    summarise,
    to_json,
)
from generator.bump.readiness import DOCTOR_HINT, default_keys, key_readiness
from generator.diff.compare import compare
from generator.diff.model import summary
from generator.diff.report import render_json, render_markdown
from generator.emit import PACKAGE_NAME, emit_package
from generator.errors import BindgenError
from generator.ir.interface import Interface
from generator.parse.frontend import parse_tree
from generator.paths import TAG_SOURCES, default_cache_dir
from generator.platforms import (
    GPU_BACKEND_APT,
    get_platform,
    host_platform_name,
    split_key,
)
from generator.releases import load_document, load_releases
from generator.sources.fetch import FetchResult, fetch_tree
from generator.sources.licenses import llama_license
from generator.sources.tag_sources import load_tag_sources
from generator.templating import environment

STAGES = ("fetch", "generate", "diff", "build", "verify", "record")


class BumpFailed(BindgenError):
    """A stage or gate failed; nothing in the repository was changed."""

    exit_code = 1


@dataclass
class BumpOptions:
    ref: str
    repo: Path
    cache: Path | None = None
    mirror: str | None = None
    source: Path | None = None
    allow_dirty: bool = False
    github_base: str | None = None
    platforms: tuple[str, ...] = ()


def _buildable(requested: tuple[str, ...]) -> tuple[list[str], dict[str, str]]:
    """Platforms (and GPU backends, keyed ``<platform>-<backend>``) whose every gate can run here:
    built on this machine (toolchain and backend tools installed) and its programs runnable
    (natively, under qemu or wine) for the smoke gate (``readiness.key_readiness``). Named ones
    are taken as asked; a gate that then cannot run is not-run, and the bump records nothing.
    Returns the chosen keys (the host first) and why each other one was left out (naming
    ``doctor``)."""
    names = list(requested) if requested else default_keys()
    host = host_platform_name()
    chosen: list[str] = []
    skipped: dict[str, str] = {}
    for name in names:
        found = key_readiness(name, host)
        if found.cannot_build and requested:
            raise BumpFailed(f"{name}: {found.cannot_build}")
        if not requested and not found.ready:
            skipped[name] = f"{found.verdict}; {DOCTOR_HINT}"
            continue
        chosen.append(name)
    chosen.sort(key=lambda n: (n != host, n))  # the host's CPU build first: the strictest gates
    return chosen, skipped


Chooser = Callable[[tuple[str, ...]], tuple[list[str], dict[str, str]]]


@dataclass
class BumpHooks:
    """The parts of a bump tests may replace (a failing build, a smoke that always passes, a
    machine that lacks some toolchains)."""

    builder: Builder | None = None
    smoke: SmokeGate = smoke_gate
    choose_platforms: Chooser = _buildable


@dataclass
class BumpReport:
    fetched: FetchResult
    outcomes: dict[str, list[GateOutcome]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    diff_summary: str = ""
    recorded: bool = False
    work: Path = Path()


def _stage(n: int, name: str, text: str) -> None:
    print(f"[{n}/{len(STAGES)}] {name}: {text}", file=sys.stderr, flush=True)


def _left_out_of_the_pin(repo: Path, skipped: dict[str, str]) -> list[tuple[str, str]]:
    """The platforms the current pin was gated on that this machine leaves out, with why and
    the packages that would let it gate them."""
    from generator.release.gates import parse_gate_record

    doc = load_document(repo / "releases.toml").unwrap()
    pinned = doc.get("pinned", "")
    entry = next((e for e in doc.get("release", []) if e.get("ref") == pinned), None)
    if not pinned or entry is None or "gates" not in entry:
        return []
    record = parse_gate_record(pinned, entry)
    host = host_platform_name()
    out = []
    for key, gates in sorted(record.platforms.items()):
        if key in skipped and not gates.failures():
            platform_name, backend = split_key(key)
            packages = get_platform(platform_name).apt_packages(host)
            if backend != "cpu":
                packages = tuple(sorted({*packages, *GPU_BACKEND_APT[backend]}))
            hint = f"; apt-get install {' '.join(packages)}" if packages else ""
            out.append((key, f"{skipped[key]}{hint}"))
    return out


def _pinned_ir(repo: Path) -> Interface | None:
    """The IR of the current pin (releases.toml ``pinned``), or None before the first pin."""
    path = repo / "generated" / PACKAGE_NAME / "ir.json"
    pinned = load_document(repo / "releases.toml").get("pinned", "")
    return Interface.load(path) if pinned and path.is_file() else None


def run_bump(options: BumpOptions, hooks: BumpHooks | None = None) -> BumpReport:
    hooks = hooks or BumpHooks()
    repo = options.repo.resolve()
    report = _fetch(options, repo)
    fetched, work = report.fetched, report.work

    _stage(2, "generate", f"bindings for {fetched.name}")
    api = parse_tree(fetched, progress=True)  # the one parse of this bump: the builds take it
    package_parent = work / "generated"
    emit_package(api, package_parent, llama_license=llama_license(fetched.root))

    diff_md, previous = _diff(repo, api, report)
    failed = _gate(options, hooks, repo, report, api, package_parent)
    print(summarise(report.outcomes))
    if failed:
        raise BumpFailed(
            "not recorded: every gate must pass; generated/, releases.toml and CHANGELOG.md are "
            "unchanged.\n  " + "\n  ".join(failed) + f"\n  work folder and logs: {work}"
        )
    _stage(6, "record", f"pinning {fetched.ref}")
    _record(repo, fetched, api, report, diff_md, previous)
    report.recorded = True
    return report


def _fetch(options: BumpOptions, repo: Path) -> BumpReport:
    """Stage 1: the verified tree, and a fresh work folder for this commit."""
    _stage(1, "fetch", options.ref)
    fetched = fetch_tree(
        options.ref,
        options.cache,
        mirror=options.mirror,
        source=options.source,
        allow_dirty=options.allow_dirty,
        github_base=options.github_base,
        releases=load_releases(repo / "releases.toml"),
        tag_sources=repo / TAG_SOURCES,
    )
    work = (options.cache or default_cache_dir()) / "bump" / fetched.cache_key
    if work.exists():
        shutil.rmtree(work)
    (work / "logs").mkdir(parents=True)
    return BumpReport(fetched, work=work)


def _diff(repo: Path, api: Interface, report: BumpReport) -> tuple[str, str]:
    """Stage 3: the API/ABI report against the pinned bindings, and the pinned ref ("" first)."""
    _stage(3, "diff", "against the pinned bindings")
    work = report.work
    old = _pinned_ir(repo)
    if old is None:
        diff_md = "First pin: no earlier bindings to compare with.\n"
        report.diff_summary = "first pin"
        previous = ""
    else:
        diff = compare(old, api)
        diff_md = render_markdown(diff)
        (work / "api-diff.json").write_text(render_json(diff), encoding="utf-8")
        counts = summary(diff.changes)
        report.diff_summary = f"{counts['breaking']} breaking, {counts['compatible']} compatible"
        previous = old.source.tag or old.source.commit[:12]
    (work / "api-diff.md").write_text(diff_md, encoding="utf-8")
    _stage(3, "diff", f"{report.diff_summary} (report: {work / 'api-diff.md'})")
    return diff_md, previous


def _gate(
    options: BumpOptions,
    hooks: BumpHooks,
    repo: Path,
    report: BumpReport,
    api: Interface,
    package_parent: Path,
) -> list[str]:
    """Stages 4 and 5: build and verify each platform; returns what failed or did not run."""
    platforms, report.skipped = hooks.choose_platforms(options.platforms)
    for name, why in report.skipped.items():
        _stage(4, "build", f"{name}: skipped ({why})")
    narrower = [] if options.platforms else _left_out_of_the_pin(repo, report.skipped)
    host = host_platform_name()
    logs = report.work / "logs"
    for name in platforms:
        _stage(4, "build", name)
        platform_name, backend = split_key(name)
        run = PlatformRun(
            platform_name, report.fetched, api, package_parent, logs / name, backend=backend
        )
        outcomes = platform_gates(
            run, host, hooks.builder, hooks.smoke, lambda text: _stage(5, "verify", text)
        )
        for outcome in outcomes:
            where = f" (log: {outcome.log})" if outcome.log and outcome.status != PASSED else ""
            _stage(5, "verify", f"{name}: {outcome.gate} {outcome.status}: {outcome.detail}{where}")
        report.outcomes[name] = outcomes
    (report.work / "gates.json").write_text(to_json(report.outcomes), encoding="utf-8")

    failed = [
        f"{p}: {o.gate} {o.status} ({o.detail})"
        for p, results in report.outcomes.items()
        for o in results
        if o.status != PASSED
    ]
    if not report.outcomes:
        failed.append("no platform could be built on this machine")
    for name, why in narrower:
        report.outcomes[name] = [GateOutcome(gate, NOT_RUN, why) for gate in GATES]
        failed.append(
            f"{name}: not-run ({why}); the pin before was gated on it: install what it needs, "
            "or name the platforms to gate (--platform) to record a narrower pin"
        )
    return failed


def _same_tree(entry: Any, fetched: FetchResult) -> bool:
    if fetched.commit:
        return bool(entry.get("commit") == fetched.commit)
    return not entry.get("commit") and entry.get("digest") == fetched.digest


def _release_entry(doc: tomlkit.TOMLDocument, fetched: FetchResult, repo: Path) -> tuple[str, Any]:
    """The releases.toml entry of the fetched tree (added when new) and its ref. A tree with no
    known commit (a tag from a PyPI sdist) is recorded with ``commit = ""``, the note saying
    why, and the sdist ``tag-sources.toml`` records for it, so that it can be fetched again."""
    entries = [e for e in doc.get("release", []) if _same_tree(e, fetched)]
    if entries:
        return str(entries[0]["ref"]), entries[0]
    ref = fetched.tag or fetched.commit[:7]
    pin = load_tag_sources(repo / TAG_SOURCES).get(fetched.tag) if not fetched.commit else None
    entry = tomlkit.table()
    for key, value in (
        ("ref", ref), ("tag", fetched.tag), ("commit", fetched.commit),
        *([("commit_note", pin.commit_note)] if pin is not None else []),
        ("digest", fetched.digest), ("digest_algorithm", "llama-bindgen-tree-v1"),
        ("mtp", fetched.has_mtp_api),
    ):  # fmt: skip
        entry[key] = value
    if pin is not None:
        sdist = tomlkit.table()
        for key, value in (("package", pin.package), ("version", pin.version),
                           ("sha256", pin.sha256), ("subdir", pin.subdir)):  # fmt: skip
            sdist[key] = value
        entry["sdist"] = tomlkit.aot()
        entry["sdist"].append(sdist)
    entry.trivia.indent = "\n"  # a blank line before the new [[release]], as between the others
    doc.setdefault("release", tomlkit.aot()).append(entry)
    return ref, entry


def _changelog(
    repo: Path, fetched: FetchResult, report: BumpReport, ref: str, report_rel: str, previous: str
) -> str:
    """CHANGELOG.md with the new pin's entry above the newest one."""
    changelog = repo / "CHANGELOG.md"
    rows = [
        {"platform": p, **{o.gate: o.status for o in results}}
        for p, results in report.outcomes.items()
    ]
    entry_md = environment().get_template("bump/changelog_entry.md.j2").render(
        ref=ref, tag=fetched.tag, commit=fetched.commit_label, digest=fetched.digest,
        provider=fetched.provider, generator_version=__version__, previous=previous,
        summary=report.diff_summary, report=report_rel, rows=rows,
    )  # fmt: skip
    old = changelog.read_text(encoding="utf-8") if changelog.is_file() else "# Changelog\n"
    head, sep, rest = old.partition("\n## ")
    return f"{head.rstrip()}\n\n{entry_md}" + (f"## {rest}" if sep else "")


def _record(
    repo: Path,
    fetched: FetchResult,
    api: Interface,
    report: BumpReport,
    diff_md: str,
    previous: str,
) -> None:
    """Replace generated/, releases.toml, CHANGELOG.md and the report; all or nothing."""
    from generator.release.gates import GateRecord, PlatformGates, set_gate_record

    doc = load_document(repo / "releases.toml")
    ref, entry = _release_entry(doc, fetched, repo)
    report_rel = f"reports/api-diff-{ref}.md"
    # re-recording the current pin (after a toolchain change) keeps its report and changelog entry
    same_pin = doc.get("pinned") == ref and "notes" in entry
    doc["pinned"] = ref
    if not same_pin:
        entry["notes"] = report_rel
    earlier = entry.get("gates", {})
    diff_summary = str(earlier.get("diff_summary", "")) if same_pin else report.diff_summary
    record = GateRecord(
        platforms={
            p: PlatformGates(p, {o.gate: o.status for o in results})
            for p, results in report.outcomes.items()
        },
        generator_version=__version__,
        providers=(fetched.provider,),
        diff_summary=diff_summary or report.diff_summary,
    )
    set_gate_record(doc, ref, record)
    files = {"releases.toml": tomlkit.dumps(doc)}
    if not same_pin:
        files["CHANGELOG.md"] = _changelog(repo, fetched, report, ref, report_rel, previous)
        files[report_rel] = diff_md
    _replace(repo, files, api, llama_license(fetched.root))


def _replace(repo: Path, files: dict[str, str], api: Interface, license_text: bytes | None) -> None:
    """Write ``files`` (relative to ``repo``) and generated/ together: on any failure every one
    of them is put back as it was."""
    staging = Path(tempfile.mkdtemp(prefix=".bump-", dir=repo))
    backup = Path(tempfile.mkdtemp(prefix=".bump-backup-", dir=repo))
    try:
        for i, text in enumerate(files.values()):
            (staging / str(i)).write_text(text, encoding="utf-8")
        for name in ("releases.toml", "CHANGELOG.md"):
            if (repo / name).exists():
                shutil.copy2(repo / name, backup / name)
        generated = repo / "generated" / PACKAGE_NAME
        if generated.exists():
            shutil.copytree(generated, backup / PACKAGE_NAME)
        try:
            emit_package(api, repo / "generated", llama_license=license_text)
            for i, name in enumerate(files):
                (repo / name).parent.mkdir(parents=True, exist_ok=True)
                (staging / str(i)).replace(repo / name)
        except BaseException:
            _restore(repo, backup)
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(backup, ignore_errors=True)


def _restore(repo: Path, backup: Path) -> None:
    for name in ("releases.toml", "CHANGELOG.md"):
        if (backup / name).exists():
            shutil.copy2(backup / name, repo / name)
    if (backup / PACKAGE_NAME).exists():
        target = repo / "generated" / PACKAGE_NAME
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(backup / PACKAGE_NAME, target)


__all__ = ["FAILED", "NOT_RUN", "PASSED", "BumpFailed", "BumpHooks", "BumpOptions", "run_bump"]
