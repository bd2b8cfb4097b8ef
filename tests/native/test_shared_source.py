"""One compiler cache for every tree of a platform: trees built from the stable source folder
(``native.shared_source``) with the build environment (``cmake_driver.build_environment``) share
ccache's results, by content only.

A small CMake project stands in for llama.cpp (a real tree takes minutes): three C files, two of
them including a header each. ccache's own counts (the build's stats log, as ``build`` reads
them) say what was compiled and what came from the cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from generator.cli import main
from generator.native import shared_source
from generator.native.ccache_stats import CacheCounts, cache_counts, read_stats_log
from generator.native.cmake_driver import build_environment, ccache_defines
from generator.native.shared_source import exclusive, stage_dir, staged_source, tree_id

KEY = "linux-x86_64"
# as the wrapper's CMakeLists.txt does: the tree's name in every compile command
CMAKE = """cmake_minimum_required(VERSION 3.14)
project(tiny C)
add_compile_definitions(LLAMA_BINDGEN_TREE_ID=${LLAMA_BINDGEN_TREE_ID})
add_library(tiny SHARED a.c b.c c.c)
target_include_directories(tiny PRIVATE include)
"""


def _tree(folder: Path, two: int) -> Path:
    (folder / "include").mkdir(parents=True)
    (folder / "CMakeLists.txt").write_text(CMAKE)
    (folder / "include" / "one.h").write_text("#define ONE 1\n")
    (folder / "include" / "two.h").write_text(f"#define TWO {two}\n")
    (folder / "a.c").write_text('#include "one.h"\nint a(void) { return ONE; }\n')
    (folder / "b.c").write_text('#include "two.h"\nint b(void) { return TWO; }\n')
    (folder / "c.c").write_text("int c(void) { return 3; }\n")
    return folder


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path]:
    """Two trees at digest-named folders, as fetch extracts them: B changes two.h only."""
    if not ccache_defines() or shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.fail("these tests need ccache, cmake and ninja (the build's own tools)")
    return _tree(tmp_path / "trees" / "tag-b1-aaaa", 2), _tree(
        tmp_path / "trees" / "tag-b2-bbbb", 3
    )


def _build(tree: Path, cache: Path, name: str, staged: bool = True) -> tuple[CacheCounts, Path]:
    """Configure and compile ``tree`` in ``<cache>/build/<name>`` (as ``build`` lays it out);
    this build's ccache counts and the folder of its objects."""
    bdir = cache / "build" / name
    log = bdir / "logs" / "ccache-stats.log"
    log.unlink(missing_ok=True)

    def run(source: Path) -> None:
        env = build_environment(cache, [source, bdir], log)
        cmake = ["cmake", "-S", str(source), "-B", str(bdir / "cmake"), "-G", "Ninja",
                 "-DCMAKE_BUILD_TYPE=Release", *ccache_defines(),
                 f"-DLLAMA_BINDGEN_TREE_ID={tree_id(tree, tree.name)}"]  # fmt: skip
        for argv in (cmake, ["ninja", "-C", str(bdir / "cmake")]):
            subprocess.run(argv, env=env, check=True, capture_output=True)

    if staged:
        with staged_source(tree, cache, KEY, f"build {name}") as source:
            run(source)
    else:
        run(tree)
    counts = read_stats_log(log) or CacheCounts(0, 0)
    return counts, bdir / "cmake" / "CMakeFiles" / "tiny.dir"


def _direct_hits(cache: Path, name: str) -> int:
    """How many of the last build's hits in ``<cache>/build/<name>`` were direct-mode hits."""
    log = cache / "build" / name / "logs" / "ccache-stats.log"
    return log.read_text().splitlines().count("direct_cache_hit")


