"""``llama-bindgen build``: layout, build-info.json, reuse, failures, the pre-MTP tree."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import pytest

from generator.commands import build as build_command
from generator.hashing import file_sha256
from generator.native.build import build_dir_for, build_native
from generator.native.build_costs import COSTS_ENV, read_costs
from generator.native.build_info import wrapper_sources_sha256
from generator.native.cmake_driver import BuildError
from generator.native.shared_source import stage_dir, staged_wrapper_dir, tree_id
from generator.paths import default_cache_dir, wrapper_dir
from generator.platforms import get_platform
from generator.sources.tree import Tree
from tests.conftest import BuildFactory

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]


def _tree_meta(tree: Path) -> dict[str, str]:
    data: dict[str, str] = json.loads((tree / ".llama-bindgen-tree.json").read_text())
    return data


def test_host_build_layout_and_info(native_build: BuildFactory, tree_pin: Path) -> None:
    build = native_build(tree_pin, "linux-x86_64")
    meta = _tree_meta(tree_pin)
    info_path = build.platform_dir / "build-info.json"
    info = json.loads(info_path.read_text())
    # the record names the commit, or for a tree whose source states none its label
    assert info["commit"] == (Tree.read(tree_pin).commit_label) and info["tag"] == meta["tag"]
    assert info["platform"] == "linux-x86_64"
    assert info["mtp"]["status"] == "supported" and info["mtp"]["reason"] == ""
    # the wrapper's probes chose the pinned tree's own variants (the newest of each facet)
    assert info["mtp"]["probes"].startswith(
        "CORE=core BATCH=common_batch DECODE=llama_process DRAFT_SLOT=draft_pos0 EMBD=embd_nextn "
        "N_LAYER_NEXTN=n_layer_nextn CTX_OTHER=ctx_other"
    )
    assert info["cmake_options"]["GGML_NATIVE"] == "OFF"
    assert info["cmake_options"]["BUILD_SHARED_LIBS"] == "ON"
    assert info["compiler"]["cxx"]
    assert info["wrapper_sources_sha256"] == wrapper_sources_sha256()
    for name in ("libllama.so", "libggml.so", "libllama_mtp.so"):
        assert (build.lib_dir / name).exists(), name
    for rel, digest in info["libraries"].items():
        assert file_sha256(build.platform_dir / rel) == digest, rel
    assert {"lib/libllama_mtp.so", "lib/libggml-base.so"} <= {
        rel.split(".so")[0] + ".so" for rel in info["libraries"]
    }
    for header in ("llama.h", "ggml.h", "llama_mtp.h"):
        assert (build.include_dir / header).is_file(), header
    licences = build.platform_dir / "licenses"
    assert (licences / "LICENSE-llama.cpp").read_bytes() == (tree_pin / "LICENSE").read_bytes()
    assert (licences / "LICENSE-jsonhpp").is_file()  # json.hpp is compiled into common
    text = info_path.read_text()
    assert str(default_cache_dir()) not in text and str(tree_pin) not in text
    assert text == json.dumps(info, indent=2, sort_keys=True) + "\n"


def test_the_tree_is_compiled_from_the_stable_folder_under_its_name(
    native_build: BuildFactory, tree_pin: Path
) -> None:
    """Every tag's objects come from one folder (ccache shares them between tags), and every
    compile command names its tree (ccache's direct mode then serves a tree only its own)."""
    build = native_build(tree_pin, "linux-x86_64")
    tree = Tree.read(tree_pin)
    ninja = build_dir_for(tree, build.platform) / "cmake" / "build.ninja"
    if not ninja.is_file():  # the install was up to date, built in a folder named otherwise
        build_native(tree_pin, "linux-x86_64", force=True)
    text = ninja.read_text(encoding="utf-8")
    assert f"-DLLAMA_BINDGEN_TREE_ID={tree_id(tree.root, tree.digest)}" in text
    source = stage_dir(default_cache_dir(), "linux-x86_64")
    assert f"{source / 'src' / 'llama.cpp'}" in text and str(tree.root) not in text
    # and the wrapper's own sources from its staged copy, not from this checkout
    wrapper = staged_wrapper_dir(default_cache_dir(), "linux-x86_64")
    assert f"{wrapper / 'llama_mtp.cpp'}" in text and str(wrapper_dir()) not in text


def test_up_to_date_build_is_reused(native_build: BuildFactory, tree_pin: Path) -> None:
    first = native_build(tree_pin, "linux-x86_64")
    again = build_native(tree_pin, "linux-x86_64")
    assert not again.rebuilt
    assert again.info == first.info
    assert (again.platform_dir / "licenses" / "LICENSE-llama.cpp").is_file()


def test_failed_build_names_step_and_keeps_log(tmp_path: Path) -> None:
    tree = tmp_path / "broken-tree"
    (tree / "include").mkdir(parents=True)
    (tree / "include" / "llama.h").write_text("/* no MTP here */\n")
    (tree / "LICENSE").write_text("MIT\n")  # a tree without one is refused before configuring
    (tree / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.14)\nproject(broken C)\n"
        'message(FATAL_ERROR "deliberately broken tree")\n'
    )
    commit = "f" * 40
    (tree / ".llama-bindgen-tree.json").write_text(json.dumps({"tag": "broken", "commit": commit}))
    with pytest.raises(BuildError) as excinfo:
        build_native(tree, "linux-x86_64", out=tmp_path / "out")
    err = excinfo.value
    assert "configure" in err.step
    assert err.log.is_file() and "deliberately broken tree" in err.log.read_text()
    assert str(err.log) in str(err)
    assert not (tmp_path / "out" / "linux-x86_64" / "build-info.json").exists()
    shutil.rmtree(err.log.parent.parent)  # the broken tree's build folder under the cache


