"""The bindings' loader and ABI guard (shipped modules, imported from the committed ``generated/``,
which test_emit holds equal to their source) find library files and layouts by the platform
registry's rows only: ``_about.LIBRARY_FILE_NAMES`` and ``_about.RUNTIME_TARGETS`` are made from
``generator.platforms.PLATFORMS``, and no shipped module or bindings template writes a library
file name or a target triple of its own."""

from __future__ import annotations

import fnmatch
import importlib
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from generator.emit import SHIPPED, runtime_platform_tables
from generator.paths import shipped_dir, templates_dir
from generator.platforms import PLATFORMS, host_platform_name
from tests.repo import REPO_ROOT

# every library the bindings open, and the ABI guard's identity library
STEMS = ("ggml-base", "ggml-cpu", "ggml", "llama", "llama_mtp", "llama_bindgen_abi")


def _bindings(name: str) -> ModuleType:
    parent = str(REPO_ROOT / "generated")
    if parent not in sys.path:
        sys.path.insert(0, parent)
    module = importlib.import_module(f"llama_bindings.{name}")
    assert Path(module.__file__ or "").resolve().parent.parent == Path(parent).resolve()
    return module


def test_the_generated_tables_are_the_registrys() -> None:
    about = _bindings("_about")
    tables = runtime_platform_tables()
    assert about.LIBRARY_FILE_NAMES == tables["library_file_names"]
    assert about.RUNTIME_TARGETS == tables["runtime_targets"]


def test_every_platform_finds_the_files_it_builds_under_the_names_it_gives() -> None:
    loader = _bindings("loader")
    for plat in PLATFORMS.values():
        for stem in STEMS:
            names = loader.file_names(stem, plat.python_platform)
            built = plat.library_file(stem)
            assert any(fnmatch.fnmatchcase(built, n) for n in names), (plat.name, stem, names)
            own = [n for n in names if n in plat.library_file_names(stem)]
            assert own == list(plat.library_file_names(stem)), (plat.name, stem, names)


def test_a_system_the_registry_does_not_know_names_libraries_as_elf_ones() -> None:
    loader = _bindings("loader")
    elf = next(p for p in PLATFORMS.values() if p.binary_format == "elf")
    assert "plan9" not in {p.python_platform for p in PLATFORMS.values()}
    assert loader.file_names("llama", "plan9") == list(elf.library_file_names("llama"))


def test_every_platform_gets_its_own_triples(monkeypatch: pytest.MonkeyPatch) -> None:
    guard = _bindings("abi_guard")
    keys = {(p.python_platform, p.python_machine) for p in PLATFORMS.values()}
    assert len(keys) == len(PLATFORMS), "two platforms look alike to Python"
    for plat in PLATFORMS.values():
        here = (plat.python_platform, plat.python_machine)
        monkeypatch.setattr(guard, "runtime_platform", lambda here=here: here)
        assert guard.runtime_targets() == list(plat.triples), plat.name
    monkeypatch.setattr(guard, "runtime_platform", lambda: ("linux", "riscv64"))
    assert guard.runtime_targets() == []


def test_this_machine_is_the_platform_the_registry_says_it_is() -> None:
    """The registry's Python names of the host platform are what this Python reports."""
    guard = _bindings("abi_guard")
    host = PLATFORMS[host_platform_name()]
    assert guard.runtime_platform() == (host.python_platform, host.python_machine)
    assert guard.runtime_targets() == list(host.triples)


def test_find_library_takes_the_first_name_that_is_there(tmp_path: Path) -> None:
    loader = _bindings("loader")
    names = [n.replace("*", "0.1") for n in loader.file_names("llama")]
    for count in range(len(names), 0, -1):
        folder = tmp_path / str(count)
        folder.mkdir()
        for name in names[-count:]:
            (folder / name).write_bytes(b"")
        (folder / "unrelated").mkdir()
        assert loader.find_library(folder, "llama") == folder / names[-count]
    assert loader.find_library(tmp_path / "1", "ggml") is None


def _library_facts() -> dict[str, re.Pattern[str]]:
    """A pattern per registry fact the bindings must not write themselves: every target triple
    and every shared-library suffix."""
    facts = {t for p in PLATFORMS.values() for t in p.triples}
    suffixes = {p.shared_suffix for p in PLATFORMS.values()}
    patterns = {t: re.compile(re.escape(t)) for t in facts}
    patterns.update({s: re.compile(re.escape(s) + r"\b") for s in suffixes})
    return patterns


def test_no_shipped_module_or_bindings_template_writes_a_platform_fact() -> None:
    """Library file names and triples come from the registry only (``_about.py``); the
    bindings' README prose is not Python and is left out."""
    sources = [shipped_dir() / name for name in SHIPPED]
    sources += sorted((templates_dir() / "bindings").glob("*.py*.j2"))
    assert shipped_dir() / "loader.py" in sources and shipped_dir() / "abi_guard.py" in sources
    found = [
        f"{path.name}: {fact}"
        for path in sources
        for fact, pattern in _library_facts().items()
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert not found, "read these from _about.py (the platform registry's table):\n" + "\n".join(
        found
    )
