"""The platform registry: every platform llama-bindgen builds, gates and releases, in one table.

For each platform it says its name, its clang triples (the first is the one its compiler's
layouts must match), its binary format and library names, the toolchain that builds it on each
kind of build machine, how its programs run on each kind of machine (natively, under qemu, under
wine) or why they cannot, the backends it supports, and its CI runner with each backend's setup.
Every other module asks this one; none keeps a platform table of its own.

Nothing here imports another part of the toolchain: parsing, building, the gates and the CI
matrix all read it.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from generator.errors import BindgenError, UsageError

# Declarations are collected from this triple's parse; layouts come from every platform's triples.
HOST_TARGET = "x86_64-linux-gnu"
# The platform the test suite runs on (CI's publishing runner), and the verbs' default platform.
REFERENCE_PLATFORM = "linux-x86_64"

BACKENDS: tuple[str, ...] = ("cpu", "cuda", "vulkan", "metal")
# What `llama-bindgen build` builds: the CPU backend for every platform, and these GPU backends
# for these platforms. Vulkan is built and gated here (Mesa's lavapipe is its device); CUDA needs
# NVIDIA's toolkit and Metal a Mac, so those two are built by their CI jobs (`build` here says
# which tool is missing).
GPU_BACKEND_BUILDS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "cuda": ("linux-x86_64",),
        "metal": ("macos-arm64",),
        "vulkan": ("linux-x86_64",),
    }
)
# Debian packages a GPU backend's build (and its smoke on a software device) needs on its host,
# for the backends this project's own machines build (the test suite installs them).
GPU_BACKEND_APT: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "vulkan": (
            "glslang-tools", "glslc", "libvulkan-dev", "mesa-vulkan-drivers", "spirv-headers",
        ),
    }
)  # fmt: skip
BUILT_BACKENDS: tuple[str, ...] = ("cpu", *sorted(GPU_BACKEND_BUILDS))


def builds_backend(platform: str, backend: str) -> bool:
    """Whether `llama-bindgen build` builds ``backend`` for ``platform`` (and CI has its job)."""
    return backend == "cpu" or platform in GPU_BACKEND_BUILDS.get(backend, ())


def gate_key(platform: str, backend: str) -> str:
    """A gate record's key: the platform for the CPU backend, else ``<platform>-<backend>`` (the
    build's platform folder and the release archive use it too); ``split_key`` reverses it."""
    return platform if backend == "cpu" else f"{platform}-{backend}"


def split_key(key: str) -> tuple[str, str]:
    """``linux-x86_64`` -> (linux-x86_64, cpu); ``linux-x86_64-vulkan`` -> (linux-x86_64,
    vulkan): the platform and backend a gate record's key names."""
    name, _, backend = key.rpartition("-")
    if backend in BACKENDS and backend != "cpu" and name:
        return name, backend
    return key, "cpu"


# Debian's wine 8 launcher for 64-bit programs (the `wine` wrapper needs i386 multiarch).
WINE_LAUNCHERS: tuple[str, ...] = ("/usr/lib/wine/wine64", "wine64", "wine")
QEMU_AARCH64 = "qemu-aarch64"
AARCH64_SYSROOT = "/usr/aarch64-linux-gnu"
NO_GPU_ON_HOSTED_RUNNERS = "GitHub's hosted runners have no GPU"


class CannotRunError(BindgenError):
    """A platform's programs cannot run on this machine (the gate that needs them is not-run)."""

    exit_code = 3


