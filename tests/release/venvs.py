"""Fresh virtual environments for installing the release's wheels offline."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path


def venv(base: Path) -> Path:
    """A fresh virtual environment whose own site-packages come first; this interpreter's
    packages (cffi) after them through a ``.pth`` line, so pip resolves the wheel's dependency
    offline. Returns its python."""
    subprocess.run([sys.executable, "-m", "venv", str(base)], check=True)
    python = base / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    deps = sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
    (Path(purelib) / "zz_test_dependencies.pth").write_text("\n".join(deps) + "\n")
    return python


def pip_install(python: Path, release: Path, name: str, *more_stores: Path) -> str:
    """pip install ``name`` offline from the wheels in ``release`` and ``more_stores``."""
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-index", "--find-links", str(release),
         *(f"--find-links={store}" for store in more_stores), "--disable-pip-version-check",
         name],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout
