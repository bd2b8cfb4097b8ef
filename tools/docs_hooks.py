"""MkDocs hooks of the documentation site (mkdocs.yml): the files drawn at build time.

The compat chart is drawn from reports/compat.json and the benchmark charts are taken from
bench/results/ when the site is built, so neither is committed twice
(``generator/docs_site.py`` does the work).
"""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from generator.docs_site import (
    CHART_MARKER,
    bench_charts,
    compat_chart_markdown,
    compat_chart_svg,
    without_sphinx_roles,
)

COMPAT_PAGE = "reference/compat.md"
CHART_FILE = "reference/compat-chart.svg"


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, CHART_FILE, content=compat_chart_svg()))
    for name, data in bench_charts():
        files.append(File.generated(config, f"reference/bench/{name}", content=data))
    return files


def on_page_markdown(markdown: str, page: Page, config: Any, files: Files) -> str:
    if page.file.src_uri != COMPAT_PAGE:
        return markdown
    return markdown.replace(CHART_MARKER, compat_chart_markdown("compat-chart.svg"))


def on_page_content(html: str, page: Page, config: Any, files: Files) -> str:
    return without_sphinx_roles(html)
