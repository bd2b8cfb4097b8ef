"""``llama-bindgen build``: configure, build, install llama.cpp + the MTP wrapper for a platform.

Layout of the result, ``<out>/<platform>/``:

* ``lib/``: the shared libraries (libllama, ggml*, libllama_mtp when supported; on Windows also the
  MinGW runtime DLLs they need),
* ``include/``: llama.h, the ggml headers and llama_mtp.h,
* ``build-info.json``: tag, commit, compiler, CMake options, MTP support and the sha256 of every
  library.

The default ``<out>`` is ``<cache>/native/<key>``; CMake's build folder is
``<cache>/build/<platform>-<key>-<where>`` and ccache keeps its files in ``<cache>/ccache``
(``<key>``: the tree's ``cache_key``, its short commit, or ``tag-<tag>-<digest12>`` when the commit
is unknown). The tree is compiled from ``<cache>/stage/<platform>[-<backend>]/llama.cpp``, one
folder for every tree of a platform and backend (``shared_source``), so ccache's results serve
every tag: an object whose inputs did not change since an earlier tag is not compiled again. The
build's own ccache hits and misses go to ``<build folder>/logs/ccache-stats.log`` and its last
line.
A tree without its licence files (a lean PyPI sdist's) builds; ``build-info.json`` records what
it lacks (``licenses``) and ``release`` refuses to ship it.
A build whose build-info.json matches the tree's commit and the wrapper's sources, with intact
libraries, is reused without running CMake. A build into another ``<out>`` (a wheel's copy, a
kit) runs Ninja and the install in the tree's build folder, and configures only when that
folder's last finished configure (``configured.json``) had other arguments or wrapper sources.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator import __version__
from generator.emit import API_MODULE
from generator.errors import UsageError
from generator.hashing import file_sha256
from generator.ir import Interface
from generator.native import api_module, cuda_pypi
from generator.native.build_costs import BuildCost, record_cost
from generator.native.build_info import (
    BUILD_INFO_FORMAT,
    BUILD_INFO_NAME,
    MtpSupport,
    libraries_intact,
    read_build_info,
    wrapper_sources_sha256,
    write_build_info,
)
from generator.native.ccache_stats import STATS_LOG, CacheCounts, read_stats_log
from generator.native.cmake_driver import (
    BuildError,
    build_environment,
    ccache_defines,
    progress,
    run_step,
)
from generator.native.cuda_pypi import CudaResolution
from generator.native.host import host_toolchain
from generator.native.nextn_archs import layer_input_architectures, single_nextn_architectures
from generator.native.shared_source import (
    mark_changed,
    record_contents,
    stage_dir,
    staged_source,
    staged_wrapper_dir,
    tree_id,
)
from generator.paths import default_cache_dir, wrapper_dir
from generator.platforms import (
    BASE_CMAKE_OPTIONS,
    GPU_BACKEND_BUILDS,
    Platform,
    Toolchain,
    builds_backend,
    gate_key,
    get_platform,
    runtime_library_path,
)
from generator.sources import mtmd_api, rpc_api
from generator.sources.licenses import licence_status, write_licenses
from generator.sources.tree import Tree
from generator.templating import environment

ABI_LIBRARY = "llama_bindgen_abi"
API_MODULE_PREFIX = f"lib/{API_MODULE}"
ABI_SOURCE = "llama_bindgen_abi.c"
COMPAT_HEADER = "mingw_compat.h"
TOOLCHAIN_FILE = "toolchain.cmake"
# Darwin platform rules CMake cannot work out off macOS (its CMAKE_USER_MAKE_RULES_OVERRIDE)
DARWIN_RULES = "darwin_rules.cmake"


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


def check_backend_buildable(plat: Platform, backend: str) -> None:
    """Refuse a backend the platform does not have, or that this tool does not build for it."""
    if backend not in plat.backends:
        have = ", ".join(plat.backends)
        raise UsageError(f"{plat.name} has no {backend} backend (it has: {have})")
    if not builds_backend(plat.name, backend):
        built = "; ".join(f"{b}: {', '.join(p)}" for b, p in sorted(GPU_BACKEND_BUILDS.items()))
        why = plat.ci[backend].experimental
        raise UsageError(
            f"{plat.name}/{backend} is not built by llama-bindgen yet ({why}; GPU builds: {built})"
        )


def backend_missing_tools(backend: str) -> str:
    """Why this machine cannot build ``backend`` ("" it can, or the backend is cpu)."""
    if backend == "vulkan":
        from generator.native.vulkan import missing_tools

        return missing_tools()
    if backend == "cuda":
        return _cuda_missing()
    if backend == "metal" and sys.platform != "darwin":
        return (
            "a Metal build needs macOS (Apple clang with the Metal framework and SDK); the "
            "release workflow's macOS jobs build it"
        )
    return ""


# Where CUDA toolkits and Debian's/Ubuntu's CUDA libraries are installed.
CUDA_ROOTS: tuple[Path, ...] = (Path("/usr/local/cuda"),)
SYSTEM_LIBRARY_DIRS: list[Path] = [Path("/usr/lib/x86_64-linux-gnu")]
# --cuda-arch: CMake's CUDA architectures ("89", "90a", "86-real"), comma-separated.
_CUDA_ARCH = re.compile(r"^[1-9][0-9]{1,2}[af]?(-real|-virtual)?$")


def _cuda_missing() -> str:
    compiler = cuda_compiler()
    if compiler is None:
        return (
            "a CUDA build needs nvcc (NVIDIA's CUDA toolkit; Debian and Ubuntu package it as "
            "nvidia-cuda-toolkit): none on PATH or in /usr/local/cuda/bin"
        )
    return cuda_resolution(compiler).why_not


def cuda_resolution(compiler: Path) -> CudaResolution:
    """What the toolkit of ``compiler`` (and the system) has, and what a build takes from
    PyPI or compiles instead (:mod:`generator.native.cuda_pypi`)."""
    return cuda_pypi.resolve(compiler, SYSTEM_LIBRARY_DIRS, CUDA_ROOTS)


def driverless_library_dirs(backend: str) -> list[Path]:
    """Folders a ``backend`` build needs on the library path to be loaded (never run) on a machine
    without its driver: for CUDA, the toolkit's runtime, PyPI's cuBLAS and the link stub
    (:func:`cuda_pypi.link_library_dirs`); nothing for the others."""
    compiler = cuda_compiler() if backend == "cuda" else None
    return [] if compiler is None else cuda_pypi.link_library_dirs(cuda_resolution(compiler))


def cuda_compiler() -> Path | None:
    """nvcc on PATH, else in CUDA's default install folder."""
    found = shutil.which("nvcc")
    if found is not None:
        return Path(found)
    default = Path("/usr/local/cuda/bin/nvcc")
    return default if default.is_file() else None


