"""``prepare``: the kit a GPU check carries, written here into one folder (``gpu-kit/``).

* ``tree.tar.xz``: the trimmed tree (:mod:`.trim`), members under ``tree/``;
* ``wheels/``: the Python packages the build and the gates import (:data:`CARRIED`, this
  environment's versions, with their dependencies), pure wheels and, for the binary ones (cffi,
  MarkupSafe), manylinux x86-64 wheels for every CPython in :data:`PYTHON_VERSIONS`; libclang is
  not carried (the committed ``ir.json`` is the interface), nor gguf and numpy (the test models
  are written here);
* ``models/``: the smoke's test models (``smoke.write_test_models``) for the tree's vocabulary;
* ``kit.json``: what the kit holds (the tree's metadata, the vocabulary, the wheels, the sizes).

The kit travels as one ignored path beside the working tree, under the device tool's limit.
"""

from __future__ import annotations

import json
import shutil
import tarfile
from importlib import metadata
from pathlib import Path
from typing import Any

from generator import __version__
from generator.errors import SourceError, UsageError
from generator.gpu_check.trim import write_trimmed_tree
from generator.paths import default_cache_dir
from generator.sources.providers import run_pip
from generator.sources.tree import Tree

KIT_FORMAT = 1
KIT_MANIFEST = "kit.json"
TREE_ARCHIVE = "tree.tar.xz"
TREE_FOLDER = "tree"  # the archive's one top-level folder
WHEELS, MODELS = "wheels", "models"
# The tool's run-time requirements (pyproject.toml) a GPU check imports; NOT_CARRIED the others.
CARRIED = ("cffi", "jinja2", "requests", "tomlkit", "tqdm", "pyelftools", "pefile", "macholib")
NOT_CARRIED = ("libclang", "gguf", "numpy")
PYTHON_VERSIONS = ("3.11", "3.12", "3.13", "3.14")
WHEEL_PLATFORM = "manylinux2014_x86_64"
# Where the downloaded wheels are kept (below the cache), so that a kit is made offline again.
WHEEL_STORE = "gpu-kit-wheels"
# The device tool carries 64 MiB in all, the working tree (about 7 MiB) included.
KIT_LIMIT_BYTES = 48 * 1024 * 1024


def requirements() -> list[str]:
    """``CARRIED`` pinned to the versions installed here (the ones the tests ran with)."""
    try:
        return [f"{name}=={metadata.version(name)}" for name in CARRIED]
    except metadata.PackageNotFoundError as exc:
        raise UsageError(f"prepare needs the tool's requirements installed: {exc}") from exc


def download_wheels(dest: Path, wanted: list[str]) -> list[str]:
    """``pip download`` of ``wanted`` and their dependencies, binary only, for every CPython of
    ``PYTHON_VERSIONS`` on manylinux x86-64, into ``dest``; the wheels' names. Resolved first
    from the wheels kept in ``<cache>/gpu-kit-wheels/`` (offline, as the tests run) and only
    when those do not satisfy it through pip's index, into that store."""
    dest.mkdir(parents=True, exist_ok=True)
    store = default_cache_dir() / WHEEL_STORE
    for version in PYTHON_VERSIONS:
        args = ["download", "--only-binary=:all:", "--platform", WHEEL_PLATFORM,
                "--python-version", version, "--implementation", "cp"]  # fmt: skip
        offline = [*args, "--no-index", "--find-links", str(store), "-d", str(dest), *wanted]
        what = f"pip download for CPython {version}"
        try:
            run_pip(offline, f"{what} (from {store})")
        except SourceError:
            run_pip([*args, "-d", str(store), *wanted], what)
            run_pip(offline, f"{what} (from {store})")
    return sorted(p.name for p in dest.glob("*.whl"))


def _normalised(member: tarfile.TarInfo) -> tarfile.TarInfo:
    """No times, owners or folder order from this machine: one tree, one archive."""
    member.mtime, member.uid, member.gid, member.uname, member.gname = 0, 0, 0, "", ""
    return member


def _archive_tree(folder: Path, archive: Path) -> None:
    with tarfile.open(archive, "w:xz") as tar:
        tar.add(folder, arcname=TREE_FOLDER, recursive=False, filter=_normalised)
        for path in sorted(folder.rglob("*")):
            arcname = f"{TREE_FOLDER}/{path.relative_to(folder).as_posix()}"
            tar.add(path, arcname=arcname, recursive=False, filter=_normalised)


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def prepare_kit(tree: Tree, kit: Path, *, wheels: bool = True) -> dict[str, Any]:
    """Write the kit for ``tree`` into ``kit`` (replaced); its manifest. ``wheels`` False: none
    (a test of the rest)."""
    from generator.smoke import vocabulary_for_tree, write_test_models

    if kit.exists():
        shutil.rmtree(kit)
    scratch = kit / "scratch"
    meta = write_trimmed_tree(tree, scratch / TREE_FOLDER)
    _archive_tree(scratch / TREE_FOLDER, kit / TREE_ARCHIVE)
    vocabulary = vocabulary_for_tree(scratch / TREE_FOLDER)
    shutil.rmtree(scratch)
    models = write_test_models(kit / MODELS, vocabulary)
    wanted = requirements()
    names = download_wheels(kit / WHEELS, wanted) if wheels else []
    manifest: dict[str, Any] = {
        "format": KIT_FORMAT,
        "generator_version": __version__,
        "tree": meta,
        "vocabulary": vocabulary,
        "models": sorted(p.name for p in models.values()),
        "requirements": wanted if wheels else [],
        "python_versions": list(PYTHON_VERSIONS) if wheels else [],
        "wheels": names,
    }
    (kit / KIT_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    manifest["bytes"] = folder_bytes(kit)
    if manifest["bytes"] > KIT_LIMIT_BYTES:
        raise UsageError(
            f"the kit is {manifest['bytes']} bytes, over its limit of {KIT_LIMIT_BYTES}"
        )
    return manifest


def read_kit(kit: Path) -> dict[str, Any]:
    """The manifest of the kit in ``kit``; UsageError when there is none."""
    path = kit / KIT_MANIFEST
    if not path.is_file():
        raise UsageError(f"{kit}: no gpu-check kit ({KIT_MANIFEST} missing): run prepare first")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if data.get("format") != KIT_FORMAT:
        raise UsageError(f"{path}: kit format {data.get('format')}, expected {KIT_FORMAT}")
    return data
