"""Where things live: the tool's own data, the checkout it works on, and the cache directory.

Two kinds of files, found two ways:

* the tool's data (templates, the MTP wrapper's sources, freestanding headers, the releases and
  tag sources known when the tool was built) ship inside the ``generator`` package, so an
  installed wheel has them;
* a checkout (the repository a bump edits: ``releases.toml``, ``generated/``, ``CHANGELOG.md``,
  ``reports/``, the release workflow; ``tag-sources.toml``, which ``fetch`` adds to) is the
  folder given with ``--repo``, else the working directory or the nearest parent holding
  ``releases.toml``, never the folder the tool was installed from.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from generator.errors import UsageError
from generator.shipped import verified_files

CACHE_ENV = verified_files.CACHE_ENV
REPO_ENV = "LLAMA_BINDGEN_REPO"
CHECKOUT_MARKER = "releases.toml"
TAG_SOURCES = "tag-sources.toml"


def package_dir() -> Path:
    """The installed ``generator`` package (its data files sit beside its modules)."""
    return Path(__file__).resolve().parent


def templates_dir() -> Path:
    return package_dir() / "templates"


def shipped_dir() -> Path:
    """Hand-written modules copied into the bindings package (``loader.py``, ``runtime/``)."""
    return package_dir() / "shipped"


def wrapper_dir() -> Path:
    """The MTP wrapper's sources: ``llama_mtp.h``, ``llama_mtp.cpp`` and its CMake project."""
    return package_dir() / "native_wrapper"


def bundled_releases_path() -> Path:
    """The ``releases.toml`` the tool was built with (read-only: what ``fetch`` knows anywhere)."""
    return package_dir() / "data" / "releases.toml"


def bundled_tag_sources_path() -> Path:
    """The ``tag-sources.toml`` the tool was built with (read-only)."""
    return package_dir() / "data" / TAG_SOURCES


def _explicit_checkout() -> Path | None:
    env = os.environ.get(REPO_ENV)
    if not env:
        return None
    root = Path(env).expanduser().resolve()
    if not (root / CHECKOUT_MARKER).is_file():
        raise UsageError(f"--repo {root}: not a llama-bindgen checkout (no {CHECKOUT_MARKER})")
    return root


def find_checkout(start: Path | None = None) -> Path | None:
    """``--repo`` (``$LLAMA_BINDGEN_REPO``) when given, else the nearest folder from ``start``
    (the working directory) upwards that holds ``releases.toml``; None outside a checkout."""
    explicit = _explicit_checkout()
    if explicit is not None:
        return explicit
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / CHECKOUT_MARKER).is_file():
            return folder
    return None


def checkout_root(purpose: str) -> Path:
    """The checkout, or a one-line error saying why ``purpose`` needs one and how to name it."""
    root = find_checkout()
    if root is None:
        raise UsageError(
            f"{purpose} needs a llama-bindgen checkout: run it inside a clone (a folder holding "
            f"{CHECKOUT_MARKER}) or name one with --repo DIR"
        )
    return root


def checkout_generated(purpose: str) -> Path:
    """The checkout's ``generated/`` folder (see :func:`checkout_root`)."""
    return checkout_root(purpose) / "generated"


def releases_path() -> Path:
    """The checkout's ``releases.toml``, else the one bundled with the tool."""
    root = find_checkout()
    return root / CHECKOUT_MARKER if root is not None else bundled_releases_path()


def tag_sources_paths(cache: Path) -> tuple[Path, Path | None]:
    """Where ``fetch`` records the sources of tags ``releases.toml`` does not pin, and where it
    reads more of them: in a checkout its ``tag-sources.toml`` (and nothing more); outside one,
    ``<cache>/tag-sources.toml``, below the one bundled with the tool."""
    root = find_checkout()
    if root is not None:
        return root / TAG_SOURCES, None
    return cache / TAG_SOURCES, bundled_tag_sources_path()


def default_cache_dir() -> Path:
    """``$LLAMA_BINDGEN_CACHE`` if set, else the per-user cache folder of the platform: the rule
    the bindings' seals follow too (``shipped/verified_files.py`` is its one home)."""
    return Path(verified_files.cache_dir()).resolve()


def cached_text(folder: str, inputs: str, compute: Callable[[], str], suffix: str = ".txt") -> str:
    """``compute()``'s text, kept in ``<cache>/<folder>/`` under the sha256 of ``inputs`` (all it
    depends on) plus ``suffix``: a later call with the same inputs reads it back. A cache that
    cannot be read or written only costs the computation; a file is written whole or not at
    all."""
    name = hashlib.sha256(inputs.encode()).hexdigest() + suffix
    cached = default_cache_dir() / folder / name
    try:
        return cached.read_text(encoding="utf-8")
    except OSError:
        pass
    text = compute()
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f".{cached.name}.{os.getpid()}")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, cached)
    except OSError:
        pass
    return text