def _cuda_toolkit_text() -> str:
    """``"13.0"``: the version of the toolkit a CUDA build compiles with ("" when unknown)."""
    compiler = cuda_compiler()
    version = cuda_resolution(compiler).version if compiler is not None else None
    return f"{version[0]}.{version[1]}" if version else ""


def cuda_architectures(text: str | None, backend: str) -> str | None:
    """``--cuda-arch`` as CMake's list (``89,90a`` -> ``89;90a``); None: llama.cpp's own list."""
    if text is None:
        return None
    if backend != "cuda":
        raise UsageError(f"--cuda-arch is for --backend cuda, not {backend}")
    archs = [a.strip() for a in text.split(",")]
    bad = [a for a in archs if not _CUDA_ARCH.match(a)]
    if bad or not archs:
        raise UsageError(
            f"--cuda-arch {text!r}: expected CUDA architectures such as 89, 90a or 86-real "
            "(comma-separated); leave it out for llama.cpp's own list"
        )
    return ";".join(archs)


def _cuda_options(cuda_arch: str | None) -> dict[str, str]:
    compiler = cuda_compiler()
    options = {"GGML_CUDA": "ON"}
    if cuda_arch is not None:
        options["CMAKE_CUDA_ARCHITECTURES"] = cuda_arch
    if compiler is None:
        return options
    options["CMAKE_CUDA_COMPILER"] = str(compiler)
    resolution = cuda_resolution(compiler)
    # a toolkit that cannot build (resolution.why_not) was refused by _plan before this
    if not resolution.why_not and (resolution.wheels or resolution.stub):
        progress(f"cuda: {resolution.describe()}")
        options |= cuda_pypi.cmake_options(resolution)
    return options


