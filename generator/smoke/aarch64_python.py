"""An aarch64 Python (Debian's arm64 python3.11 + cffi) to run the smoke driver under qemu.

The arm64 packages are downloaded with the host's apt, using a private state folder (the host's
package lists and its dpkg database are not touched), and unpacked with ``dpkg -x`` into
``<cache>/qemu/aarch64-python/<key>/root``; a finished root is reused. Needs ``apt-get``,
``dpkg`` and ``qemu-aarch64`` (Debian package ``qemu-user``) and Debian's package mirrors.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

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


def _run(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise Aarch64PythonError(
            f"{what} failed ({proc.returncode}): {proc.stderr.strip()[-1500:]}"
        )


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
    lists = folder / "apt" / "lists"
    (lists / "partial").mkdir(parents=True)
    (folder / "apt" / "cache" / "archives" / "partial").mkdir(parents=True)
    debs = folder / "debs"
    debs.mkdir()
    options = [
        "-o", "APT::Architecture=arm64",
        "-o", "APT::Architectures=arm64",
        "-o", f"Dir::State::Lists={lists}",
        "-o", f"Dir::Cache={folder / 'apt' / 'cache'}",
        "-o", "Debug::NoLocking=1",
        "-o", "APT::Sandbox::User=root",
    ]  # fmt: skip
    _progress("apt-get update (arm64 package lists, private state folder)")
    _run(["apt-get", *options, "update"], "apt-get update for arm64")
    _progress(f"downloading {len(PACKAGES)} arm64 packages")
    proc = subprocess.run(
        ["apt-get", *options, "download", *PACKAGES],
        cwd=debs, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise Aarch64PythonError(f"apt-get download failed: {proc.stderr.strip()[-1500:]}")
    root = folder / "root"
    root.mkdir()
    files = sorted(debs.glob("*.deb"))
    _progress(f"unpacking {len(files)} packages into {root}")
    for deb in files:
        _run(["dpkg", "-x", str(deb), str(root)], f"dpkg -x {deb.name}")
    if not result.python.is_file():
        raise Aarch64PythonError(f"{PYTHON} missing after unpacking the arm64 packages")
    shutil.rmtree(debs)
    shutil.rmtree(folder / "apt")
    (folder / DONE_MARKER).write_text("\n".join(PACKAGES) + "\n", encoding="utf-8")
    return result
