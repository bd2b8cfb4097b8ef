"""The licence texts of a llama.cpp tree, shipped with everything made from it.

llama.cpp's ``LICENSE`` (MIT, "The ggml authors") covers llama.cpp and the ggml sources inside
the tree (``ggml/`` has no licence file of its own at b11312); ``licenses/`` holds the texts of
code vendored into the built libraries (nlohmann/json as ``LICENSE-jsonhpp``). Native builds
ship all of them in ``licenses/``; the bindings, which carry llama.h's doc comments, ship
llama.cpp's.
"""

from __future__ import annotations

from pathlib import Path

from generator.errors import SourceError

LICENSES_DIR = "licenses"
LLAMA_LICENSE = "LICENSE-llama.cpp"  # the name llama.cpp's LICENSE is shipped under


def llama_license(tree: Path) -> bytes:
    path = tree / "LICENSE"
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SourceError(f"{tree}: no LICENSE; a llama.cpp tree ships one ({exc})") from None


def tree_licenses(tree: Path) -> dict[str, bytes]:
    """{shipped file name: text}: llama.cpp's LICENSE and every file of the tree's licenses/."""
    found = {LLAMA_LICENSE: llama_license(tree)}
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