def backend_cmake_options(
    plat: Platform, backend: str, cuda_arch: str | None = None
) -> dict[str, str]:
    """The CMake options of a backend's build (the CPU backend is always built). On macOS ggml
    turns Metal on by default: a CPU build turns it off, so that it is what it says. CUDA:
    ``cuda_arch`` (CMake's list) or llama.cpp's own architectures, and what the toolkit lacks
    from PyPI (:func:`_cuda_options`)."""
    options: dict[str, str] = {}
    if plat.system == "Darwin":
        options["GGML_METAL"] = "ON" if backend == "metal" else "OFF"
        if backend == "metal":  # the shaders inside the library: nothing to ship beside it
            options["GGML_METAL_EMBED_LIBRARY"] = "ON"
    if backend == "vulkan":
        from generator.native.vulkan import vulkan_include_dir

        options |= {"GGML_VULKAN": "ON", "Vulkan_INCLUDE_DIR": str(vulkan_include_dir())}
    if backend == "cuda":
        options |= _cuda_options(cuda_arch)
    return options


# the wrapper sources a build folder last built with (shared_source.mark_changed)
WRAPPER_RECORD = "wrapper-sources.sha256"
# the arguments and wrapper sources of a build folder's last finished configure
CONFIGURED_RECORD = "configured.json"


def default_out_dir(tree: Tree) -> Path:
    return default_cache_dir() / "native" / tree.cache_key


def build_dir_for(
    tree: Tree, plat: Platform, backend: str = "cpu", cuda_arch: str | None = None
) -> Path:
    """One build folder per platform, backend, commit and tree location: two copies of one
    commit (say a patched copy in a test) must not share one. Every checkout of this project
    shares it: CMake is configured from the staged copy of the wrapper project, the same folder
    for all (``shared_source``; the name's hash says so, keeping folders configured from a
    checkout's own copy, before the staging, apart). A CUDA build for chosen architectures has
    its own (CMake would keep a chosen list in its cache where llama.cpp's default is wanted)."""
    sources = f"{tree.root}\0wrapper staged"
    if cuda_arch is not None:
        sources += f"\0cuda-arch={cuda_arch}"
    where = hashlib.sha256(sources.encode()).hexdigest()[:8]
    name = f"{gate_key(plat.name, backend)}-{tree.cache_key}-{where}"
    return default_cache_dir() / "build" / name


def _render(template: str, dest: Path, **context: Any) -> None:
    dest.write_text(environment().get_template(f"native/{template}").render(**context), "utf-8")


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
    tree: Tree, plat: Platform, toolchain: Toolchain, folder: Path
) -> tuple[Path, bool]:
    folder.mkdir(parents=True, exist_ok=True)
    compat = _needs_mingw_compat(plat, toolchain)
    context = {
        "platform": plat,
        "toolchain": toolchain,
        "generator_version": __version__,
        "tag": tree.name,
        "commit": tree.commit_label,
    }
    if compat:
        _render(f"{COMPAT_HEADER}.j2", folder / COMPAT_HEADER, **context)
    if plat.system == "Darwin":
        _render(f"{DARWIN_RULES}.j2", folder / DARWIN_RULES, **context)
    _render(
        f"{TOOLCHAIN_FILE}.j2",
        folder / TOOLCHAIN_FILE,
        compat_header=COMPAT_HEADER if compat else "",
        darwin_rules=DARWIN_RULES,
        **context,
    )
    return folder / TOOLCHAIN_FILE, compat


def build_interface(tree: Tree) -> tuple[Interface, list[str]]:
    """The host parse of ``tree`` as the bindings see it (with the wrapper header when the tree
    has the MTP API, and libmtmd's headers when it has them), and the headers it covers."""
    from generator.emit.probes import probe_headers
    from generator.parse.frontend import ClangParseError, parse_tree
    from generator.platforms import HOST_TARGET

    if tree.wrapper_header is not None:
        try:
            api = parse_tree(tree, (HOST_TARGET,))
            return api, probe_headers(api)
        except ClangParseError as exc:
            progress(f"abi: llama_mtp.h does not parse against this tree; leaving it out ({exc})")
    api = parse_tree(tree, (HOST_TARGET,), with_wrapper=False)
    return api, probe_headers(api)


def host_interface(api: Interface) -> tuple[Interface, list[str]]:
    """``build_interface``'s answer from a parse already made (a bump's, for every target)."""
    from generator.emit.probes import probe_headers

    return api.for_targets((api.host_target,)), probe_headers(api)


