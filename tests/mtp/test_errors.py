"""Each unsupported combination raises LlamaUnsupportedError with its reason."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from generator.emit import emit_package
from generator.native.build import BuildResult
from generator.parse.frontend import ParseOptions, parse_interface, tree_source
from generator.sources.licenses import llama_license
from generator.sources.tree import Tree
from tests.mtp.conftest import build_or_fail, mtp_spec

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]


def test_model_without_nextn_layers(runtime: Any, libs: Any, models: dict[str, Path]) -> None:
    with runtime.Model(models["plain"], load_mtp=True, libs=libs) as model:
        assert model.n_nextn_layers == 0
        with pytest.raises(runtime.LlamaUnsupportedError, match="no NextN"):
            runtime.Context(model, speculative=mtp_spec(runtime))


def test_model_loaded_without_mtp_layers(runtime: Any, libs: Any, models: dict[str, Path]) -> None:
    with runtime.Model(models["agree"], libs=libs) as model:
        assert model.n_nextn_layers == 1
        with pytest.raises(runtime.LlamaUnsupportedError, match="load_mtp=True"):
            runtime.Context(model, speculative=mtp_spec(runtime))


def test_libraries_without_the_wrapper(
    runtime: Any, host_build: BuildResult, models: dict[str, Path], tmp_path: Path
) -> None:
    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    for path in host_build.lib_dir.iterdir():
        if "llama_mtp" not in path.name:
            shutil.copy2(path, lib_dir / path.name, follow_symlinks=False)
    # the build record beside lib/, as in a build folder: the files left are still its own
    shutil.copy2(host_build.platform_dir / "build-info.json", tmp_path / "build-info.json")
    without = importlib.import_module("llama_bindings").load(lib_dir)
    assert without.llama_mtp is None
    with runtime.Model(models["agree"], load_mtp=True, libs=without) as model:
        with pytest.raises(runtime.LlamaUnsupportedError, match="no llama_mtp wrapper"):
            runtime.Context(model, speculative=mtp_spec(runtime))
        # speculation off still works with these libraries
        with runtime.Context(model, n_ctx=128) as ctx:
            assert len(ctx.generate([3, 4], max_tokens=4).tokens) == 4


def test_pre_mtp_release_63d93d1(
    tree_63d93d1: Path, models: dict[str, Path], tmp_path: Path
) -> None:
    """Bindings and libraries of a release without the MTP API: asking for MTP raises the typed
    error (in a child process: these are other bindings)."""
    build = build_or_fail(tree_63d93d1, "linux-x86_64")
    assert not build.mtp.supported
    # as `llama-bindgen build` does: the wrapper header only for trees with the MTP API
    reason = Tree.read(tree_63d93d1).mtp_api_missing_reason
    assert reason is not None and build.mtp.reason == reason  # CMake read the same rule
    options = ParseOptions(tree_63d93d1, wrapper_header=None)
    api = parse_interface(options, tree_source(tree_63d93d1))
    package = emit_package(api, tmp_path, llama_license=llama_license(tree_63d93d1))
    code = textwrap.dedent(
        f"""
        import json
        import llama_bindings
        from llama_bindings import runtime
        libs = llama_bindings.load({str(build.lib_dir)!r})
        out = {{"mtp_api": runtime.MTP_API, "wrapper": libs.llama_mtp is not None}}
        try:  # refused before the file is read (63d93d1 cannot read the test vocabulary)
            runtime.Model({str(models["agree"])!r}, load_mtp=True, libs=libs)
        except runtime.LlamaUnsupportedError as exc:
            out["error"] = exc.reason
        print(json.dumps(out))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=package.package_dir.parent,
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["mtp_api"] is False and out["wrapper"] is False
    assert "no MTP API" in out["error"]


@pytest.fixture
def mtp_context(runtime: Any, libs: Any, models: dict[str, Path]) -> Any:
    with runtime.Model(models["agree"], load_mtp=True, libs=libs) as model:
        with runtime.Context(model, n_ctx=128, speculative=mtp_spec(runtime)) as ctx:
            yield ctx


def test_more_than_one_sequence(runtime: Any, libs: Any, models: dict[str, Path]) -> None:
    """One sidecar serves every sequence of the context (tests/mtp/test_speculation_composes.py
    checks the outputs); more prompts than sequences is a ValueError, as without speculation."""
    with runtime.Model(models["agree"], load_mtp=True, libs=libs) as model:
        with runtime.Context(model, n_ctx=128, n_seq_max=2, speculative=mtp_spec(runtime)) as ctx:
            assert len(ctx.generate([3, 4], max_tokens=2).tokens) == 2
            with pytest.raises(ValueError, match="n_seq_max >= 3"):
                ctx.generate_batch([[3], [4], [5]], max_tokens=2)


def test_a_raw_llama_state_with_mtp_is_refused(runtime: Any, mtp_context: Any) -> None:
    """A raw llama.cpp image lacks the sidecar's state (tests/mtp/test_state.py: the container)."""
    with pytest.raises(runtime.LlamaStateError, match=r"raw llama\.cpp state"):
        mtp_context.load_state(b"\0" * 16, [1])


def test_plain_state_round_trip(runtime: Any, libs: Any, models: dict[str, Path]) -> None:
    with runtime.Model(models["agree"], libs=libs) as model:
        with runtime.Context(model, n_ctx=128) as ctx:
            result = ctx.generate([3, 4, 5], max_tokens=3)
            state = ctx.save_state()
            assert len(state) > 0
            held = [3, 4, 5, *result.tokens[:-1]]  # the last token was sampled, not decoded
            ctx.load_state(state, held)
            with pytest.raises(runtime.LlamaStateError, match="tokens= differs"):
                ctx.load_state(state, [3, 4, 5])
            # a raw llama.cpp image, as llama_state_get_data writes it, loads with its tokens
            llama = libs.llama
            size = int(llama.llama_state_get_size(ctx.handle))
            buf = libs.ffi.new("uint8_t[]", size)
            raw = bytes(
                libs.ffi.buffer(buf, int(llama.llama_state_get_data(ctx.handle, buf, size)))
            )
            ctx.load_state(raw, held)
            with pytest.raises(runtime.LlamaStateError, match="with tokens="):
                ctx.load_state(raw)


def test_a_wrapper_missing_a_function_is_unsupported_not_a_cffi_error(
    host_build: BuildResult,
) -> None:
    """With the pre-parsed ffi a missing function raises cffi's ffi.error, not AttributeError:
    the runtime still says which function the wrapper lacks. libggml-base stands in for a wrapper
    that exports none of them (as a folder loaded with check_abi=False could hold), in a fresh
    process: once the real wrapper is loaded, the dynamic linker finds its symbols through any
    handle."""
    code = textwrap.dedent(
        """
        import sys, types
        from llama_bindings._ffi import ffi
        from llama_bindings.runtime import LlamaUnsupportedError, speculative
        stand_in = ffi.dlopen(sys.argv[1])
        try:
            speculative.mtp_wrapper(types.SimpleNamespace(llama_mtp=stand_in), "draft-mtp")
        except LlamaUnsupportedError as exc:
            print("unsupported:", exc.reason)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(host_build.lib_dir / "libggml-base.so")],
        capture_output=True, text=True, timeout=120, check=False,
        env={"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "generated")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "unsupported: the llama_mtp wrapper these bindings declare has no" in proc.stdout
