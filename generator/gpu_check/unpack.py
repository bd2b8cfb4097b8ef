"""Wheels into a folder for ``sys.path``, with the standard library only: the device's fallback
when its Python cannot make a virtual environment with pip (Debian's without python3-venv).

``python -m generator.gpu_check.unpack WHEELS DEST`` extracts each wheel in WHEELS that this
Python can use (pure ``py3`` wheels, and binary ones for its own ``cpXY`` on manylinux x86-64)
into DEST and prints their names.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path


def usable(wheel_name: str, version: tuple[int, int] = sys.version_info[:2]) -> bool:
    """Whether a wheel (by its file name) installs on CPython ``version`` on linux x86-64."""
    parts = wheel_name.removesuffix(".whl").split("-")
    if len(parts) < 5:
        return False
    python, abi, platform = parts[-3:]
    if platform == "any":
        return any(tag in ("py3", f"py{version[0]}{version[1]}") for tag in python.split("."))
    own = f"cp{version[0]}{version[1]}"
    x86 = all(tag.endswith("_x86_64") and "linux" in tag for tag in platform.split("."))
    return x86 and own in python.split(".") and abi in (own, "abi3", "none")


def unpack(wheels: Path, dest: Path) -> list[str]:
    """Extract the usable wheels of ``wheels`` into ``dest``; their names."""
    dest.mkdir(parents=True, exist_ok=True)
    done = []
    for wheel in sorted(wheels.glob("*.whl")):
        if usable(wheel.name):
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(dest)
            done.append(wheel.name)
    return done


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m generator.gpu_check.unpack WHEELS DEST", file=sys.stderr)
        return 2
    for name in unpack(Path(argv[0]), Path(argv[1])):
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
