"""The documentation site: built strictly as ``nox -s docs`` builds it, then opened in Debian's
headless Chromium (driven by Playwright, which downloads no browser of its own) over a loopback
HTTP server: the start page's navigation and a code block, the compat page's chart, a benchmark
chart and the API page render, and no page raises a script error. Screenshots are kept in
``$LLAMA_BINDGEN_TEST_ARTIFACTS/docs`` (default ``test-artifacts/docs`` in the checkout)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from tests.loopback import serve_handler
from tests.repo import REPO_ROOT

CHROMIUM = "chromium"  # Debian's package of that name (.ci/run installs it)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    class SiteHandler(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(site), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with serve_handler(SiteHandler) as url:
        yield url


@pytest.fixture(scope="module")
def artifacts() -> Path:
    base = os.environ.get("LLAMA_BINDGEN_TEST_ARTIFACTS") or str(REPO_ROOT / "test-artifacts")
    folder = Path(base) / "docs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = shutil.which(CHROMIUM)
    assert executable, f"no {CHROMIUM} on PATH: install Debian's package {CHROMIUM} (.ci/run does)"
    from playwright.sync_api import sync_playwright  # see the module docstring

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    opened = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    opened.close()
    assert not errors, f"script errors: {errors}"


def _visible_box(locator: Any) -> dict[str, float]:
    locator.wait_for(state="visible")
    box = locator.bounding_box()
    assert box is not None and box["width"] > 0 and box["height"] > 0, box
    return box  # type: ignore[no-any-return]


def _image_drawn(locator: Any) -> None:
    _visible_box(locator)
    locator.scroll_into_view_if_needed()
    drawn = locator.evaluate("img => img.complete && img.naturalWidth > 0 && img.naturalHeight > 0")
    assert drawn, f"image not drawn: {locator.get_attribute('src')}"


def test_the_start_page_has_its_navigation_and_a_code_block(
    page: Any, served: str, artifacts: Path
) -> None:
    page.goto(f"{served}/index.html")
    assert page.title().startswith("llama-bindgen")
    navigation = page.locator("nav.md-nav--primary").first
    _visible_box(navigation)
    for section in ("Getting started", "How-to", "Reference"):
        assert navigation.get_by_text(section, exact=True).count() >= 1, section
    page.get_by_role("link", name="the toolchain").first.click()
    page.wait_for_load_state()
    assert page.url.endswith("/getting-started/toolchain.html")
    code = page.locator("div.highlight pre code").first
    _visible_box(code)
    assert "llama-bindgen doctor" in code.inner_text()
    page.screenshot(path=str(artifacts / "toolchain.png"), full_page=True)
    page.goto(f"{served}/index.html")
    page.screenshot(path=str(artifacts / "start.png"), full_page=True)


def test_the_compat_chart_and_a_benchmark_chart_render(
    page: Any, served: str, artifacts: Path
) -> None:
    page.goto(f"{served}/reference/compat.html")
    _image_drawn(page.locator("img.compat-chart"))
    rows = page.locator("table tbody tr")
    assert rows.count() >= 3
    page.screenshot(path=str(artifacts / "compat.png"), full_page=True)
    page.goto(f"{served}/reference/benchmarks.html")
    _image_drawn(page.locator("img[src$='b11312-linux-x86_64-chat-v2.png']"))


def test_the_api_page_renders_the_runtime_from_its_docstrings(
    page: Any, served: str, artifacts: Path
) -> None:
    page.goto(f"{served}/reference/api/runtime.html")
    for name in ("Model", "Context", "SpeculativeDecoding", "Projector"):
        heading = page.locator(f"[id='llama_bindings.runtime.{name}'].doc-heading")
        _visible_box(heading)
    signature = page.locator("div.doc-signature").first
    _visible_box(signature)
    page.screenshot(path=str(artifacts / "api-runtime.png"), full_page=False)