def abi_identity_source(api: Interface, headers: list[str]) -> str:
    """C source of the ABI identity library: generated from the build's parse of its headers
    (``build_interface``), so it describes the declarations the bindings describe."""
    from generator.emit.probes import render_abi_identity

    return render_abi_identity(api, headers, api.source.digest)


def _native_libraries(info: dict[str, Any]) -> dict[str, str]:
    """build-info's libraries without the API-mode module."""
    libraries: dict[str, str] = info.get("libraries") or {}
    return {k: v for k, v in libraries.items() if not k.startswith(API_MODULE_PREFIX)}


def _api_module_record(plan: _Plan, mtp: MtpSupport, libraries: dict[str, str]) -> dict[str, Any]:
    """Build the API-mode module when this platform can (adding it to ``libraries``) and return
    its build-info record; otherwise say why not."""
    record: dict[str, Any]
    plat, platform_dir = plan.plat, plan.platform_dir
    if plan.api_reason is None:
        stems = ["llama", "ggml", "ggml-base", "ggml-cpu", mtmd_api.LIBRARY, rpc_api.STEM] + (
            ["llama_mtp"] if mtp.supported else []
        )
        linked = [s for s in stems if (platform_dir / "lib" / plat.library_file(s)).exists()]
        record = api_module.build_api_module(
            plan.api,
            plat,
            plan.toolchain.c_compiler,
            platform_dir,
            plan.bdir / "api",
            plan.environment(),
            linked,
            label=plan.label,
        )
        libraries[record["file"]] = file_sha256(platform_dir / record["file"])
    else:
        record = {"status": "not built", "reason": plan.api_reason}
        progress(f"{plan.label}: API-mode module not built: {plan.api_reason}")
    record["source_sha256"] = plan.api_sha
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
    probes_file = cmake_dir / "llama_mtp_probes.txt"
    probes = probes_file.read_text(encoding="utf-8").strip() if probes_file.is_file() else ""
    if text == "supported":
        return MtpSupport(True, "", probes)
    return MtpSupport(False, text.removeprefix("unsupported:").strip(), probes)


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


@dataclass(frozen=True)
class _Plan:
    """Everything a build of one tree for one platform is decided by, before anything runs."""

    tree: Tree
    plat: Platform
    toolchain: Toolchain
    platform_dir: Path
    bdir: Path
    jobs: int
    api: Interface
    abi_source: str
    sources_sha: str
    abi_sha: str
    api_reason: str | None
    api_sha: str
    backend: str = "cpu"
    cuda_arch: str | None = None  # CMake's CUDA architectures; None: llama.cpp's own list

    @property
    def key(self) -> str:
        return gate_key(self.plat.name, self.backend)

    @property
    def label(self) -> str:
        return f"build {self.key}"

    @property
    def logs(self) -> Path:
        return self.bdir / "logs"

    @property
    def stage_key(self) -> str:
        """The stage folder's name: the platform's, one for all its backends, so that a GPU
        build finds in ccache every object it shares with the CPU build (llama.cpp, ggml-cpu,
        the chat layer, the wrapper: the same preprocessed text) and compiles its backend only."""
        return self.plat.name

    @property
    def source(self) -> Path:
        """Where the tree is compiled from: the one folder of this platform
        (``shared_source``), made while the build holds its lock."""
        return stage_dir(default_cache_dir(), self.stage_key)

    @property
    def staged_wrapper(self) -> Path:
        """Where the wrapper's CMake project is configured from (``shared_source``)."""
        return staged_wrapper_dir(default_cache_dir(), self.stage_key)

    @property
    def ccache_log(self) -> Path:
        return self.logs / STATS_LOG

    def environment(self) -> dict[str, str]:
        # ccache rewrites paths under the cache folder (the common parent of the stable source
        # folder and the build folder) to relative ones, the same for every tree
        return build_environment(default_cache_dir(), [self.source, self.bdir], self.ccache_log)