@dataclass(frozen=True)
class Toolchain:
    """How a platform is compiled on a machine of platform ``build_host``."""

    build_host: str
    c_compiler: str
    cxx_compiler: str
    rc_compiler: str | None = None
    # "" native (compilers on PATH); "generated": a CMake toolchain file rendered from
    # templates/native/toolchain.cmake.j2; "android-ndk": the NDK's own, from $ANDROID_NDK_HOME.
    cmake_toolchain: str = ""
    sysroot: str | None = None  # CMAKE_FIND_ROOT_PATH of a generated toolchain file
    cmake_options: Mapping[str, str] = field(default_factory=dict)
    apt_packages: tuple[str, ...] = ()  # Debian packages that provide it ("" where not Debian)
    runtime_dirs: tuple[str, ...] = ()  # glob patterns: where its runtime libraries live
    runtime_libraries: tuple[str, ...] = ()  # shipped beside the libraries (MinGW's DLLs)
    # Non-empty: zig's clang (PyPI ziglang) cross-compiles for this zig target; the compilers,
    # ar and ranlib are small wrapper scripts llama-bindgen writes (native/host.py).
    zig_target: str = ""
    archiver: str | None = None  # CMAKE_AR / CMAKE_RANLIB of a generated toolchain file
    ranlib: str | None = None

    @property
    def cross(self) -> bool:
        return self.cmake_toolchain != ""

    def android_toolchain_file(self) -> Path | None:
        ndk = os.environ.get("ANDROID_NDK_HOME") or os.environ.get("ANDROID_NDK_LATEST_HOME")
        return Path(ndk) / "build" / "cmake" / "android.toolchain.cmake" if ndk else None

    def missing_tools(self) -> list[str]:
        """What this toolchain needs that this machine lacks."""
        if self.cmake_toolchain == "android-ndk":
            found = self.android_toolchain_file()
            tools = ["cmake", "ninja"]
            missing = [t for t in tools if shutil.which(t) is None]
            if found is None or not found.is_file():
                missing.append("the Android NDK (set ANDROID_NDK_HOME)")
            return missing
        if self.zig_target:
            if _find_spec("ziglang") is None:
                return ["zig (the PyPI package ziglang in the Python running llama-bindgen)"]
            # its compilers, ar and ranlib are scripts the build writes (native/host.py)
            return [t for t in ("cmake", "ninja") if shutil.which(t) is None]
        return self.missing_commands()

    def missing_commands(self) -> list[str]:
        """This toolchain's compilers and tools that are not on PATH (or not at their path)."""
        tools = [self.c_compiler, self.cxx_compiler, "cmake", "ninja"]
        tools += [t for t in (self.rc_compiler, self.archiver, self.ranlib) if t]
        return [t for t in tools if shutil.which(t) is None]


@dataclass(frozen=True)
class Emulator:
    """How a machine of platform ``host`` runs this platform's programs without being it."""

    host: str
    how: str  # words for reports: "under qemu-aarch64"
    launchers: tuple[str, ...]  # the first one found on PATH (or as a path) is used
    arguments: tuple[str, ...] = ()
    python: bool = False  # whether the platform's CPython can run this way (the Python smoke)
    apt_packages: tuple[str, ...] = ()
    dos_paths: bool = False  # programs see this machine's files as Z:\\... (wine)


@dataclass(frozen=True)
class Execution:
    """How this machine runs the platform's programs: ``[*prefix, program, ...]`` with ``env``."""

    platform: str
    how: str  # "natively", "under qemu-aarch64", "under wine"
    prefix: tuple[str, ...]
    env: Mapping[str, str]
    python: bool  # the platform's CPython runs this way (else only programs built for it)
    dos_paths: bool = False

    def program_path(self, path: Path) -> str:
        """``path`` as a program run this way names it."""
        text = str(path.resolve())
        return "Z:" + text.replace("/", "\\") if self.dos_paths else text


@dataclass(frozen=True)
class CiBackend:
    """One backend's CI job on the platform's runner."""

    setup: str = ""  # shell command installing the backend's SDK on the runner ("" none)
    # Non-empty: the job's build path has never run where we can see it; the job may fail
    # without failing the release (``continue-on-error``), and the README says so.
    experimental: str = ""
    smoke_not_run: str = ""  # why the smoke cannot run on the runner ("" it can)
    # The job also packs its build's wheel, not gated (its smoke cannot run on the runner), as a
    # workflow artifact for trying on a machine with the device; a release never publishes it.
    ungated_wheel: bool = False


