"""The seals that let ``load()`` hash each library file version once (``verified_files``).

The module is imported from its source (generator/shipped/), which the emitter copies into the
bindings byte for byte (test_emit checks that); the loads themselves are in
tests/verify/test_abi_guard.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from generator.paths import default_cache_dir
from generator.shipped import verified_files


@pytest.fixture
def seals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache" / "seals.txt"
    monkeypatch.setenv(verified_files.FILE_ENV, str(path))
    return path


def _files(folder: Path, *names: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name in names:
        (folder / name).write_bytes(name.encode() * 100)
        out.append(folder / name)
    return out


def test_a_recorded_seal_is_found_and_only_that_one(seals: Path, tmp_path: Path) -> None:
    info, lib, other = _files(tmp_path / "lib", "build-info.json", "libllama.so", "libggml.so")
    line = verified_files.seal(info, [lib])
    assert line is not None and str(lib) in line
    assert not verified_files.is_sealed(line)
    verified_files.record(line)
    assert verified_files.is_sealed(verified_files.seal(info, [lib]))
    assert not verified_files.is_sealed(verified_files.seal(info, [lib, other]))
    assert seals.read_text(encoding="utf-8") == line + "\n"


@pytest.mark.parametrize("change", ["rewritten", "touched", "replaced", "record-touched"])
def test_a_changed_file_breaks_the_seal(seals: Path, tmp_path: Path, change: str) -> None:
    info, lib = _files(tmp_path / "lib", "build-info.json", "libllama.so")
    verified_files.record(verified_files.seal(info, [lib]))
    st = lib.stat()
    if change == "rewritten":  # same size, same content length, new bytes in place
        with lib.open("r+b") as fh:
            fh.write(b"X")
    elif change == "touched":
        os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    elif change == "replaced":  # a new file moved over the path
        fresh = tmp_path / "fresh"
        fresh.write_bytes(lib.read_bytes())
        os.utime(fresh, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(fresh, lib)
    else:
        os.utime(info, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert not verified_files.is_sealed(verified_files.seal(info, [lib]))


def test_a_path_that_cannot_be_one_line_is_not_sealed(seals: Path, tmp_path: Path) -> None:
    info, lib = _files(tmp_path / "odd\tfolder", "build-info.json", "libllama.so")
    assert verified_files.seal(info, [lib]) is None
    assert verified_files.seal(info, [tmp_path / "missing.so"]) is None
    verified_files.record(None)
    assert not seals.exists()
    assert not verified_files.is_sealed(None)


def test_off_records_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(verified_files.FILE_ENV, "off")
    monkeypatch.setenv(verified_files.CACHE_ENV, str(tmp_path / "cache"))
    info, lib = _files(tmp_path / "lib", "build-info.json", "libllama.so")
    line = verified_files.seal(info, [lib])
    verified_files.record(line)
    assert verified_files.cache_file() is None
    assert not verified_files.is_sealed(line)
    assert not (tmp_path / "cache").exists()


def test_the_default_file_is_in_the_bindgen_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(verified_files.FILE_ENV, raising=False)
    monkeypatch.setenv(verified_files.CACHE_ENV, str(tmp_path / "cache"))
    assert verified_files.cache_file() == str(tmp_path / "cache" / verified_files.FILE_NAME)


def test_an_unwritable_cache_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv(verified_files.FILE_ENV, str(blocker / "seals.txt"))
    info, lib = _files(tmp_path / "lib", "build-info.json", "libllama.so")
    line = verified_files.seal(info, [lib])
    verified_files.record(line)  # must not raise
    assert not verified_files.is_sealed(line)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib", "not-a-folder"]


def test_an_unreadable_or_foreign_seal_file_is_a_miss(seals: Path, tmp_path: Path) -> None:
    seals.parent.mkdir(parents=True)
    seals.write_bytes(b"\xff\xfe not utf-8 \x00")
    info, lib = _files(tmp_path / "lib", "build-info.json", "libllama.so")
    line = verified_files.seal(info, [lib])
    assert not verified_files.is_sealed(line)
    verified_files.record(line)  # replaces the unreadable file
    assert verified_files.is_sealed(line)


def test_only_the_newest_seals_are_kept(seals: Path, tmp_path: Path) -> None:
    info = _files(tmp_path / "lib", "build-info.json")[0]
    libs = _files(tmp_path / "lib", *(f"lib{i}.so" for i in range(verified_files.KEEP + 3)))
    lines = [verified_files.seal(info, [lib]) for lib in libs]
    for line in lines:
        verified_files.record(line)
    kept = seals.read_text(encoding="utf-8").splitlines()
    assert kept == lines[-verified_files.KEEP :]
    assert not verified_files.is_sealed(lines[0])


@pytest.mark.parametrize("xdg", [True, False], ids=["xdg-set", "xdg-unset"])
@pytest.mark.parametrize("platform", ["linux", "darwin", "win32"])
def test_the_default_folder_is_the_tools_own_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, platform: str, xdg: bool
) -> None:
    """Without ``$LLAMA_BINDGEN_CACHE`` the seals go where the tool's cache goes: the rule has
    one home, verified_files.cache_dir (the bindings cannot import platformdirs), which
    generator.paths uses; it is compared here, platform by platform, with platformdirs' user
    cache folder for ``llama-bindgen``, where earlier versions of the tool kept their cache."""
    import platformdirs.macos
    import platformdirs.unix
    import platformdirs.windows

    for name in (verified_files.FILE_ENV, verified_files.CACHE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    if xdg:
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    else:
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "local"))
    # platformdirs asks Windows itself for the folder; off Windows, answer with the variable
    monkeypatch.setattr(platformdirs.windows, "get_win_folder", lambda _: str(tmp_path / "local"))
    dirs = {
        "linux": platformdirs.unix.Unix,
        "darwin": platformdirs.macos.MacOS,
        "win32": platformdirs.windows.Windows,
    }[platform]("llama-bindgen")
    monkeypatch.setattr(verified_files.sys, "platform", platform)
    found = verified_files.cache_file()
    assert found == str(Path(dirs.user_cache_dir) / verified_files.FILE_NAME)
    assert default_cache_dir() == Path(dirs.user_cache_dir).resolve()
