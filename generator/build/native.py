"""``llama-bindgen build``: configure, build, install llama.cpp + the MTP wrapper for a platform.

Layout of the result, ``<out>/<platform>/``:

* ``lib/``: the shared libraries (libllama, ggml*, libllama_mtp when supported; on Windows also the
  MinGW runtime DLLs they need),
* ``include/``: llama.h, the ggml headers and llama_mtp.h,
* ``build-info.json``: tag, commit, compiler, CMake options, MTP support and the sha256 of every
  library.

The default ``<out>`` is ``<cache>/native/<commit12>``; CMake's build folder is
``<cache>/build/<platform>-<commit12>`` and ccache keeps its files in ``<cache>/ccache``.
A build whose build-info.json matches the tree's commit and the wrapper's sources, with intact
libraries, is reused without running CMake.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from generator import __version__
from generator.build import api_module
from generator.build.build_info import (
    BUILD_INFO_FORMAT,
    BUILD_INFO_NAME,
    MtpSupport,
    libraries_intact,
    read_build_info,
    wrapper_sources_sha256,
    write_build_info,
)
from generator.build.cmake_driver import (
    BuildError,
    build_environment,
    ccache_path,
    progress,
    run_step,
)
from generator.build.nextn_archs import single_nextn_architectures
from generator.build.tree import TreeInfo, read_tree
from generator.emit import API_MODULE
from generator.errors import UsageError
from generator.hashing import file_sha256
from generator.ir import Interface
from generator.paths import default_cache_dir, templates_dir, wrapper_dir
from generator.platforms import (
    BASE_CMAKE_OPTIONS,
    Platform,
    Toolchain,
    get_platform,
    host_toolchain,
    runtime_library_path,
)
from generator.sources.licenses import llama_license, write_licenses

ABI_LIBRARY = "llama_bindgen_abi"
API_MODULE_PREFIX = f"lib/{API_MODULE}"
ABI_SOURCE = "llama_bindgen_abi.c"
COMPAT_HEADER = "mingw_compat.h"
TOOLCHAIN_FILE = "toolchain.cmake"


@dataclass(frozen=True)
class BuildResult:
    platform: Platform
    platform_dir: Path
    info: dict[str, Any]
    mtp: MtpSupport
    rebuilt: bool

    @property
    def lib_dir(self) -> Path:
        return self.platform_dir / "lib"

    @property
    def include_dir(self) -> Path:
        return self.platform_dir / "include"


def default_out_dir(tree: TreeInfo) -> Path:
    return default_cache_dir() / "native" / tree.commit12


def build_dir_for(tree: TreeInfo, plat: Platform) -> Path:
    """One build folder per platform, commit, tree location and wrapper source folder: two copies
    of one commit (say a patched copy in a test), or two checkouts of this project building one
    tree, must not share a CMake cache (CMake refuses a cache made from another source folder)."""
    sources = f"{tree.root}\0{wrapper_dir()}"
    where = hashlib.sha256(sources.encode()).hexdigest()[:8]
    return default_cache_dir() / "build" / f"{plat.name}-{tree.commit12}-{where}"


def _render(template: str, dest: Path, **context: Any) -> None:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir() / "native")),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    dest.write_text(env.get_template(template).render(**context), encoding="utf-8")


def _needs_mingw_compat(plat: Platform, toolchain: Toolchain) -> bool:
    """Debian's mingw-w64 10 headers lack THREAD_POWER_THROTTLING_STATE, which ggml-cpu.c uses."""
    if plat.library_style != "mingw" or toolchain.sysroot is None:
        return False
    header = Path(toolchain.sysroot) / "include" / "processthreadsapi.h"
    try:
        text = header.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    return "THREAD_POWER_THROTTLING_CURRENT_VERSION" not in text


def _write_toolchain(
    tree: TreeInfo, plat: Platform, toolchain: Toolchain, folder: Path
) -> tuple[Path, bool]:
    folder.mkdir(parents=True, exist_ok=True)
    compat = _needs_mingw_compat(plat, toolchain)
    context = {
        "platform": plat,
        "toolchain": toolchain,
        "generator_version": __version__,
        "tag": tree.tag,
        "commit": tree.commit,
    }
    if compat:
        _render(f"{COMPAT_HEADER}.j2", folder / COMPAT_HEADER, **context)
    _render(
        f"{TOOLCHAIN_FILE}.j2",
        folder / TOOLCHAIN_FILE,
        compat_header=COMPAT_HEADER if compat else "",
        **context,
    )
    return folder / TOOLCHAIN_FILE, compat