def _objects(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.o"))}


def test_a_later_tree_takes_unchanged_objects_from_the_cache(
    trees: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree_a, tree_b = trees
    cache = tmp_path / "cache"
    first, objects_a = _build(tree_a, cache, "tiny-a")
    assert (first.hits, first.misses) == (0, 3)
    built_a = _objects(objects_a)

    second, objects_b = _build(tree_b, cache, "tiny-b")
    # a.c and c.c are unchanged: from the cache (by their preprocessed text: direct mode serves a
    # tree only what was recorded for it); b.c includes the changed two.h: compiled
    assert (second.hits, second.misses) == (1 + 1, 1)
    assert _direct_hits(cache, "tiny-b") == 0
    built_b = _objects(objects_b)
    assert built_b["a.c.o"] == built_a["a.c.o"] and built_b["c.c.o"] == built_a["c.c.o"]
    assert built_b["b.c.o"] != built_a["b.c.o"]

    # back to A in a new build folder: every object from the cache, and they are A's
    again, objects_again = _build(tree_a, cache, "tiny-a-again")
    assert (again.hits, again.misses) == (3, 0)
    assert _direct_hits(cache, "tiny-a-again") == 3  # the same tree: its own direct-mode records
    assert _objects(objects_again) == built_a
    # and in A's own build folder, Ninja finds A's objects current (the links keep the times)
    rerun, objects_rerun = _build(tree_a, cache, "tiny-a")
    assert (rerun.hits, rerun.misses) == (0, 0) and _objects(objects_rerun) == built_a

    totals = cache_counts(cache / "ccache")
    assert (totals.hits, totals.misses) == (2 + 3, 3 + 1)
    # `llama-bindgen cache` reports the same totals
    capsys.readouterr()
    assert main(["cache", "--cache", str(cache), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["hits"], report["misses"], report["hit_rate"]) == (5, 4, 5 / 9)
    assert report["size_kib"] > 0


def test_a_header_a_later_tree_adds_earlier_in_the_include_path_is_seen(
    trees: tuple[Path, Path], tmp_path: Path
) -> None:
    """ccache's direct mode records the headers a compilation read, not those it would have read
    had they existed: a two.h beside b.c (found before include/two.h) must not pass unseen."""
    tree_a, _ = trees
    shadowing = tmp_path / "trees" / "tag-b3-cccc"
    shutil.copytree(tree_a, shadowing)
    (shadowing / "two.h").write_text("#define TWO 7\n")
    cache = tmp_path / "cache"
    _, objects_a = _build(tree_a, cache, "tiny-a")
    built_a = _objects(objects_a)
    later, objects_later = _build(shadowing, cache, "tiny-c")
    assert (later.hits, later.misses) == (2, 1)
    built = _objects(objects_later)
    assert built["b.c.o"] != built_a["b.c.o"] and built["a.c.o"] == built_a["a.c.o"]


def test_trees_built_where_they_were_extracted_share_nothing(
    trees: tuple[Path, Path], tmp_path: Path
) -> None:
    """The reason for the stable folder: a tree's own folder name is in every relative path."""
    tree_a, tree_b = trees
    cache = tmp_path / "cache"  # the old layout: the base folder is the trees' and builds' parent
    _build(tree_a, cache, "tiny-a", staged=False)
    second, _ = _build(tree_b, cache, "tiny-b", staged=False)
    assert (second.hits, second.misses) == (0, 3)


def test_the_stage_is_the_tree_made_of_links(trees: tuple[Path, Path], tmp_path: Path) -> None:
    tree_a, tree_b = trees
    cache = tmp_path / "cache"
    with staged_source(tree_a, cache, KEY, "build") as source:
        assert source == stage_dir(cache, KEY)
        assert (source / "a.c").stat().st_ino == (tree_a / "a.c").stat().st_ino
        assert (source / "a.c").stat().st_mtime_ns == (tree_a / "a.c").stat().st_mtime_ns
    (tree_b / "only-in-b.c").write_text("int d;\n")
    with staged_source(tree_b, cache, KEY, "build") as source:
        assert (source / "include" / "two.h").read_text() == "#define TWO 3\n"
    with staged_source(tree_a, cache, KEY, "build") as source:  # nothing of B is left
        assert not (source / "only-in-b.c").exists()
        assert (source / "include" / "two.h").read_text() == "#define TWO 2\n"
    shutil.rmtree(source)
    source.symlink_to(tree_b)  # a link left there is replaced, and what it points at kept
    with staged_source(tree_a, cache, KEY, "build") as source:
        assert not source.is_symlink() and (tree_b / "only-in-b.c").is_file()


def test_a_second_build_of_the_key_waits_for_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    events: list[str] = []
    monkeypatch.setattr(shared_source, "progress", said.append)
    lock = tmp_path / "stage" / f"{KEY}.lock"

    def second() -> None:
        with exclusive(lock, "build two"):
            events.append("second holds the lock")

    with exclusive(lock, "build one"):
        waiter = threading.Thread(target=second)
        waiter.start()
        deadline = time.monotonic() + 60
        while not said and time.monotonic() < deadline:  # until the second says it waits
            time.sleep(0.05)
        events.append("first lets go")
    waiter.join(60)
    assert said and said[0].startswith(f"build two: waiting for another build holding {lock}")
    assert events == ["first lets go", "second holds the lock"]


def test_staged_wrapper_files_of_other_contents_are_newer_than_any_object(tmp_path: Path) -> None:
    """A build folder shared by checkouts: staged files keep their checkout's times while their
    contents are what the folder last built with, and all get the time now when not (an older
    file of other contents would look up to date to Ninja)."""
    from generator.native.shared_source import mark_changed, record_contents

    staged, record = tmp_path / "native_wrapper", tmp_path / "build" / "wrapper-sources.sha256"
    staged.mkdir()
    source = staged / "llama_mtp.cpp"
    source.write_text("int a;\n")
    os.utime(source, (1_000_000, 1_000_000))
    digest = mark_changed(staged, record)  # no record yet: a first build
    assert source.stat().st_mtime > 1_000_000
    record_contents(record, digest)
    os.utime(source, (1_000_000, 1_000_000))
    mark_changed(staged, record)  # the same contents (another checkout's copy, older)
    assert source.stat().st_mtime == 1_000_000
    source.write_text("int b;\n")
    os.utime(source, (1_000_000, 1_000_000))
    mark_changed(staged, record)  # other contents, an old time
    assert source.stat().st_mtime > 1_000_000
