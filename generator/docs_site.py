"""What the documentation site draws from the repository's records at build time: the chart of
the upstream tags checked (``reports/compat.json``) and the benchmark charts (``bench/results/``).

``tools/docs_hooks.py`` (an MkDocs hook) adds them to the site; ``nox -s docs`` installs
matplotlib for the chart. Nothing here is committed twice: the site is built, never stored.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from datetime import date
from pathlib import Path

from generator.bump.compat import RESULTS_FILE, TagResult, load_results
from generator.paths import checkout_root
from generator.sources.tag_sources import tag_number

BENCH_RESULTS = Path("bench") / "results"
# Where the compat page wants the chart (a comment: invisible where the page is read unbuilt).
CHART_MARKER = "<!-- compat-chart (the site's hook draws it from reports/compat.json) -->"
# A Sphinx role left in a docstring (``:class:`Model```) as MkDocs renders it: the role's name
# before the code element; the site shows the code alone.
SPHINX_ROLE = re.compile(r":(?:class|meth|func|attr|mod|data|exc|obj):(?=<code>)")
# The chart's colours: a tag whose gates all passed, and one with a failure.
PASSED_COLOUR = "#2e7d32"
FAILED_COLOUR = "#c62828"


def _month(result: TagResult) -> date | None:
    if not result.month:
        return None
    year, month = result.month.split("-")
    return date(int(year), int(month), 15)


def _results_by_tag(repo: Path | None) -> list[TagResult]:
    """``reports/compat.json`` of ``repo`` (else the checkout), oldest tag first."""
    root = repo if repo is not None else checkout_root("drawing the compat chart")
    return sorted(load_results(root / RESULTS_FILE).values(), key=lambda r: tag_number(r.tag))


def _undated(results: list[TagResult]) -> list[str]:
    return [r.tag for r in results if _month(r) is None]


def compat_chart_markdown(chart: str, repo: Path | None = None) -> str:
    """The chart's image on the compat page, and what it leaves out (tags whose sdist month is
    unknown) said under it."""
    undated = _undated(_results_by_tag(repo))
    note = f"\n\nNot drawn (month unknown): {', '.join(undated)}." if undated else ""
    alt = "The upstream tags checked, by month and tag number"
    return f"![{alt}]({chart}){{ .compat-chart }}{note}"


def compat_chart_svg(repo: Path | None = None) -> str:
    """The upstream tags checked, by month and tag number, coloured by their gates: an SVG
    without dates or random ids, so the same results draw the same bytes."""
    import matplotlib  # only the docs and lint sessions install it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = _results_by_tag(repo)
    dated = [(r, when) for r in results if (when := _month(r)) is not None]
    plt.rcParams["svg.hashsalt"] = "llama-bindgen"
    figure, axes = plt.subplots(figsize=(8, 3.6))
    for passed, colour, label in ((True, PASSED_COLOUR, "every gate passed"),
                                  (False, FAILED_COLOUR, "a gate failed")):  # fmt: skip
        points = [(when, tag_number(r.tag)) for r, when in dated if r.passed == passed]
        if points:
            xs, ys = zip(*points, strict=True)
            axes.scatter(xs, ys, color=colour, label=label, zorder=3)
    for result, when in dated:
        axes.annotate(result.tag, (when, tag_number(result.tag)), textcoords="offset points",
                      xytext=(4, 4), fontsize=7)  # fmt: skip
    axes.set_xlabel("month of the tag's PyPI sdist")
    axes.set_ylabel("llama.cpp build tag (bN)")
    axes.set_title("Upstream tags checked by llama-bindgen compat (linux-x86_64)")
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper left", fontsize=8)
    figure.autofmt_xdate()
    figure.tight_layout()
    out = io.StringIO()
    figure.savefig(out, format="svg", metadata={"Date": None})
    plt.close(figure)
    return out.getvalue()


def bench_charts(repo: Path | None = None) -> Iterator[tuple[str, bytes]]:
    """Every chart the benchmarks wrote (``bench/results/*.png``), by file name."""
    root = repo if repo is not None else checkout_root("collecting the benchmark charts")
    for path in sorted((root / BENCH_RESULTS).glob("*.png")):
        yield path.name, path.read_bytes()


def without_sphinx_roles(html: str) -> str:
    """A page's HTML without the Sphinx role names the runtime's docstrings use."""
    return SPHINX_ROLE.sub("", html)