def build_interface(tree: TreeInfo) -> tuple[Interface, list[str]]:
    """The host parse of ``tree`` as the bindings see it (with the wrapper header when the tree
    has the MTP API), and the headers it covers."""
    from generator.parse.frontend import ClangParseError, parse_interface, tree_source
    from generator.parse.options import ParseOptions
    from generator.platforms import HOST_TARGET

    wrapper = wrapper_dir() / "llama_mtp.h"
    source = tree_source(tree.root)
    if tree.mtp_api_missing_reason is None and wrapper.is_file():
        try:
            api = parse_interface(ParseOptions(tree.root, wrapper, (HOST_TARGET,)), source)
            return api, ["llama.h", "llama_mtp.h"]
        except ClangParseError as exc:
            progress(f"abi: llama_mtp.h does not parse against this tree; leaving it out ({exc})")
    return parse_interface(ParseOptions(tree.root, None, (HOST_TARGET,)), source), ["llama.h"]


def abi_identity_source(api: Interface, headers: list[str]) -> str:
    """C source of the ABI identity library: generated from the build's parse of its headers
    (``build_interface``), so it describes the declarations the bindings describe."""
    from generator.verify.layout_probe import render_abi_identity

    return render_abi_identity(api, headers, api.source.digest)


def _native_libraries(info: dict[str, Any]) -> dict[str, str]:
    """build-info's libraries without the API-mode module."""
    libraries: dict[str, str] = info.get("libraries") or {}
    return {k: v for k, v in libraries.items() if not k.startswith(API_MODULE_PREFIX)}


def _api_module_record(
    api: Interface,
    plat: Platform,
    toolchain: Toolchain,
    platform_dir: Path,
    bdir: Path,
    env: dict[str, str],
    mtp: MtpSupport,
    reason: str | None,
    source_sha: str,
    libraries: dict[str, str],
) -> dict[str, Any]:
    """Build the API-mode module when this platform can (adding it to ``libraries``) and return
    its build-info record; otherwise say why not."""
    record: dict[str, Any]
    if reason is None:
        stems = ["llama", "ggml", "ggml-base", "ggml-cpu"] + (
            ["llama_mtp"] if mtp.supported else []
        )
        linked = [s for s in stems if (platform_dir / "lib" / plat.library_file(s)).exists()]
        record = api_module.build_api_module(
            api, plat, toolchain.c_compiler, platform_dir, bdir / "api", env, linked
        )
        libraries[record["file"]] = file_sha256(platform_dir / record["file"])
    else:
        record = {"status": "not built", "reason": reason}
        progress(f"build {plat.name}: API-mode module not built: {reason}")
    record["source_sha256"] = source_sha
    return record


def _compiler_description(compiler: str) -> str:
    import tempfile

    try:
        with tempfile.TemporaryDirectory() as scratch:  # zig cc --version writes an empty a.o
            out = subprocess.run(
                [compiler, "--version"], capture_output=True, text=True, check=True, cwd=scratch
            ).stdout
    except (OSError, subprocess.CalledProcessError):
        return compiler
    return out.splitlines()[0].strip() if out else compiler


def _read_mtp_status(cmake_dir: Path) -> MtpSupport:
    text = (cmake_dir / "llama_mtp_status.txt").read_text(encoding="utf-8").strip()
    if text == "supported":
        return MtpSupport(True, "")
    return MtpSupport(False, text.removeprefix("unsupported:").strip())


def _assemble(
    plat: Platform, toolchain: Toolchain, stage: Path, platform_dir: Path
) -> dict[str, str]:
    """Copy libraries and headers from the install stage; return {relative lib path: sha256}."""
    if platform_dir.exists():
        shutil.rmtree(platform_dir)
    lib_out = platform_dir / "lib"
    inc_out = platform_dir / "include"
    lib_out.mkdir(parents=True)
    inc_out.mkdir(parents=True)
    sources = [stage / "bin"] if plat.binary_format == "pe" else [stage / "lib", stage / "lib64"]
    for folder in sources:
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if (path.is_file() or path.is_symlink()) and plat.is_shared_library(path):
                shutil.copy2(path, lib_out / path.name, follow_symlinks=False)
    for name in toolchain.runtime_libraries:
        found = runtime_library_path(toolchain, name)
        if found is None:
            raise UsageError(
                f"{plat.name}: runtime library {name} not found in {toolchain.runtime_dirs}"
            )
        shutil.copy2(found, lib_out / name)
    for path in sorted((stage / "include").glob("*.h")):
        shutil.copy2(path, inc_out / path.name)
    return {
        f"lib/{p.name}": file_sha256(p)
        for p in sorted(lib_out.iterdir())
        if p.is_file() and not p.is_symlink()
    }