def _plan(
    tree_or_root: Tree | Path,
    platform_name: str,
    out: Path | None,
    jobs: int,
    interface: Interface | None,
    backend: str = "cpu",
    cuda_arch: str | None = None,
) -> _Plan:
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    plat = get_platform(platform_name)
    check_backend_buildable(plat, backend)
    cuda_arch = cuda_architectures(cuda_arch, backend)
    why = backend_missing_tools(backend)
    if why:
        raise UsageError(f"{gate_key(plat.name, backend)}: {why}")
    tree = tree_or_root if isinstance(tree_or_root, Tree) else Tree.read(tree_or_root)
    toolchain = host_toolchain(plat)
    missing = toolchain.missing_tools()
    if missing:
        packages = f" (Debian packages: {' '.join(toolchain.apt_packages)})" if (
            toolchain.apt_packages) else ""  # fmt: skip
        raise UsageError(f"{plat.name}: missing tools {', '.join(missing)}{packages}")
    api, headers = build_interface(tree) if interface is None else host_interface(interface)
    abi_source = abi_identity_source(api, headers)
    api_reason = api_module.why_not_built(plat, toolchain)
    return _Plan(
        tree=tree,
        plat=plat,
        toolchain=toolchain,
        # absolute: the gates run programs from other folders against these libraries
        platform_dir=(out if out is not None else default_out_dir(tree)).resolve()
        / gate_key(plat.name, backend),
        bdir=build_dir_for(tree, plat, backend, cuda_arch),
        jobs=jobs,
        api=api,
        abi_source=abi_source,
        sources_sha=wrapper_sources_sha256(),
        abi_sha=hashlib.sha256(abi_source.encode()).hexdigest(),
        api_reason=api_reason,
        api_sha=api_module.source_sha256(api) if api_reason is None else api_reason,
        backend=backend,
        cuda_arch=cuda_arch,
    )


def _reuse(plan: _Plan) -> BuildResult | None:
    """The existing build when its libraries are current (adding a missing or stale API-mode
    module); None when CMake has to run. A CUDA build asked for chosen architectures reuses only
    a build for those; asked for none, it reuses the existing build whatever its architectures
    (build-info.json's ``cmake_options`` say which)."""
    existing = read_build_info(plan.platform_dir / BUILD_INFO_NAME)
    built_arch = (existing or {}).get("cmake_options", {}).get("CMAKE_CUDA_ARCHITECTURES")
    if (
        existing is None
        or (plan.cuda_arch is not None and built_arch != plan.cuda_arch)
        or existing.get("format") != BUILD_INFO_FORMAT
        or existing.get("platform") != plan.plat.name
        or existing.get("backend", "cpu") != plan.backend
        or existing.get("commit") != plan.tree.commit_label
        or existing.get("wrapper_sources_sha256") != plan.sources_sha
        or existing.get("abi_source_sha256") != plan.abi_sha
        or not libraries_intact(plan.platform_dir, {"libraries": _native_libraries(existing)})
    ):
        return None
    mtp = MtpSupport.from_json(existing.get("mtp", {}))
    api_current = existing.get("api_module", {}).get("source_sha256") == plan.api_sha
    if api_current and libraries_intact(plan.platform_dir, existing):
        progress(f"{plan.label}: up to date in {plan.platform_dir}")
        write_licenses(plan.tree.root, plan.platform_dir)
        return BuildResult(plan.plat, plan.platform_dir, existing, mtp, rebuilt=False)
    updated = dict(existing)
    updated["libraries"] = _native_libraries(existing)
    updated["api_module"] = _api_module_record(plan, mtp, updated["libraries"])
    write_build_info(plan.platform_dir / BUILD_INFO_NAME, updated)
    return BuildResult(plan.plat, plan.platform_dir, updated, mtp, rebuilt=True)


@dataclass(frozen=True)
class _Configure:
    argv: list[str]
    options: dict[str, str]  # the -D options recorded in build-info.json
    mingw_compat_header: bool
    ccache: bool


