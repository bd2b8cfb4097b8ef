"""Commands work on the checkout they are run in (or --repo), not on the one the tool came from."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from generator.errors import UsageError
from generator.paths import REPO_ENV, checkout_root, find_checkout, releases_path
from tests.repo import REPO_ROOT, folder_files


def _second_clone(tmp_path: Path) -> Path:
    clone = tmp_path / "second-clone"
    (clone / "generated").mkdir(parents=True)
    (clone / "releases.toml").write_bytes((REPO_ROOT / "releases.toml").read_bytes())
    return clone


def test_the_nearest_folder_holding_releases_toml_is_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(REPO_ENV, raising=False)
    clone = _second_clone(tmp_path)
    deep = clone / "a" / "b"
    deep.mkdir(parents=True)
    assert find_checkout(deep) == clone
    monkeypatch.chdir(deep)
    assert releases_path() == clone / "releases.toml"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    monkeypatch.chdir(outside)
    assert find_checkout() is None
    with pytest.raises(UsageError, match=r"bump needs a llama-bindgen checkout.*--repo DIR"):
        checkout_root("bump")
    assert releases_path().name == "releases.toml" and releases_path().parent.name == "data"


def test_repo_names_the_checkout_and_must_be_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clone = _second_clone(tmp_path)
    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.setenv(REPO_ENV, str(clone))
    assert find_checkout() == clone
    monkeypatch.setenv(REPO_ENV, str(tmp_path))
    with pytest.raises(UsageError, match="not a llama-bindgen checkout"):
        find_checkout()


@pytest.mark.needs_tree
@pytest.mark.parametrize("how", ["cwd", "--repo"])
def test_generate_writes_into_the_checkout_it_runs_in(
    tree_pin: Path, tmp_path: Path, how: str
) -> None:
    """This checkout's tool, run in a second clone, writes the second clone's generated/."""
    clone = _second_clone(tmp_path)
    before = folder_files(REPO_ROOT / "generated")
    args = ["generate", "--tree", str(tree_pin)]
    cwd = clone if how == "cwd" else tmp_path
    if how == "--repo":
        args += ["--repo", str(clone)]
    env = {k: v for k, v in os.environ.items() if k != REPO_ENV}
    env["PYTHONPATH"] = str(REPO_ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "generator", *args],
        cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip().splitlines()[-1]) == clone / "generated" / "llama_bindings"
    assert folder_files(clone / "generated" / "llama_bindings") == folder_files(
        REPO_ROOT / "generated" / "llama_bindings"
    )
    assert folder_files(REPO_ROOT / "generated") == before