@dataclass(frozen=True)
class Platform:
    """One platform: what it is, how it is built and run, and how CI builds it."""

    name: str
    system: str  # CMAKE_SYSTEM_NAME
    processor: str  # CMAKE_SYSTEM_PROCESSOR
    triples: tuple[str, ...]  # clang targets; triples[0]: what its compiler's layouts must match
    binary_format: str  # "elf", "pe" or "macho"
    machine: str  # ELF e_machine / PE machine / Mach-O CPU type name
    library_style: str  # "unix" (libX.so / libX.dylib), "mingw" (libllama.dll, ggml.dll), "msvc"
    # How its CPython names it: ``sys.platform`` ("android" on Android, as CPython 3.13 says and
    # the bindings' ABI guard takes where ``sys.getandroidapilevel`` exists) and
    # ``platform.machine()`` in lower case. The bindings find their libraries and layouts by these.
    python_platform: str
    python_machine: str
    toolchains: tuple[Toolchain, ...]
    emulators: tuple[Emulator, ...] = ()
    cannot_run: str = ""  # why no machine but its own runs its programs ("" when emulated)
    ci_runner: str = ""  # GitHub-hosted runner label
    ci_host: str = ""  # the platform of that runner's machine
    ci: Mapping[str, CiBackend] = field(default_factory=dict)  # backend -> its CI job

    @property
    def layout_triple(self) -> str:
        return self.triples[0]

    @property
    def backends(self) -> tuple[str, ...]:
        return tuple(b for b in BACKENDS if b in self.ci)

    @property
    def archive_format(self) -> str:
        """The release archive's format: what the platform's users unpack without extra tools."""
        return "zip" if self.system == "Windows" else "tar.gz"

    @property
    def shared_suffix(self) -> str:
        return {"pe": ".dll", "macho": ".dylib"}.get(self.binary_format, ".so")

    def library_file(self, stem: str) -> str:
        """The file name of library ``stem`` (``llama``, ``ggml``, ``llama_mtp``) here."""
        if self.library_style == "mingw":
            # llama.cpp's DLLs under MinGW: libllama.dll but ggml.dll, ggml-base.dll, ggml-cpu.dll.
            return f"{stem}.dll" if stem.startswith("ggml") else f"lib{stem}.dll"
        if self.library_style == "msvc":
            return f"{stem}.dll"
        return f"lib{stem}{self.shared_suffix}"

    def library_file_names(self, stem: str) -> tuple[str, ...]:
        """Every name library ``stem``'s file may have here, in the order the bindings' loader
        tries them: MinGW's DLLs with or without the ``lib`` prefix, ELF's and Mach-O's also
        versioned (a glob: ``libllama.so.0``, ``libllama.0.dylib``, the names a wheel holds)."""
        name = self.library_file(stem)
        if self.library_style == "mingw":
            return (f"{stem}{self.shared_suffix}", f"lib{stem}{self.shared_suffix}")
        if self.binary_format == "elf":
            return (name, f"{name}.*")
        if self.binary_format == "macho":
            return (name, f"lib{stem}.*{self.shared_suffix}")
        return (name,)

    def is_shared_library(self, path: Path) -> bool:
        if self.binary_format == "elf":
            return path.name.endswith(".so") or ".so." in path.name
        return path.suffix == self.shared_suffix

    def toolchain_for(self, host: str) -> Toolchain:
        """The toolchain that builds this platform on a machine of platform ``host``."""
        for toolchain in self.toolchains:
            if toolchain.build_host == host:
                return toolchain
        where = " or ".join(t.build_host for t in self.toolchains)
        raise UsageError(f"{self.name} is built on {where}; this machine is {host}")

    def execution(self, host: str) -> Execution:
        """How a machine of platform ``host`` runs this platform's programs; raises
        :class:`CannotRunError` with the reason when it cannot."""
        if host == self.name:
            return Execution(self.name, "natively", (), {}, python=True)
        for emulator in self.emulators:
            if emulator.host != host:
                continue
            launcher = _first_found(emulator.launchers)
            if launcher is None:
                raise CannotRunError(
                    f"{self.name} programs run {emulator.how} here, and none of "
                    f"{', '.join(emulator.launchers)} is installed "
                    f"(Debian: {' '.join(emulator.apt_packages)})"
                )
            return Execution(
                self.name, emulator.how, (launcher, *emulator.arguments),
                _emulator_env(emulator), emulator.python, emulator.dos_paths,
            )  # fmt: skip
        why = self.cannot_run or f"no emulator for {self.name} on {host}"
        raise CannotRunError(f"{self.name} programs cannot run on this {host} machine: {why}")

    def apt_packages(self, host: str) -> tuple[str, ...]:
        """Debian/Ubuntu packages a ``host`` machine needs to build this platform and run its
        programs (toolchain and emulator)."""
        found = {p for t in self.toolchains if t.build_host == host for p in t.apt_packages}
        found |= {p for e in self.emulators if e.host == host for p in e.apt_packages}
        return tuple(sorted(found))

    def why_not_buildable(self, host: str) -> str:
        """Why a machine of platform ``host`` cannot build this platform ("" it can): no
        toolchain for that machine, or the toolchain's tools are missing."""
        try:
            toolchain = self.toolchain_for(host)
        except UsageError as exc:
            return str(exc)
        missing = toolchain.missing_tools()
        return f"missing tools: {', '.join(missing)}" if missing else ""


