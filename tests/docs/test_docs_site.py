"""What the site draws from the records (generator/docs_site.py), without building the site."""

from __future__ import annotations

from generator.bump.compat import RESULTS_FILE, load_results
from generator.docs_site import compat_chart_markdown, compat_chart_svg, without_sphinx_roles
from tests.repo import REPO_ROOT


def test_the_compat_chart_is_deterministic_and_draws_every_dated_tag() -> None:
    results = load_results(REPO_ROOT / RESULTS_FILE)
    svg = compat_chart_svg(REPO_ROOT)
    assert svg == compat_chart_svg(REPO_ROOT)
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    for result in results.values():
        assert (f">{result.tag}<" in svg or f"<!-- {result.tag} -->" in svg) == bool(result.month)


def test_the_chart_markdown_names_the_tags_it_leaves_out() -> None:
    undated = sorted(r.tag for r in load_results(REPO_ROOT / RESULTS_FILE).values() if not r.month)
    text = compat_chart_markdown("chart.svg", REPO_ROOT)
    assert text.startswith("![") and "(chart.svg)" in text
    assert ("Not drawn (month unknown): " in text) == bool(undated)
    assert all(tag in text for tag in undated)


def test_sphinx_role_names_are_taken_off_code_elements_only() -> None:
    html = "see :class:<code>Model</code> and :meth:<code>close</code>; a :class: in prose"
    expected = "see <code>Model</code> and <code>close</code>; a :class: in prose"
    assert without_sphinx_roles(html) == expected
