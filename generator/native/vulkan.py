"""What a Vulkan build of ggml needs here: new enough Vulkan headers, glslc, SPIR-V headers.

ggml-vulkan (b11312) uses ``vk::LayerSettingEXT`` (VK_EXT_layer_settings, Vulkan headers 1.3.261
and later). Debian 12's ``libvulkan-dev`` is 1.3.239: then the headers of the next Debian release's
``libvulkan-dev`` (1.4) are downloaded with the host's apt (a private state folder, a sources list
derived from the host's own Debian entries with the suite renamed, so its mirror and proxy
settings hold) and unpacked with ``dpkg -x`` under ``<cache>/vulkan-headers/<suite>/``; the build
compiles against them and links Debian 12's loader (the headers are compatible with an older
loader: functions it lacks are looked up at run time).
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from generator.debs import fetch_and_unpack
from generator.errors import BindgenError, UsageError
from generator.paths import default_cache_dir
from generator.platforms import GPU_BACKEND_APT

MIN_HEADER_VERSION = 261  # VK_EXT_layer_settings
SYSTEM_INCLUDE = Path("/usr/include")
HEADERS_SUITE = "trixie"  # Debian 13: libvulkan-dev 1.4
HOST_SUITE = "bookworm"
SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
TOOLS = ("glslc",)
APT_PACKAGES = GPU_BACKEND_APT["vulkan"]
DONE_MARKER = ".complete"
_VERSION = re.compile(r"^#define VK_HEADER_VERSION (\d+)", re.MULTILINE)


class VulkanSetupError(BindgenError):
    """The Vulkan build's headers or tools could not be provided."""

    exit_code = 3


def header_version(include: Path) -> int | None:
    """VK_HEADER_VERSION of the headers under ``include`` (None when there are none)."""
    try:
        text = (include / "vulkan" / "vulkan_core.h").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = _VERSION.search(text)
    return int(found.group(1)) if found else None


def _progress(message: str) -> None:
    print(f"vulkan: {message}", file=sys.stderr, flush=True)


def missing_tools() -> str:
    """Why a Vulkan build cannot start here ("" when glslc and Vulkan headers are installed)."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if header_version(SYSTEM_INCLUDE) is None:
        missing.append("the Vulkan headers")
    if not missing:
        return ""
    return f"a Vulkan build needs {', '.join(missing)} (Debian packages: {' '.join(APT_PACKAGES)})"


def vulkan_include_dir(cache: Path | None = None) -> Path:
    """A folder of Vulkan headers new enough for ggml-vulkan: the system's, else downloaded."""
    why = missing_tools()
    if why:
        raise UsageError(why)
    system = header_version(SYSTEM_INCLUDE) or 0
    if system >= MIN_HEADER_VERSION:
        return SYSTEM_INCLUDE
    folder = (cache or default_cache_dir()) / "vulkan-headers" / HEADERS_SUITE
    include = folder / "root" / "usr" / "include"
    if (folder / DONE_MARKER).is_file() and (header_version(include) or 0) >= MIN_HEADER_VERSION:
        return include
    _progress(
        f"the system's Vulkan headers are 1.3.{system}, ggml-vulkan needs 1.3.{MIN_HEADER_VERSION}"
        f" or later: fetching {HEADERS_SUITE}'s libvulkan-dev headers into {folder}"
    )
    _download_headers(folder)
    found = header_version(include) or 0
    if found < MIN_HEADER_VERSION:
        raise VulkanSetupError(f"{HEADERS_SUITE}'s libvulkan-dev has headers {found}: too old")
    (folder / DONE_MARKER).write_text(f"{found}\n", encoding="utf-8")
    return include


def suite_sources(text: str, suite: str = HEADERS_SUITE) -> str:
    """The host's deb822 Debian entries for the main suite, renamed to ``suite`` (security and
    updates suites dropped): the same mirror, another release."""
    out = []
    for stanza in text.split("\n\n"):
        lines = [ln for ln in stanza.splitlines() if ln and not ln.startswith("#")]
        suites = next((ln.split(":", 1)[1].split() for ln in lines if ln.startswith("Suites:")), [])
        if HOST_SUITE not in suites:
            continue
        kept = [f"Suites: {suite}" if ln.startswith("Suites:") else ln for ln in lines]
        out.append("\n".join(kept))
    if not out:
        raise VulkanSetupError(f"{SOURCES} has no {HOST_SUITE} entry to derive {suite}'s from")
    return "\n\n".join(out) + "\n"


def _download_headers(folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    try:
        host = SOURCES.read_text(encoding="utf-8")
    except OSError as exc:
        raise VulkanSetupError(f"{SOURCES}: {exc.strerror or exc}") from None
    fetch_and_unpack(
        folder, ["libvulkan-dev"], folder / "root",
        what=f"{HEADERS_SUITE}'s libvulkan-dev", sources=suite_sources(host),
        error=VulkanSetupError, progress=_progress,
    )  # fmt: skip
