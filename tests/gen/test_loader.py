"""The emitted loader against real (tiny) shared libraries built here with the C compiler."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def _compiler() -> str:
    found = shutil.which("cc") or shutil.which("gcc")
    if found is None:
        pytest.fail("a C compiler (cc) is needed to build stand-in libraries for the loader test")
    return found


def _shared_library(folder: Path, name: str, source: str) -> None:
    src = folder / f"{name}.c"
    src.write_text(source, encoding="utf-8")
    subprocess.run(
        [_compiler(), "-shared", "-fPIC", "-o", str(folder / name), str(src)], check=True
    )
    src.unlink()


@pytest.fixture(scope="module")
def lib_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if sys.platform != "linux":
        pytest.fail("the stand-in libraries are built for Linux; add a recipe for this platform")
    folder = tmp_path_factory.mktemp("libs")
    _shared_library(folder, "libggml-base.so", "unsigned long ggml_type_size(int t) { return 4; }")
    _shared_library(folder, "libggml-cpu.so", "int ggml_cpu_has_avx(void) { return 1; }")
    _shared_library(folder, "libggml.so", "int ggml_backend_reg_count_stub(void) { return 0; }")
    _shared_library(folder, "libllama.so", "unsigned llama_n_rs_seq(const void *c) { return 7; }")
    return folder


def _run(
    package: Path, code: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "LLAMA_BINDGEN_LIB_DIR"}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=package.parent, env=full_env, capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_load_from_explicit_path_without_wrapper(package: Path, lib_dir: Path) -> None:
    result = _run(
        package,
        f"""
        import llama_bindings
        libs = llama_bindings.load({str(lib_dir)!r}, check_abi=False)
        assert libs.llama_mtp is None
        print(libs.llama.llama_n_rs_seq(libs.ffi.NULL), libs.ggml.ggml_type_size(0),
              libs.ggml.ggml_cpu_has_avx())
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["7", "4", "1"]


def test_environment_variable_and_wrapper(package: Path, lib_dir: Path, tmp_path: Path) -> None:
    with_mtp = tmp_path / "with_mtp"
    shutil.copytree(lib_dir, with_mtp)
    _shared_library(with_mtp, "libllama_mtp.so", "void llama_mtp_free(void *m) { }")
    result = _run(
        package,
        """
        import llama_bindings
        libs = llama_bindings.load(check_abi=False)
        assert libs.llama_mtp is not None
        libs.llama_mtp.llama_mtp_free(libs.ffi.NULL)
        print(libs.lib_dir)
        """,
        {"LLAMA_BINDGEN_LIB_DIR": str(with_mtp)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(with_mtp)


# (Libraries' attribute, its manifest name, its file, a function: its C definition and a call
# that prints what it returns)
OPTIONAL_LIBRARIES = [
    pytest.param(
        "mtmd",
        "mtmd",
        "libmtmd.so",
        "mtmd_default_marker",
        'const char *mtmd_default_marker(void) { return "<m>"; }',
        "libs.ffi.string(libs.mtmd.mtmd_default_marker()).decode()",
        "<m>",
        id="mtmd",
    ),
    pytest.param(
        "ggml_rpc",
        "ggml_rpc",
        "libggml-rpc.so",
        "ggml_backend_is_rpc",
        "_Bool ggml_backend_is_rpc(void *backend) { return backend == 0; }",
        "libs.ggml_rpc.ggml_backend_is_rpc(libs.ffi.NULL)",
        "True",
        id="ggml_rpc",
    ),
]


@pytest.mark.parametrize(
    ("attribute", "library", "file", "function", "source", "call", "printed"), OPTIONAL_LIBRARIES
)
def test_an_optional_library_is_optional_and_says_why_when_absent(
    package: Path,
    lib_dir: Path,
    tmp_path: Path,
    attribute: str,
    library: str,
    file: str,
    function: str,
    source: str,
    call: str,
    printed: str,
) -> None:
    """Without libmtmd (libggml-rpc) the other libraries load; ``libs.mtmd`` (``ggml_rpc``) is
    false and a function looked up on it raises the typed error naming the file it looked for.
    With it, its calls work."""
    absent = _run(
        package,
        f"""
        import llama_bindings
        libs = llama_bindings.load({str(lib_dir)!r}, check_abi=False)
        print(bool(libs.{attribute}), libs.llama.llama_n_rs_seq(libs.ffi.NULL))
        try:
            libs.{attribute}.{function}()
        except llama_bindings.LibraryUnavailableError as exc:
            print(exc.library, isinstance(exc, llama_bindings.LibraryNotFoundError))
            print(exc)
        """,
    )
    assert absent.returncode == 0, absent.stderr
    lines = absent.stdout.splitlines()
    assert lines[:2] == ["False 7", f"{library} True"]
    assert f"{function}: {library} is not available" in lines[2] and file in lines[2]
    present_dir = tmp_path / f"with_{attribute}"
    shutil.copytree(lib_dir, present_dir)
    _shared_library(present_dir, file, source)
    present = _run(
        package,
        f"""
        import llama_bindings
        libs = llama_bindings.load({str(present_dir)!r}, check_abi=False)
        print(bool(libs.{attribute}), {call})
        """,
    )
    assert present.returncode == 0, present.stderr
    assert present.stdout.split() == ["True", printed]


def test_package_lib_folder_is_the_fallback(package: Path) -> None:
    result = _run(
        package,
        """
        import llama_bindings
        try:
            llama_bindings.load()
        except llama_bindings.LibraryNotFoundError as exc:
            print(exc)
        """,
    )
    assert result.returncode == 0, result.stderr
    assert str(package / "lib") in result.stdout


def test_missing_symbols_raise_what_symbol_errors_names(package: Path, lib_dir: Path) -> None:
    """With the pre-parsed ffi, a declared function a library does not export raises cffi's
    ``ffi.error``: ggml's lookup over its libraries catches it (AttributeError in the end), and
    ``_ffi.SYMBOL_ERRORS`` names it for callers of the other libraries."""
    result = _run(
        package,
        f"""
        import llama_bindings
        from llama_bindings._ffi import SYMBOL_ERRORS
        libs = llama_bindings.load({str(lib_dir)!r}, check_abi=False)
        print(hasattr(libs.ggml, "ggml_add"))
        try:
            libs.llama.llama_max_devices
        except SYMBOL_ERRORS as exc:
            print(type(exc).__name__)
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "error"]


def test_libraries_is_read_only_and_compared_by_its_fields(package: Path) -> None:
    result = _run(
        package,
        """
        from pathlib import Path
        from llama_bindings import Libraries
        a = Libraries(ffi=1, llama=2, ggml=3, llama_mtp=None, lib_dir=Path("lib"))
        b = Libraries(1, 2, 3, None, Path("lib"), "abi")
        c = Libraries(1, 2, 3, None, Path("lib"), "api")
        print(a == b, hash(a) == hash(b), a == c, a.mode, a.llama, a.ggml)
        for action in (lambda: setattr(a, "mode", "api"), lambda: delattr(a, "llama")):
            try:
                action()
            except AttributeError:
                print("read-only")
        print(repr(a))
        """,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["True", "True", "False", "abi", "2", "3"]
    assert lines[1:3] == ["read-only", "read-only"]
    assert lines[3] == (
        "Libraries(ffi=1, ggml=3, ggml_rpc=UnavailableLibrary('ggml_rpc', 'not opened'), "
        "lib_dir=PosixPath('lib'), llama=2, llama_mtp=None, mode='abi', "
        "mtmd=UnavailableLibrary('mtmd', 'not opened'))"
    )