def _configure_command(plan: _Plan) -> _Configure:
    tree, toolchain, bdir = plan.tree, plan.toolchain, plan.bdir
    options = dict(BASE_CMAKE_OPTIONS)
    options.update(toolchain.cmake_options)
    options["LLAMA_MTP_LLAMA_COMMIT"] = tree.commit or "unknown"
    options["LLAMA_MTP_LLAMA_TAG"] = tree.tag or "unknown tag"
    options["LLAMA_MTP_SINGLE_NEXTN_ARCHS"] = ",".join(single_nextn_architectures(tree.root))
    layer_inputs, final_inputs = layer_input_architectures(tree.root)
    options["LLAMA_MTP_LAYER_INPUT_ARCHS"] = ",".join(layer_inputs)
    options["LLAMA_MTP_FINAL_INPUT_ARCHS"] = ",".join(final_inputs)
    options.update(backend_cmake_options(plan.plat, plan.backend, plan.cuda_arch))
    mtmd = plan.api.has_library(mtmd_api.LIBRARY)  # the bindings carry libmtmd: build it
    options["LLAMA_BINDGEN_MTMD"] = "ON" if mtmd else "OFF"
    abi_path = bdir / "abi" / ABI_SOURCE
    abi_path.parent.mkdir(parents=True, exist_ok=True)
    abi_path.write_text(plan.abi_source, encoding="utf-8")
    defines = [f"-D{k}={v}" for k, v in sorted(options.items())]
    defines += [f"-DLLAMA_CPP_DIR={plan.source}", f"-DCMAKE_INSTALL_PREFIX={bdir / 'stage'}"]
    defines.append(f"-DLLAMA_BINDGEN_ABI_SOURCE={abi_path}")
    defines.append(f"-DLLAMA_BINDGEN_TREE_ID={tree_id(tree.root, tree.digest)}")
    if mtmd:  # the identity library includes mtmd's headers
        defines.append(f"-DLLAMA_BINDGEN_ABI_INCLUDE_DIRS={mtmd_api.include_dir(plan.source)}")
    recorded = dict(options)
    compat = False
    if toolchain.cmake_toolchain == "generated":
        toolchain_file, compat = _write_toolchain(tree, plan.plat, toolchain, bdir / "toolchain")
        defines.append(f"-DCMAKE_TOOLCHAIN_FILE={toolchain_file}")
        recorded["CMAKE_TOOLCHAIN_FILE"] = f"{TOOLCHAIN_FILE} (generated for {plan.plat.name})"
    elif toolchain.cmake_toolchain == "android-ndk":
        defines.append(f"-DCMAKE_TOOLCHAIN_FILE={toolchain.android_toolchain_file()}")
        recorded["CMAKE_TOOLCHAIN_FILE"] = "android.toolchain.cmake (the Android NDK's)"
    else:
        defines += [
            f"-DCMAKE_C_COMPILER={toolchain.c_compiler}",
            f"-DCMAKE_CXX_COMPILER={toolchain.cxx_compiler}",
        ]
    launcher = ccache_defines()
    defines += launcher
    argv = [
        "cmake",
        "-S",
        str(plan.staged_wrapper),
        "-B",
        str(bdir / "cmake"),
        "-G",
        "Ninja",
        *defines,
    ]
    return _Configure(argv, recorded, compat, bool(launcher))


def _drop_other_source(cmake_dir: Path, source: Path) -> None:
    """Remove a CMake build folder configured from another source folder (a stage folder of an
    earlier layout: one per backend before it was one per platform): CMake refuses to configure
    it from ``source``. Its objects are in ccache."""
    cache = cmake_dir / "CMakeCache.txt"
    if not cache.is_file():
        return
    for line in cache.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("CMAKE_HOME_DIRECTORY:") and Path(line.partition("=")[2]) != source:
            progress(f"{cmake_dir}: configured from {line.partition('=')[2]}; configuring anew")
            shutil.rmtree(cmake_dir)
            return


def _configured_record(configure: _Configure, wrapper_digest: str) -> str:
    return json.dumps({"argv": configure.argv, "wrapper": wrapper_digest}, sort_keys=True)


def _still_configured(plan: _Plan, configure: _Configure, wrapper_digest: str) -> bool:
    """Whether the build folder's last configure ran with these arguments and these wrapper
    sources, and finished (its record is written only then). Its tree is the same (the folder is
    one tree's), so configuring again would decide the same: CMake's probes alone take about 20 s.
    Ninja still runs CMake again by itself when one of CMake's own inputs changed."""
    cmake_dir = plan.bdir / "cmake"
    record = plan.bdir / CONFIGURED_RECORD
    return (
        record.is_file()
        and record.read_text(encoding="utf-8") == _configured_record(configure, wrapper_digest)
        and (cmake_dir / "build.ninja").is_file()
        and (cmake_dir / "llama_mtp_status.txt").is_file()
    )