def _find_spec(name: str) -> object | None:
    """``importlib.util.find_spec``, imported when asked (milliseconds at every start)."""
    import importlib.util

    return importlib.util.find_spec(name)


def _first_found(launchers: tuple[str, ...]) -> str | None:
    for name in launchers:
        if os.path.isabs(name):
            if os.access(name, os.X_OK):
                return name
        elif (found := shutil.which(name)) is not None:
            return found
    return None


def _emulator_env(emulator: Emulator) -> dict[str, str]:
    if not emulator.dos_paths:
        return {}
    from generator.paths import default_cache_dir

    # A prefix of our own (wine creates it on first use, about 5 s, but not its parent folder:
    # native/host.py's execution_here makes that), quiet, no GUI dialogs.
    prefix = default_cache_dir() / "wine" / "prefix"
    return {
        "WINEPREFIX": str(prefix),
        "WINEDEBUG": "-all",
        "WINEDLLOVERRIDES": "mscoree,mshtml=",
    }


def _frozen(options: dict[str, str]) -> Mapping[str, str]:
    return MappingProxyType(options)


_GCC = ("g++", "cmake", "ninja-build", "ccache")
_ARM_ARCH = _frozen({"GGML_CPU_ARM_ARCH": "armv8-a"})
_MINGW_ARCH_ROOT = "/usr/x86_64-w64-mingw32"
_WINE = Emulator(
    "linux-x86_64", "under wine", WINE_LAUNCHERS, apt_packages=("wine64",), dos_paths=True,
)  # fmt: skip
_APPLE_ONLY = "macOS programs run only on macOS (its CI runner); there is no macOS emulator here"
_ANDROID_ONLY = (
    "Android programs need an Android device or emulator; neither runs here nor on the hosted "
    "runner"
)
_NOT_SEEN_MACOS = "the macOS build (Apple clang on the runner) has not run where we can see it"
_NOT_SEEN_ANDROID = "the Android NDK build has not run where we can see it"
_NOT_BUILT_GPU = "llama-bindgen does not build this backend for this platform yet"
_NOT_BUILT_WINDOWS_GPU = (
    "windows-x86_64 is built with MinGW; CUDA's nvcc takes MSVC only, and ggml-vulkan's shader "
    "generator is not cross-built here: no MSVC toolchain in the registry yet"
)
_LINUX_SETUP = "sudo apt-get update && sudo apt-get install -y cmake ninja-build ccache"
_MACOS_SETUP = "brew install ninja ccache"  # the image has cmake and Apple clang
_WINDOWS_SETUP = "choco install -y ninja llvm"  # cmake is on the image
# The CUDA job's toolkit: NVIDIA's CUDA 13.0 wheels from PyPI (tools/cuda-toolkit-from-pypi, the
# toolkit this project's CUDA builds were made with here), nvcc's folder put on $GITHUB_PATH for
# the later steps; its wheel is llama-bindings-cu<CI_CUDA_MAJOR>.
CI_CUDA_MAJOR = 13
_CUDA_SETUP = (
    _LINUX_SETUP + " && tools/cuda-toolkit-from-pypi $RUNNER_TEMP/cuda-toolkit >> $GITHUB_PATH"
)
_NOT_SEEN_CUDA = "the CUDA job has not run on GitHub (its build path ran here, natively)"
_NO_NVIDIA_GPU = "GitHub's standard runners have no NVIDIA GPU (nor its driver, libcuda)"
_NOT_SEEN_METAL = "the Metal build (Apple clang on the runner) has not run where we can see it"
_NOT_BUILT_INTEL_METAL = (
    "Metal on Intel Macs is not built: llama.cpp's own CI dropped it (its runners' GPU comes and "
    "goes, llama.cpp pull request 6628)"
)
_PARAVIRTUAL_GPU = (
    "GitHub's macOS runners offer only Apple's paravirtual GPU, without the SIMD-group operations "
    "most ggml Metal kernels need (llama.cpp issue 8617)"
)
_NOT_SEEN_UBUNTU_VULKAN = (
    "built and gated here against Debian 13's Vulkan headers on Mesa's lavapipe; the Ubuntu "
    "runner's build (its own Vulkan 1.3.275 headers) has not run where we can see it"
)


