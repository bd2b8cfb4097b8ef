"""How each built platform compiles and reads back the layout probe, and which IR target it is."""

from __future__ import annotations

import shutil

from generator.errors import UsageError
from generator.verify.layout_probe import ProbeRunner

WINE = "/usr/lib/wine/wine64"


def probe_runner(platform: str) -> ProbeRunner:
    if platform == "linux-x86_64":
        return ProbeRunner(platform, "x86_64-linux-gnu", "gcc", (), "ran natively")
    if platform == "linux-aarch64":
        return ProbeRunner(
            platform,
            "aarch64-linux-gnu",
            "aarch64-linux-gnu-gcc",
            ("qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"),
            "ran under qemu-aarch64",
        )
    if platform == "windows-x86_64":
        if shutil.which(WINE):
            return ProbeRunner(
                platform,
                "x86_64-w64-windows-gnu",
                "x86_64-w64-mingw32-gcc",
                (WINE,),
                "ran under wine",
            )
        return ProbeRunner(
            platform,
            "x86_64-w64-windows-gnu",
            "x86_64-w64-mingw32-gcc",
            None,
            "read from the MinGW-compiled object (wine not installed: not executed)",
        )
    raise UsageError(f"no layout probe for platform {platform!r}")
