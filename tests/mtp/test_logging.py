"""llama.cpp's log: on the ``llama_bindings.llama_cpp`` logger (quiet by default), or on stderr
with ``verbose``; the runtime's metrics stay on their own logger."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from generator.native.build import BuildResult
from tests.mtp.conftest import BINDINGS_PARENT, generate

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]


def _child_stderr(host_build: BuildResult, model: Path, verbose: str) -> tuple[str, str]:
    """stdout and stderr of a fresh process that loads ``model`` and generates 16 tokens."""
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(BINDINGS_PARENT)!r})
        import llama_bindings
        from llama_bindings import runtime
        libs = llama_bindings.load({str(host_build.lib_dir)!r})
        with runtime.Model({str(model)!r}, libs=libs, verbose={verbose}) as model:
            with runtime.Context(model, n_ctx=128) as ctx:
                print(len(ctx.generate([10, 11, 12], max_tokens=16).tokens))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, proc.stderr


def test_quiet_by_default_and_verbose_on_request(
    host_build: BuildResult, models: dict[str, Path]
) -> None:
    quiet_out, quiet_err = _child_stderr(host_build, models["agree"], "None")
    loud_out, loud_err = _child_stderr(host_build, models["agree"], "True")
    assert quiet_out.split() == loud_out.split() == ["16"]
    assert quiet_err == ""
    # verbose: llama.cpp's own lines, as it writes them by itself
    assert "llama_model_loader" in loud_err and "llama_context" in loud_err
    assert len(loud_err.splitlines()) > 50


def test_log_records_one_per_line(
    runtime: Any, libs: Any, models: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    runtime.set_llama_log(libs, verbose=False)
    with caplog.at_level(logging.DEBUG, logger="llama_bindings.llama_cpp"):
        result = generate(runtime, libs, models["agree"], mtp=True, max_tokens=8)
    records = [r for r in caplog.records if r.name == "llama_bindings.llama_cpp"]
    assert len(result.tokens) == 8
    assert len(records) > 50
    assert all("\n" not in r.getMessage() and r.getMessage() for r in records)
    assert any(r.getMessage().startswith("llama_model_loader") for r in records)
    assert {r.levelno for r in records} <= {logging.DEBUG, logging.INFO, logging.WARNING,
                                             logging.ERROR}  # fmt: skip
    # the metrics record stays on the runtime's logger, apart from llama.cpp's
    metrics = [r for r in caplog.records if r.name == "llama_bindings.runtime"]
    assert not [r for r in metrics if "llama_model_loader" in r.getMessage()]


def test_verbose_switch_writes_stderr_not_records(
    runtime: Any,
    libs: Any,
    models: dict[str, Path],
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    try:
        with caplog.at_level(logging.DEBUG, logger="llama_bindings.llama_cpp"):
            with runtime.Model(models["plain"], libs=libs, verbose=True):
                pass
        assert not [r for r in caplog.records if r.name == "llama_bindings.llama_cpp"]
        assert "llama_model_loader" in capfd.readouterr().err
    finally:
        runtime.set_llama_log(libs, verbose=False)
    with caplog.at_level(logging.DEBUG, logger="llama_bindings.llama_cpp"):
        with runtime.Model(models["plain"], libs=libs):  # None keeps the setting: quiet
            pass
    assert [r for r in caplog.records if r.name == "llama_bindings.llama_cpp"]
    assert "llama_model_loader" not in capfd.readouterr().err


def test_missing_model_file_says_so(runtime: Any, libs: Any, tmp_path: Path) -> None:
    missing = tmp_path / "absent.gguf"
    with pytest.raises(FileNotFoundError, match="does not exist") as info:
        runtime.Model(missing, libs=libs)
    assert info.value.filename == str(missing)
    with pytest.raises(FileNotFoundError, match="is not a file"):
        runtime.Model(tmp_path, libs=libs)
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf")
    for verbose in (False, True):  # the reason is in the exception whatever the log's routing
        with pytest.raises(runtime.LlamaLoadError, match="invalid magic characters") as failed:
            runtime.Model(broken, libs=libs, verbose=verbose)
        assert "could not load the model" in str(failed.value)
        assert "expected 'GGUF'" in failed.value.reason
    runtime.set_llama_log(libs, verbose=False)


def test_callback_from_threads_never_raises(
    runtime: Any, libs: Any, models: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """The C callback llama.cpp holds, called as C would from other threads, with pieces of lines,
    bytes that are not UTF-8 and NULL: whole lines arrive, nothing is raised."""

    runtime.set_llama_log(libs, verbose=False)
    ffi = libs.ffi
    holder = ffi.new("ggml_log_callback *")
    data = ffi.new("void **")
    libs.llama.llama_log_get(holder, data)
    callback = holder[0]
    assert callback != ffi.NULL
    info, warn, cont = 2, 3, 5  # GGML_LOG_LEVEL_INFO, _WARN, _CONT

    def talk(n: int) -> None:
        for i in range(50):
            callback(warn, f"thread {n} line {i}\n".encode(), ffi.NULL)

    with caplog.at_level(logging.DEBUG, logger="llama_bindings.llama_cpp"):
        threads = [threading.Thread(target=talk, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        callback(warn, b"loading", ffi.NULL)
        callback(cont, b"...", ffi.NULL)
        callback(cont, b" done \xff\n", ffi.NULL)
        callback(warn, ffi.NULL, ffi.NULL)
        callback(warn, b"left open", ffi.NULL)
        callback(info, b"next\n", ffi.NULL)  # not a continuation: the open line ends first
    records = [(r.levelno, r.getMessage()) for r in caplog.records if r.name.endswith("llama_cpp")]
    expected = {(logging.WARNING, f"thread {n} line {i}") for n in range(4) for i in range(50)}
    assert expected <= set(records)
    assert records[-3:] == [
        (logging.WARNING, "loading... done \ufffd"),
        (logging.WARNING, "left open"),
        (logging.INFO, "next"),
    ]
    assert len(records) == 203