def _configure_and_compile(
    plan: _Plan, configure: _Configure, env: dict[str, str], wrapper_digest: str, force: bool
) -> MtpSupport:
    """Configure (unless the build folder is configured so already and ``force`` is off) and
    compile. A tree with the MTP API gets the wrapper or fails: the error names the probe that
    matched no variant, or the first compiler error in the wrapper's sources, never a build
    without MTP (nor a later, secondary error) in its place."""
    label, logs, cmake_dir = plan.label, plan.logs, plan.bdir / "cmake"
    compile_argv = ["ninja", "-C", str(cmake_dir), f"-j{plan.jobs}"]
    _drop_other_source(cmake_dir, plan.staged_wrapper)
    if not force and _still_configured(plan, configure, wrapper_digest):
        progress(f"{label}: configure: configured with these options already")
    else:
        (plan.bdir / CONFIGURED_RECORD).unlink(missing_ok=True)
        try:
            run_step(f"{label}: configure", configure.argv, logs / "configure.log", env)
        except BuildError as exc:
            failure = _probe_failure(cmake_dir)
            if failure:
                raise BuildError(
                    f"{label}: the MTP wrapper against this tree", exc.log, failure
                ) from None
            raise
        record = _configured_record(configure, wrapper_digest)
        (plan.bdir / CONFIGURED_RECORD).write_text(record, encoding="utf-8")
    mtp = _read_mtp_status(cmake_dir)
    progress(f"{label}: mtp: {mtp.describe()}")
    try:
        run_step(f"{label}: compile", compile_argv, logs / "build.log", env)
    except BuildError as exc:
        cause = first_wrapper_error(exc.log.read_text(encoding="utf-8", errors="replace"))
        if not mtp.supported or not cause:
            raise
        raise BuildError(
            f"{label}: the MTP wrapper against this tree",
            exc.log,
            f"it does not compile: {cause}; probes: {_probe_summary(cmake_dir)}",
        ) from None
    return mtp


# A compiler diagnostic: "path:line[:col]: error: text" (gcc, clang; MSVC's "error C1234" too).
_LOCATION = r"^(?P<path>[^\s:][^:]*):(?P<line>\d+)(?::\d+)?: "
_DIAGNOSTIC = re.compile(_LOCATION + r"(?:fatal )?error: (?P<text>.*)$")
_NOTE = re.compile(_LOCATION + r"note: (?P<text>.*)$")


def first_wrapper_error(log_text: str) -> str:
    """The first compiler error in a build log that is in the wrapper's own sources, with the
    upstream declaration it concerns when the compiler named one (its first ``note:`` in a file
    outside the wrapper); "" when the log has none (the failure is elsewhere)."""
    lines = log_text.splitlines()
    for i, line in enumerate(lines):
        m = _DIAGNOSTIC.match(line.strip())
        if not m or not Path(m.group("path")).name.startswith("llama_mtp"):
            continue
        where = f"{Path(m.group('path')).name}:{m.group('line')}: {m.group('text')}"
        for later in lines[i + 1 : i + 12]:
            note = _NOTE.match(later.strip())
            if note and not Path(note.group("path")).name.startswith("llama_mtp"):
                upstream = f"{_tree_relative(note.group('path'))}:{note.group('line')}"
                return f"{where} (upstream: {upstream}: {note.group('text')})"
            if _DIAGNOSTIC.match(later.strip()):
                break
        return where
    return ""


def _tree_relative(path: str) -> str:
    """A path inside a llama.cpp tree, from the tree's top (common/..., src/..., include/...)."""
    parts = Path(path).parts
    for top in ("common", "src", "include", "ggml", "vendor"):
        if top in parts:
            return "/".join(parts[len(parts) - 1 - parts[::-1].index(top) :])
    return Path(path).name


def _probe_failure(cmake_dir: Path) -> str:
    """The wrapper's probe failure written by its CMake project ("failed: ..."), or ""."""
    status = cmake_dir / "llama_mtp_status.txt"
    if not status.is_file():
        return ""
    text = status.read_text(encoding="utf-8").strip()
    return text.removeprefix("failed:").strip() if text.startswith("failed:") else ""


def _probe_summary(cmake_dir: Path) -> str:
    path = cmake_dir / "llama_mtp_probes.txt"
    return path.read_text(encoding="utf-8").strip() if path.is_file() else "not run"