def test_pre_mtp_tree_builds_without_wrapper(
    native_build: BuildFactory, tree_63d93d1: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    build = native_build(tree_63d93d1, "linux-x86_64")
    assert not build.mtp.supported
    assert "LLAMA_CONTEXT_TYPE_MTP" in build.mtp.reason
    info = json.loads((build.platform_dir / "build-info.json").read_text())
    assert info["mtp"]["status"] == "unsupported"
    assert info["commit"] == _tree_meta(tree_63d93d1)["commit"]
    assert (build.lib_dir / "libllama.so").exists()
    assert not any("llama_mtp" in p.name for p in build.lib_dir.iterdir())
    assert not (build.include_dir / "llama_mtp.h").exists()


def test_build_command_reports_mtp_and_platform_folder(
    native_build: BuildFactory, tree_pin: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = native_build(tree_pin, "linux-x86_64")
    parser = argparse.ArgumentParser()
    build_command.register(parser.add_subparsers())
    args = parser.parse_args(["build", "--tree", str(tree_pin), "--platform", "linux-x86_64"])
    assert args.func(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "mtp: supported" in lines
    assert lines[-1] == str(expected.platform_dir)
    assert any(line.startswith("library: lib/libllama_mtp.so sha256:") for line in lines)


def _write_fake_tree(tree: Path, commit: str) -> None:
    """A tiny tree that claims the MTP API but cannot compile the wrapper (no real llama.h)."""
    (tree / "include").mkdir(parents=True)
    (tree / "common").mkdir()
    (tree / "include" / "llama.h").write_text(
        "/* LLAMA_CONTEXT_TYPE_MTP n_rs_seq */\nint llama_fake(void);\n"
    )
    (tree / "common" / "speculative.h").write_text("")
    (tree / "LICENSE").write_text("MIT License (fake tree)\n")
    (tree / "common" / "common.h").write_text("/* COMMON_SPECULATIVE_TYPE_DRAFT_MTP */\n")
    (tree / "llama.c").write_text("int llama_fake(void) { return 1; }\n")
    (tree / "ggml.c").write_text("int ggml_fake(void) { return 2; }\n")
    (tree / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.14)\nproject(fake C)\n"
        "add_library(llama SHARED llama.c)\nadd_library(ggml SHARED ggml.c)\n"
        "install(TARGETS llama ggml LIBRARY DESTINATION lib RUNTIME DESTINATION bin)\n"
        "install(FILES include/llama.h DESTINATION include)\n"
    )
    (tree / ".llama-bindgen-tree.json").write_text(json.dumps({"tag": "fake", "commit": commit}))


def test_a_tree_with_the_mtp_api_that_the_wrapper_cannot_build_fails_naming_the_probe(
    tmp_path: Path,
) -> None:
    """The fake tree declares the MTP API but none of what the wrapper uses: the build gate
    fails with the probe that matched no variant and the compiler's first error, never a build
    without MTP or a later error in its place."""
    tree = tmp_path / "fake-tree"
    _write_fake_tree(tree, "e" * 40)
    out = tmp_path / "out"
    try:
        with pytest.raises(BuildError) as caught:
            build_native(tree, "linux-x86_64", out=out)
        message = str(caught.value)
        assert "the MTP wrapper against this tree" in message
        assert "probe CORE: the tree matches none of the known variants (core)" in message
        assert "first compiler error:" in message and "error" in message.split("first compiler")[1]
        assert "API-mode" not in message
        assert not (out / "linux-x86_64" / "lib").exists()
    finally:
        shutil.rmtree(
            build_dir_for(Tree.read(tree), get_platform("linux-x86_64")), ignore_errors=True
        )


def test_an_upstream_change_the_wrapper_does_not_know_is_named(
    tree_pin: Path, tmp_path: Path
) -> None:
    """The pinned tree with the draft slot's position field renamed (as upstream renamed n_past to
    pos0 once): neither known variant compiles, and the build says which probe, with the compiler's
    words about the upstream declaration, before anything is compiled."""
    tree = tmp_path / "pin-renamed"
    shutil.copytree(tree_pin, tree, symlinks=True, copy_function=os.link)
    header = tree / "common" / "speculative.h"
    text = header.read_text(encoding="utf-8")
    assert "llama_pos   pos0;" in text
    header.unlink()  # a hard link to the cached tree's file: replace it, never write through
    header.write_text(text.replace("llama_pos   pos0;", "llama_pos   pos_first;"), "utf-8")
    meta = _tree_meta(tree_pin)
    (tree / ".llama-bindgen-tree.json").unlink()
    (tree / ".llama-bindgen-tree.json").write_text(
        json.dumps({**meta, "tag": "pin-renamed", "commit": ""}), encoding="utf-8"
    )
    try:
        with pytest.raises(BuildError) as caught:
            build_native(tree, "linux-x86_64", out=tmp_path / "out")
        message = str(caught.value)
        assert "probe DRAFT_SLOT: the tree matches none of the known variants" in message
        assert "(draft_pos0, draft_n_past)" in message
        assert "has no member named" in message and "n_past" in message.split("compiler error")[1]
    finally:
        shutil.rmtree(
            build_dir_for(Tree.read(tree), get_platform("linux-x86_64")), ignore_errors=True
        )
    assert "pos0;" in (tree_pin / "common" / "speculative.h").read_text(encoding="utf-8")


def test_the_tracking_issue_of_such_a_tree_leads_with_the_probe_line(tmp_path: Path) -> None:
    """The build gate's detail is the failure's line, and the tracking workflow's issue
    (``propose --failed``) lists it as the build gate's failure."""
    from generator.bump.gates import PlatformRun, build_gate, to_json
    from generator.commands.propose import failures
    from generator.ir.interface import Interface, Source

    tree = tmp_path / "fake-tree"
    _write_fake_tree(tree, "c" * 40)
    run = PlatformRun(
        "linux-x86_64",
        Tree.read(tree),
        Interface(Source("fake", "", ""), "", (), ()),
        tmp_path,
        tmp_path / "logs",
    )
    try:
        outcome, result = build_gate(
            run, lambda root, platform: build_native(root, platform, out=tmp_path / "o")
        )
        assert result is None and outcome.status == "failed"
        lines = failures(json.loads(to_json({"linux-x86_64": [outcome]})))
        assert len(lines) == 1 and lines[0].startswith("- linux-x86_64: build failed: ")
        assert "probe CORE: the tree matches none of the known variants" in lines[0]
    finally:
        shutil.rmtree(
            build_dir_for(Tree.read(tree), get_platform("linux-x86_64")), ignore_errors=True
        )


def test_a_tree_without_a_licence_builds_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lean sdist's tree (no LICENSE) is built and gated; build-info.json records what it
    lacks, which is what `release` refuses to ship (tests/release). The build records what it
    cost (build_costs), once."""
    costs = tmp_path / "costs.jsonl"
    monkeypatch.setenv(COSTS_ENV, str(costs))
    tree = tmp_path / "fake-tree"
    _write_fake_tree(tree, "d" * 40)
    (tree / "LICENSE").unlink()
    (tree / "include" / "llama.h").write_text("int llama_fake(void);\n")  # no MTP API: no wrapper
    try:
        result = build_native(tree, "linux-x86_64", out=tmp_path / "out")
        assert result.info["licenses"].startswith("missing: LICENSE")
        assert not result.mtp.supported and "predates the MTP API" in result.mtp.reason
        assert (result.lib_dir / "libllama.so").is_file()
        [cost] = read_costs(costs)
        assert (cost.label, cost.tree) == ("build linux-x86_64", "fake") and cost.seconds > 0
        build_native(tree, "linux-x86_64", out=tmp_path / "out")  # reused: nothing to record
        assert len(read_costs(costs)) == 1
    finally:
        shutil.rmtree(
            build_dir_for(Tree.read(tree), get_platform("linux-x86_64")), ignore_errors=True
        )


def test_a_configured_build_folder_is_not_configured_again(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A second build of a tree into another place (a wheel's copy, a kit, a workflow's job)
    reuses its build folder's configure when the arguments and the wrapper sources are the same
    (CMake's probes alone take about 20 s); ``force`` configures again, and so does a folder whose
    last configure did not finish."""
    tree = tmp_path / "fake-tree"
    _write_fake_tree(tree, "f" * 40)
    (tree / "include" / "llama.h").write_text("int llama_fake(void);\n")  # no MTP API: no wrapper
    plat = get_platform("linux-x86_64")
    try:
        first = build_native(tree, "linux-x86_64", out=tmp_path / "a")
        assert ": configure (log:" in capfd.readouterr().err
        second = build_native(tree, "linux-x86_64", out=tmp_path / "b")
        err = capfd.readouterr().err
        assert "configure: configured with these options already" in err
        assert ": configure (log:" not in err
        assert second.info["libraries"] == first.info["libraries"]
        build_native(tree, "linux-x86_64", out=tmp_path / "b", force=True)
        assert ": configure (log:" in capfd.readouterr().err
        (build_dir_for(Tree.read(tree), plat) / "configured.json").unlink()  # as a failed one
        build_native(tree, "linux-x86_64", out=tmp_path / "c")
        assert ": configure (log:" in capfd.readouterr().err
    finally:
        shutil.rmtree(build_dir_for(Tree.read(tree), plat), ignore_errors=True)


def test_a_bump_parse_gives_the_build_what_its_own_parse_gives(tree_pin: Path) -> None:
    """The one parse of a bump (every target) stands in for the build's own (host only)."""
    from generator.native.build import build_interface, host_interface
    from generator.parse.frontend import parse_tree

    tree = Tree.read(tree_pin)
    own, own_headers = build_interface(tree)
    given, headers = host_interface(parse_tree(tree))
    assert (
        headers
        == own_headers
        == [
            "llama.h",
            "llama_mtp.h",
            "mtmd.h",
            "mtmd-helper.h",
            "ggml-rpc.h",
        ]
    )
    assert given.dumps() == own.dumps()


def test_a_build_given_the_parse_does_not_parse_again(
    native_build: BuildFactory, tree_pin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from generator.native import build as native
    from generator.parse.frontend import parse_tree

    first = native_build(tree_pin, "linux-x86_64")
    api = parse_tree(Tree.read(tree_pin))

    def no_parse(tree: Tree) -> None:
        raise AssertionError("build_native parsed the headers again")

    monkeypatch.setattr(native, "build_interface", no_parse)
    again = build_native(Tree.read(tree_pin), "linux-x86_64", interface=api)
    assert not again.rebuilt and again.info == first.info