def build_native(
    tree_root: Path,
    platform_name: str,
    out: Path | None = None,
    jobs: int = 2,
    force: bool = False,
) -> BuildResult:
    """Build (or reuse) the native libraries of ``tree_root`` for ``platform_name``."""
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    tree = read_tree(tree_root)
    llama_license(tree.root)  # shipped with the build: refuse a tree without one before building
    plat = get_platform(platform_name)
    toolchain = host_toolchain(plat)
    missing = toolchain.missing_tools()
    if missing:
        packages = f" (Debian packages: {' '.join(toolchain.apt_packages)})" if (
            toolchain.apt_packages) else ""  # fmt: skip
        raise UsageError(f"{plat.name}: missing tools {', '.join(missing)}{packages}")
    # absolute: the gates run programs from other folders against these libraries
    platform_dir = (out if out is not None else default_out_dir(tree)).resolve() / plat.name
    sources_sha = wrapper_sources_sha256()
    parsed = build_interface(tree)
    abi_source = abi_identity_source(*parsed)
    abi_sha = hashlib.sha256(abi_source.encode()).hexdigest()
    api_reason = api_module.why_not_built(plat, toolchain)
    api_sha = api_module.source_sha256(parsed[0]) if api_reason is None else api_reason

    existing = read_build_info(platform_dir / BUILD_INFO_NAME)
    bdir = build_dir_for(tree, plat)
    if (
        not force
        and existing is not None
        and existing.get("format") == BUILD_INFO_FORMAT
        and existing.get("platform") == plat.name
        and existing.get("commit") == tree.commit
        and existing.get("wrapper_sources_sha256") == sources_sha
        and existing.get("abi_source_sha256") == abi_sha
        and libraries_intact(platform_dir, {"libraries": _native_libraries(existing)})
    ):
        mtp_json = existing.get("mtp", {})
        mtp = MtpSupport(mtp_json.get("status") == "supported", str(mtp_json.get("reason", "")))
        if existing.get("api_module", {}).get("source_sha256") == api_sha and libraries_intact(
            platform_dir, existing
        ):
            progress(f"build {plat.name}: up to date in {platform_dir}")
            write_licenses(tree.root, platform_dir)
            return BuildResult(plat, platform_dir, existing, mtp, rebuilt=False)
        # the libraries are current; only the API-mode module is missing or stale
        env = build_environment(default_cache_dir(), [tree.root, bdir])
        updated = dict(existing)
        native_libraries = _native_libraries(existing)
        updated["api_module"] = _api_module_record(
            parsed[0],
            plat,
            toolchain,
            platform_dir,
            bdir,
            env,
            mtp,
            api_reason,
            api_sha,
            native_libraries,
        )
        updated["libraries"] = native_libraries
        write_build_info(platform_dir / BUILD_INFO_NAME, updated)
        return BuildResult(plat, platform_dir, updated, mtp, rebuilt=True)

    cmake_dir = bdir / "cmake"
    stage = bdir / "stage"
    logs = bdir / "logs"
    options = dict(BASE_CMAKE_OPTIONS)
    options.update(toolchain.cmake_options)
    options["LLAMA_MTP_LLAMA_COMMIT"] = tree.commit
    options["LLAMA_MTP_SINGLE_NEXTN_ARCHS"] = ",".join(single_nextn_architectures(tree.root))

    abi_path = bdir / "abi" / ABI_SOURCE
    abi_path.parent.mkdir(parents=True, exist_ok=True)
    abi_path.write_text(abi_source, encoding="utf-8")

    defines = [f"-D{k}={v}" for k, v in sorted(options.items())]
    defines += [f"-DLLAMA_CPP_DIR={tree.root}", f"-DCMAKE_INSTALL_PREFIX={stage}"]
    defines.append(f"-DLLAMA_BINDGEN_ABI_SOURCE={abi_path}")
    compat = False
    if toolchain.cmake_toolchain == "generated":
        toolchain_file, compat = _write_toolchain(tree, plat, toolchain, bdir / "toolchain")
        defines.append(f"-DCMAKE_TOOLCHAIN_FILE={toolchain_file}")
    elif toolchain.cmake_toolchain == "android-ndk":
        defines.append(f"-DCMAKE_TOOLCHAIN_FILE={toolchain.android_toolchain_file()}")
    else:
        defines += [
            f"-DCMAKE_C_COMPILER={toolchain.c_compiler}",
            f"-DCMAKE_CXX_COMPILER={toolchain.cxx_compiler}",
        ]
    launcher = ccache_path()
    if launcher:
        defines += [
            f"-DCMAKE_C_COMPILER_LAUNCHER={launcher}",
            f"-DCMAKE_CXX_COMPILER_LAUNCHER={launcher}",
        ]
    # ccache rewrites paths under the common parent of tree and build folder to relative ones,
    # so a build in a new folder (or a copied tree at the same depth) still hits the cache
    env = build_environment(default_cache_dir(), [tree.root, bdir])

    label = f"build {plat.name}"
    progress(f"{label}: llama.cpp {tree.tag} ({tree.commit12}) in {bdir}")
    configure = [
        "cmake",
        "-S",
        str(wrapper_dir()),
        "-B",
        str(cmake_dir),
        "-G",
        "Ninja",
        *defines,
    ]
    compile_argv = ["ninja", "-C", str(cmake_dir), f"-j{jobs}"]
    run_step(f"{label}: configure", configure, logs / "configure.log", env)
    mtp = _read_mtp_status(cmake_dir)
    progress(f"{label}: mtp: {mtp.describe()}")
    try:
        run_step(f"{label}: compile", compile_argv, logs / "build.log", env)
    except BuildError as exc:
        if not mtp.supported:
            raise
        # The wrapper must never block the libraries: retry without it. If llama.cpp itself is
        # what fails, the retry fails too and reports that.
        kept = logs / "build-with-mtp.log"
        shutil.copyfile(exc.log, kept)
        progress(f"{label}: the build with the MTP wrapper failed (log: {kept}); retrying without")
        run_step(
            f"{label}: configure without MTP",
            [*configure, "-DLLAMA_MTP=OFF"],
            logs / "configure-without-mtp.log",
            env,
        )
        run_step(f"{label}: compile without MTP", compile_argv, logs / "build.log", env)
        options["LLAMA_MTP"] = "OFF"
        mtp = MtpSupport(
            False, "the MTP wrapper failed to build against this tree (logs/build-with-mtp.log)"
        )
        progress(f"{label}: mtp: {mtp.describe()}")
    if stage.exists():
        shutil.rmtree(stage)
    run_step(f"{label}: install", ["cmake", "--install", str(cmake_dir)], logs / "install.log", env)

    libraries = _assemble(plat, toolchain, stage, platform_dir)
    write_licenses(tree.root, platform_dir)
    expected = ["llama", "ggml", ABI_LIBRARY] + (["llama_mtp"] if mtp.supported else [])
    for stem in expected:
        if (
            f"lib/{plat.library_file(stem)}" not in libraries
            and not (platform_dir / "lib" / plat.library_file(stem)).exists()
        ):
            raise BuildError(
                f"{label}: install", logs / "install.log", f"{plat.library_file(stem)} missing"
            )

    api_record = _api_module_record(
        parsed[0], plat, toolchain, platform_dir, bdir, env, mtp, api_reason, api_sha, libraries
    )

    recorded_options = dict(options)
    if toolchain.cmake_toolchain == "generated":
        recorded_options["CMAKE_TOOLCHAIN_FILE"] = f"{TOOLCHAIN_FILE} (generated for {plat.name})"
    elif toolchain.cmake_toolchain == "android-ndk":
        recorded_options["CMAKE_TOOLCHAIN_FILE"] = "android.toolchain.cmake (the Android NDK's)"
    info: dict[str, Any] = {
        "format": BUILD_INFO_FORMAT,
        "generator_version": __version__,
        "platform": plat.name,
        "tag": tree.tag,
        "commit": tree.commit,
        "compiler": {
            "c": _compiler_description(toolchain.c_compiler),
            "cxx": _compiler_description(toolchain.cxx_compiler),
            "ccache": bool(launcher),
            "mingw_compat_header": compat,
        },
        "cmake_options": recorded_options,
        "mtp": mtp.to_json(),
        "wrapper_sources_sha256": sources_sha,
        "abi_source_sha256": abi_sha,
        "api_module": api_record,
        "libraries": libraries,
    }
    write_build_info(platform_dir / BUILD_INFO_NAME, info)
    progress(f"{label}: done: {platform_dir}")
    return BuildResult(plat, platform_dir, info, mtp, rebuilt=True)