def _gpu(setup: str = "", why: str = _NOT_BUILT_GPU) -> CiBackend:
    """A GPU backend the platform has that llama-bindgen does not build for it (no CI job)."""
    return CiBackend(setup, why, NO_GPU_ON_HOSTED_RUNNERS)


# Every macOS library is linked with the install name @rpath/<file> and an rpath of
# @loader_path, so it finds the others in its own folder (a wheel's lib/); set at link time,
# because no install_name_tool runs off macOS (release/macos_wheels.py checks the result).
MACOS_LINK_OPTIONS = _frozen(
    {
        "CMAKE_INSTALL_NAME_DIR": "@rpath",
        "CMAKE_BUILD_WITH_INSTALL_NAME_DIR": "ON",
        "CMAKE_INSTALL_RPATH": "@loader_path",
        "CMAKE_BUILD_WITH_INSTALL_RPATH": "ON",
    }
)


def _macos(arch: str, triple: str, cpu_type: str, runner: str, zig_target: str) -> Platform:
    """A macOS platform: built by Apple clang on its own runner, run only there."""
    name = f"macos-{arch}"
    return Platform(
        name=name,
        system="Darwin",
        processor=arch,
        triples=(triple,),
        binary_format="macho",
        machine=cpu_type,
        library_style="unix",
        python_platform="darwin",
        python_machine=arch,
        toolchains=(
            Toolchain(name, "clang", "clang++", cmake_options=MACOS_LINK_OPTIONS),
            # CPU only, here: zig bundles the macOS libc headers and stubs, not the SDK's
            # frameworks (Metal, Accelerate); ggml's default -march for Arm is not a zig CPU.
            Toolchain(
                "linux-x86_64",
                "zig-cc",
                "zig-c++",
                cmake_toolchain="generated",
                cmake_options=_frozen(
                    {
                        "GGML_METAL": "OFF",
                        "GGML_BLAS": "OFF",
                        "GGML_ACCELERATE": "OFF",
                        "GGML_OPENMP": "OFF",
                        **MACOS_LINK_OPTIONS,
                    }
                ),
                zig_target=zig_target,
            ),
        ),
        cannot_run=_APPLE_ONLY,
        ci_runner=runner,
        ci_host=name,
        ci={
            "cpu": CiBackend(_MACOS_SETUP, _NOT_SEEN_MACOS),
            "metal": (
                CiBackend(_MACOS_SETUP, _NOT_SEEN_METAL, _PARAVIRTUAL_GPU)
                if arch == "arm64"
                else _gpu(_MACOS_SETUP, _NOT_BUILT_INTEL_METAL)
            ),
        },
    )


def _android(abi: str, processor: str, elf_machine: str, options: dict[str, str]) -> Platform:
    """An Android ABI: the NDK's CMake toolchain on a Linux machine; runs on no machine we have."""
    return Platform(
        name=f"android-{abi}",
        system="Android",
        processor=processor,
        triples=(f"{processor}-linux-android",),
        binary_format="elf",
        machine=elf_machine,
        library_style="unix",
        python_platform="android",
        python_machine=processor,
        toolchains=(
            Toolchain(
                "linux-x86_64",
                "clang",
                "clang++",
                cmake_toolchain="android-ndk",
                cmake_options=_frozen(
                    {"ANDROID_ABI": abi, "ANDROID_PLATFORM": "android-28", "GGML_OPENMP": "OFF"}
                    | options
                ),
            ),
        ),
        cannot_run=_ANDROID_ONLY,
        ci_runner="ubuntu-24.04",
        ci_host="linux-x86_64",
        ci={
            "cpu": CiBackend(_LINUX_SETUP, _NOT_SEEN_ANDROID, _ANDROID_ONLY),
            "vulkan": _gpu(_LINUX_SETUP + " glslc"),
        },
    )


