"""The platforms ``llama-bindgen build`` knows: compilers, CMake options, library names, formats.

Cross toolchains are Debian's packages (named in ``apt_packages``); the CMake toolchain file for a
cross platform is rendered from ``templates/native/toolchain.cmake.j2``.
"""

from __future__ import annotations

import platform as host_platform
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from generator.errors import UsageError


@dataclass(frozen=True)
class Platform:
    """One build target."""

    name: str
    system: str  # CMAKE_SYSTEM_NAME
    processor: str  # CMAKE_SYSTEM_PROCESSOR
    binary_format: str  # "elf" or "pe"
    machine: str  # ELF e_machine name (pyelftools) or PE machine name
    c_compiler: str
    cxx_compiler: str
    cross: bool
    apt_packages: tuple[str, ...]
    sysroot: str | None = None  # CMAKE_FIND_ROOT_PATH for cross builds
    rc_compiler: str | None = None
    cmake_options: dict[str, str] = field(default_factory=dict)
    runtime_dirs: tuple[str, ...] = ()  # where the toolchain's runtime libraries live
    runtime_libraries: tuple[str, ...] = ()  # shipped beside the libraries (Windows DLLs)
    runner: tuple[str, ...] = ()  # prefix that runs this platform's programs here

    @property
    def shared_suffix(self) -> str:
        return ".dll" if self.binary_format == "pe" else ".so"

    def library_file(self, stem: str) -> str:
        """The file name of library ``stem`` (``llama``, ``ggml``, ``llama_mtp``) here."""
        if self.binary_format == "pe":
            # llama.cpp's DLLs: libllama.dll but ggml.dll, ggml-base.dll, ggml-cpu.dll.
            return f"{stem}.dll" if stem.startswith("ggml") else f"lib{stem}.dll"
        return f"lib{stem}.so"

    def missing_tools(self) -> list[str]:
        """Executables this platform needs that are not on PATH."""
        tools = [self.c_compiler, self.cxx_compiler, "cmake", "ninja"]
        if self.rc_compiler:
            tools.append(self.rc_compiler)
        return [t for t in tools if shutil.which(t) is None]

    def can_run_here(self) -> bool:
        """Whether programs built for this platform can be run on this machine."""
        if not self.cross:
            return True
        return bool(self.runner) and shutil.which(self.runner[0]) is not None


def _host_machine() -> str:
    return host_platform.machine().lower()


PLATFORMS: dict[str, Platform] = {
    "linux-x86_64": Platform(
        name="linux-x86_64",
        system="Linux",
        processor="x86_64",
        binary_format="elf",
        machine="EM_X86_64",
        c_compiler="gcc",
        cxx_compiler="g++",
        cross=False,
        apt_packages=("g++", "cmake", "ninja-build", "ccache"),
    ),
    "linux-aarch64": Platform(
        name="linux-aarch64",
        system="Linux",
        processor="aarch64",
        binary_format="elf",
        machine="EM_AARCH64",
        c_compiler="aarch64-linux-gnu-gcc",
        cxx_compiler="aarch64-linux-gnu-g++",
        cross=True,
        apt_packages=("g++-aarch64-linux-gnu", "qemu-user"),
        sysroot="/usr/aarch64-linux-gnu",
        cmake_options={"GGML_CPU_ARM_ARCH": "armv8-a"},
        runtime_dirs=("/usr/aarch64-linux-gnu/lib",),
        runner=("qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"),
    ),
    "windows-x86_64": Platform(
        name="windows-x86_64",
        system="Windows",
        processor="AMD64",
        binary_format="pe",
        machine="IMAGE_FILE_MACHINE_AMD64",
        # The win32-threads compilers lack std::mutex; the -posix ones have it.
        c_compiler="x86_64-w64-mingw32-gcc-posix",
        cxx_compiler="x86_64-w64-mingw32-g++-posix",
        cross=True,
        apt_packages=("g++-mingw-w64-x86-64",),
        sysroot="/usr/x86_64-w64-mingw32",
        rc_compiler="x86_64-w64-mingw32-windres",
        runtime_dirs=("/usr/lib/gcc/x86_64-w64-mingw32/12-posix", "/usr/x86_64-w64-mingw32/lib"),
        runtime_libraries=(
            "libstdc++-6.dll",
            "libgcc_s_seh-1.dll",
            "libgomp-1.dll",
            "libwinpthread-1.dll",
        ),
    ),
}


def host_platform_name() -> str:
    """The platform name of this machine when it is one llama-bindgen builds for natively."""
    if host_platform.system() == "Linux" and _host_machine() in ("x86_64", "amd64"):
        return "linux-x86_64"
    raise UsageError(f"no native platform for {host_platform.system()} {_host_machine()}")


def get_platform(name: str) -> Platform:
    try:
        plat = PLATFORMS[name]
    except KeyError:
        known = ", ".join(sorted(PLATFORMS))
        raise UsageError(f"unknown platform {name!r} (known: {known})") from None
    if not plat.cross and name != host_platform_name():
        raise UsageError(f"{name} is only built natively, and this machine is not {name}")
    return plat


def runtime_library_path(plat: Platform, name: str) -> Path | None:
    """Where the toolchain keeps runtime library ``name`` (None when not found)."""
    for folder in plat.runtime_dirs:
        candidate = Path(folder) / name
        if candidate.is_file():
            return candidate
    return None


# CMake options every platform gets (recorded in build-info.json). Portable code (no -march=native),
# shared libraries, no HTTP/TLS, no tests/examples/tools/server (native_wrapper/CMakeLists.txt
# forces those off too).
BASE_CMAKE_OPTIONS: dict[str, str] = {
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
}