def _install(plan: _Plan, mtp: MtpSupport, env: dict[str, str]) -> dict[str, str]:
    """Install into the stage, assemble the platform folder; {relative lib path: sha256}."""
    stage, log = plan.bdir / "stage", plan.logs / "install.log"
    if stage.exists():
        shutil.rmtree(stage)
    run_step(f"{plan.label}: install", ["cmake", "--install", str(plan.bdir / "cmake")], log, env)
    libraries = _assemble(plan.plat, plan.toolchain, stage, plan.platform_dir)
    write_licenses(plan.tree.root, plan.platform_dir)
    expected = ["llama", "ggml", ABI_LIBRARY] + (["llama_mtp"] if mtp.supported else [])
    if plan.api.has_library(rpc_api.LIBRARY):  # GGML_RPC=ON (BASE_CMAKE_OPTIONS) built it
        expected.append(rpc_api.STEM)
    for stem in expected:
        name = plan.plat.library_file(stem)
        if f"lib/{name}" not in libraries and not (plan.platform_dir / "lib" / name).exists():
            raise BuildError(f"{plan.label}: install", log, f"{name} missing")
    return libraries


def _record(
    plan: _Plan,
    configure: _Configure,
    mtp: MtpSupport,
    api_record: dict[str, Any],
    libraries: dict[str, str],
) -> dict[str, Any]:
    info: dict[str, Any] = {
        "format": BUILD_INFO_FORMAT,
        "generator_version": __version__,
        "platform": plan.plat.name,
        "backend": plan.backend,
        "tag": plan.tree.name,
        "commit": plan.tree.commit_label,
        "licenses": licence_status(plan.tree.root),
        "compiler": {
            "c": _compiler_description(plan.toolchain.c_compiler),
            "cxx": _compiler_description(plan.toolchain.cxx_compiler),
            "ccache": configure.ccache,
            "mingw_compat_header": configure.mingw_compat_header,
        },
        "cmake_options": configure.options,
        "mtp": mtp.to_json(),
        "rpc_protocol": rpc_api.protocol_version(plan.api),
        "wrapper_sources_sha256": plan.sources_sha,
        "abi_source_sha256": plan.abi_sha,
        "api_module": api_record,
        "libraries": libraries,
    }
    if plan.backend == "cuda":  # its wheel's NVIDIA requirements start from this version
        info["cuda_toolkit"] = _cuda_toolkit_text()
    write_build_info(plan.platform_dir / BUILD_INFO_NAME, info)
    return info


def build_native(
    tree: Tree | Path,
    platform_name: str,
    out: Path | None = None,
    jobs: int = 2,
    force: bool = False,
    interface: Interface | None = None,
    backend: str = "cpu",
    cuda_arch: str | None = None,
) -> BuildResult:
    """Build (or reuse) the native libraries of ``tree`` (a Tree, or a fetched tree's folder)
    for ``platform_name``. ``interface``: the tree's parse when the caller has one (a bump
    parses once), instead of parsing the headers again. ``cuda_arch``: ``--cuda-arch``'s text
    (CUDA architectures, comma-separated), for a CUDA build only. ``force``: configure,
    compile and install even when the build is current (otherwise a build folder configured with
    the same arguments is not configured again)."""
    plan = _plan(tree, platform_name, out, jobs, interface, backend, cuda_arch)
    reused = None if force else _reuse(plan)
    if reused is not None:
        return reused
    progress(f"{plan.label}: llama.cpp {plan.tree.name} ({plan.tree.commit12}) in {plan.bdir}")
    started = time.monotonic()
    plan.ccache_log.unlink(missing_ok=True)
    with staged_source(
        plan.tree.root, default_cache_dir(), plan.stage_key, plan.label, wrapper_dir()
    ):
        record = plan.bdir / WRAPPER_RECORD
        wrapper_digest = mark_changed(plan.staged_wrapper, record)
        configure = _configure_command(plan)
        env = plan.environment()
        mtp = _configure_and_compile(plan, configure, env, wrapper_digest, force)
        libraries = _install(plan, mtp, env)
        record_contents(record, wrapper_digest)
    api_record = _api_module_record(plan, mtp, libraries)
    info = _record(plan, configure, mtp, api_record, libraries)
    counts, seconds = read_stats_log(plan.ccache_log), time.monotonic() - started
    record_cost(BuildCost(plan.label, plan.tree.name, seconds, counts))
    progress(f"{plan.label}: done in {seconds:.0f} s: {plan.platform_dir}{_ccache_summary(counts)}")
    return BuildResult(plan.plat, plan.platform_dir, info, mtp, rebuilt=True)


def _ccache_summary(counts: CacheCounts | None) -> str:
    return "" if counts is None else f" (ccache: {counts.describe()})"