_PLATFORMS: tuple[Platform, ...] = (
    Platform(
        name="linux-x86_64",
        system="Linux",
        processor="x86_64",
        triples=("x86_64-linux-gnu",),
        binary_format="elf",
        machine="EM_X86_64",
        library_style="unix",
        python_platform="linux",
        python_machine="x86_64",
        toolchains=(Toolchain("linux-x86_64", "gcc", "g++", apt_packages=_GCC),),
        ci_runner="ubuntu-24.04",
        ci_host="linux-x86_64",
        ci={
            "cpu": CiBackend(_LINUX_SETUP),
            "cuda": CiBackend(_CUDA_SETUP, _NOT_SEEN_CUDA, _NO_NVIDIA_GPU, ungated_wheel=True),
            # lavapipe runs on the runner's CPU: the Vulkan job runs every gate there too
            "vulkan": CiBackend(
                " ".join((_LINUX_SETUP, *GPU_BACKEND_APT["vulkan"])), _NOT_SEEN_UBUNTU_VULKAN
            ),
        },
    ),
    Platform(
        name="linux-aarch64",
        system="Linux",
        processor="aarch64",
        triples=("aarch64-linux-gnu",),
        binary_format="elf",
        machine="EM_AARCH64",
        library_style="unix",
        python_platform="linux",
        python_machine="aarch64",
        toolchains=(
            Toolchain(
                "linux-x86_64",
                "aarch64-linux-gnu-gcc",
                "aarch64-linux-gnu-g++",
                cmake_toolchain="generated",
                sysroot=AARCH64_SYSROOT,
                cmake_options=_ARM_ARCH,
                apt_packages=("g++-aarch64-linux-gnu",),
                runtime_dirs=(f"{AARCH64_SYSROOT}/lib",),
            ),
            Toolchain("linux-aarch64", "gcc", "g++", cmake_options=_ARM_ARCH, apt_packages=_GCC),
        ),
        emulators=(
            Emulator(
                "linux-x86_64",
                "under qemu-aarch64",
                (QEMU_AARCH64,),
                ("-L", AARCH64_SYSROOT),
                python=True,
                apt_packages=("qemu-user",),
            ),
        ),
        ci_runner="ubuntu-24.04-arm",
        ci_host="linux-aarch64",
        ci={
            "cpu": CiBackend(
                _LINUX_SETUP,
                "built here by the Debian cross compiler and gated under qemu; the native build "
                "on an arm64 runner has not run where we can see it",
            ),
            "vulkan": _gpu(_LINUX_SETUP + " libvulkan-dev glslc"),
        },
    ),
    Platform(
        name="windows-x86_64",
        system="Windows",
        processor="AMD64",
        triples=("x86_64-w64-windows-gnu", "x86_64-pc-windows-msvc"),
        binary_format="pe",
        machine="IMAGE_FILE_MACHINE_AMD64",
        library_style="mingw",
        python_platform="win32",
        python_machine="amd64",
        toolchains=(
            Toolchain(
                "linux-x86_64",
                # The win32-threads compilers lack std::mutex; the -posix ones have it.
                "x86_64-w64-mingw32-gcc-posix",
                "x86_64-w64-mingw32-g++-posix",
                rc_compiler="x86_64-w64-mingw32-windres",
                cmake_toolchain="generated",
                sysroot=_MINGW_ARCH_ROOT,
                apt_packages=("g++-mingw-w64-x86-64",),
                runtime_dirs=("/usr/lib/gcc/x86_64-w64-mingw32/*-posix", f"{_MINGW_ARCH_ROOT}/lib"),
                runtime_libraries=(
                    "libstdc++-6.dll",
                    "libgcc_s_seh-1.dll",
                    "libgomp-1.dll",
                    "libwinpthread-1.dll",
                ),
            ),
        ),
        emulators=(_WINE,),
        # Built like here (Debian's MinGW on Ubuntu) and gated under wine on a Linux runner.
        ci_runner="ubuntu-24.04",
        ci_host="linux-x86_64",
        ci={
            "cpu": CiBackend(_LINUX_SETUP + " g++-mingw-w64-x86-64 wine64"),
            "cuda": _gpu(why=_NOT_BUILT_WINDOWS_GPU),
            "vulkan": _gpu(why=_NOT_BUILT_WINDOWS_GPU),
        },
    ),
    Platform(
        name="windows-arm64",
        system="Windows",
        processor="ARM64",
        triples=("aarch64-pc-windows-msvc",),
        binary_format="pe",
        machine="IMAGE_FILE_MACHINE_ARM64",
        library_style="msvc",
        python_platform="win32",
        python_machine="arm64",
        toolchains=(Toolchain("windows-arm64", "clang", "clang++"),),
        cannot_run="no Windows on Arm machine or emulator here",
        ci_runner="windows-11-arm",
        ci_host="windows-arm64",
        ci={
            "cpu": CiBackend(
                _WINDOWS_SETUP,
                "the Windows on Arm build (LLVM clang on the runner) has not run where we "
                "can see it",
            ),
        },
    ),
    _macos("arm64", "arm64-apple-darwin", "CPU_TYPE_ARM64", "macos-14", "aarch64-macos"),
    _macos("x86_64", "x86_64-apple-darwin", "CPU_TYPE_X86_64", "macos-13", "x86_64-macos"),
    _android("arm64-v8a", "aarch64", "EM_AARCH64", {"GGML_CPU_ARM_ARCH": "armv8-a"}),
    _android("x86_64", "x86_64", "EM_X86_64", {}),
)

