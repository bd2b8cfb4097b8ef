"""An aarch64 Python (Debian's arm64 python3.11 + cffi) to run the smoke driver under qemu.

The arm64 packages are downloaded with the host's apt, using a private state folder (the host's
package lists and its dpkg database are not touched), and unpacked with ``dpkg -x`` into
``<cache>/qemu/aarch64-python/<key>/root``; a finished root is reused. Needs ``apt-get``,
``dpkg`` and ``qemu-aarch64`` (Debian package ``qemu-user``) and Debian's package mirrors.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from generator.debs import fetch_and_unpack
from generator.errors import BindgenError
from generator.paths import default_cache_dir

# The interpreter, cffi and what they and llama.cpp's libraries load. libc6 etc. make the root a
# complete sysroot for qemu's -L, independent of the cross compiler's folder.
PACKAGES: tuple[str, ...] = (
    "libbz2-1.0",
    "libc6",
    "libexpat1",
    "libffi8",
    "libgcc-s1",
    "libgomp1",
    "liblzma5",
    "libpython3.11-minimal",
    "libpython3.11-stdlib",
    "libstdc++6",
    "libuuid1",
    "media-types",
    "python3-cffi",
    "python3-cffi-backend",
    "python3-ply",
    "python3-pycparser",
    "python3.11-minimal",
    "zlib1g",
)
PYTHON = "usr/bin/python3.11"
QEMU = "qemu-aarch64"
DONE_MARKER = ".complete"


class Aarch64PythonError(BindgenError):
    """The aarch64 Python for the smoke test could not be set up."""


@dataclass(frozen=True)
class Aarch64Python:
    root: Path

    @property
    def python(self) -> Path:
        return self.root / PYTHON

    def command(self) -> list[str]:
        """Prefix that runs the aarch64 interpreter here."""
        return [QEMU, "-L", str(self.root), str(self.python)]


def _progress(message: str) -> None:
    print(f"smoke linux-aarch64: {message}", file=sys.stderr, flush=True)


def cache_key() -> str:
    return hashlib.sha256("\n".join(PACKAGES).encode()).hexdigest()[:12]


def ensure_aarch64_python(cache: Path | None = None) -> Aarch64Python:
    """Return the cached aarch64 Python, downloading and unpacking it first when needed."""
    missing = [tool for tool in (QEMU, "apt-get", "dpkg") if shutil.which(tool) is None]
    if missing:
        raise Aarch64PythonError(
            f"missing {', '.join(missing)}: the aarch64 smoke test runs Debian's arm64 Python "
            "under qemu (Debian packages qemu-user, apt, dpkg)"
        )
    base = (cache if cache is not None else default_cache_dir()) / "qemu" / "aarch64-python"
    folder = base / cache_key()
    result = Aarch64Python(folder / "root")
    if (folder / DONE_MARKER).is_file() and result.python.is_file():
        _progress(f"python up to date in {folder}")
        return result
    if folder.exists():
        shutil.rmtree(folder)
    fetch_and_unpack(
        folder, PACKAGES, folder / "root", what="Debian's arm64 Python",
        apt_options=["-o", "APT::Architecture=arm64", "-o", "APT::Architectures=arm64"],
        error=Aarch64PythonError, progress=_progress,
    )  # fmt: skip
    if not result.python.is_file():
        raise Aarch64PythonError(f"{PYTHON} missing after unpacking the arm64 packages")
    (folder / DONE_MARKER).write_text("\n".join(PACKAGES) + "\n", encoding="utf-8")
    return result