PLATFORMS: Mapping[str, Platform] = MappingProxyType({p.name: p for p in _PLATFORMS})

# Every platform's triples: the layouts `generate` computes by default.
DEFAULT_TARGETS: tuple[str, ...] = tuple(sorted({t for p in _PLATFORMS for t in p.triples}))


def get_platform(name: str) -> Platform:
    try:
        return PLATFORMS[name]
    except KeyError:
        known = ", ".join(sorted(PLATFORMS))
        raise UsageError(f"unknown platform {name!r} (known: {known})") from None


def host_platform_name() -> str:
    """The registry name of this machine's platform."""
    import platform as host_platform  # milliseconds to import; only the build asks

    machine = host_platform.machine().lower()
    arch = {"amd64": "x86_64", "x86_64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}.get(
        machine, machine
    )
    system = sys.platform
    if system.startswith("linux"):
        name = "linux-x86_64" if arch == "x86_64" else "linux-aarch64" if arch == "arm64" else ""
    elif system == "darwin":
        name = f"macos-{arch}"
    elif system == "win32":
        name = f"windows-{arch}"
    else:
        name = ""
    if name not in PLATFORMS:
        raise UsageError(f"llama-bindgen does not know this machine ({system} {machine})")
    return name


def apt_packages_for(host: str) -> tuple[str, ...]:
    """Debian/Ubuntu packages that let a ``host`` machine build every platform it can build and
    run every platform it can emulate (what the test suite needs)."""
    found = {p for plat in _PLATFORMS for p in plat.apt_packages(host)}
    for backend, packages in GPU_BACKEND_APT.items():
        if host in GPU_BACKEND_BUILDS[backend]:  # built on its own machine
            found.update(packages)
    return tuple(sorted(found))


def runtime_library_path(toolchain: Toolchain, name: str) -> Path | None:
    """Where the toolchain keeps runtime library ``name`` (None when not found)."""
    for pattern in toolchain.runtime_dirs:  # a pattern: the GCC version is part of the path
        for folder in sorted(glob.glob(pattern), reverse=True):
            candidate = Path(folder) / name
            if candidate.is_file():
                return candidate
    return None


# CMake options every platform gets (recorded in build-info.json). Portable code (no -march=native),
# shared libraries, no HTTP/TLS, no tests/examples/tools/server (native_wrapper/CMakeLists.txt
# forces those off too).
BASE_CMAKE_OPTIONS: Mapping[str, str] = _frozen(
    {
        "CMAKE_BUILD_TYPE": "Release",
        "BUILD_SHARED_LIBS": "ON",
        "GGML_NATIVE": "OFF",
        "GGML_CCACHE": "OFF",
        "LLAMA_OPENSSL": "OFF",
        "LLAMA_CURL": "OFF",
        "LLAMA_BUILD_TESTS": "OFF",
        "LLAMA_BUILD_EXAMPLES": "OFF",
        "LLAMA_BUILD_TOOLS": "OFF",
        "LLAMA_BUILD_SERVER": "OFF",
        "LLAMA_MTP": "AUTO",
        # ggml's RPC backend, libggml-rpc (bound as libs.ggml_rpc when the tree has ggml-rpc.h:
        # sources/rpc_api.py), for every platform and backend: upstream builds it wherever it
        # has sockets (ws2_32 on Windows, POSIX sockets elsewhere), which is every platform in
        # this registry, so no platform turns it off. RDMA is off: upstream turns it on when
        # the build machine happens to have libibverbs (macOS: librdma), and a build must not
        # depend on that.
        "GGML_RPC": "ON",
        "GGML_RPC_RDMA": "OFF",
    }
)
