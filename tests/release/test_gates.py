"""The gate record in releases.toml and the rule that allows a release."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomlkit

from generator.release.errors import ReleaseRefusedError
from generator.release.gates import (
    GateRecord,
    PlatformGates,
    parse_gate_record,
    require_platforms,
    set_gate_record,
)
from generator.releases import load_document, load_releases
from tests.release.fixtures import PASSED, write_releases


def record_from(tmp_path: Path, gates: dict[str, dict[str, str]] | None) -> GateRecord:
    (entry,) = load_releases(write_releases(tmp_path / "releases.toml", gates))
    return parse_gate_record(entry.ref, entry.extra)


def test_all_passed_is_releasable(tmp_path: Path) -> None:
    record = record_from(tmp_path, {"linux-x86_64": {**PASSED, "log": "logs/x.txt"}})
    require_platforms("b11312", record)
    assert record.platforms["linux-x86_64"].failures() == []
    assert record.platforms["linux-x86_64"].log == "logs/x.txt"
    assert "log" not in record.platforms["linux-x86_64"].results
    assert record.providers == ("pypi-sdist llama-cpp-python==0.3.36",)
    assert record.lookup("linux-x86_64", "cpu") is record.platforms["linux-x86_64"]
    assert record.lookup("linux-x86_64", "cuda") is None


@pytest.mark.parametrize(
    ("gates", "reason"),
    [
        ({"linux-x86_64": {**PASSED, "smoke": "failed"}}, "smoke = 'failed'"),
        ({"linux-x86_64": {**PASSED, "smoke": "not-run"}}, "smoke = 'not-run'"),
        ({"linux-x86_64": {k: v for k, v in PASSED.items() if k != "layout"}}, "layout missing"),
        ({"linux-x86_64": {**PASSED, "build": "skipped"}}, "build = 'skipped'"),
    ],
)
def test_not_releasable(tmp_path: Path, gates: dict[str, dict[str, str]], reason: str) -> None:
    record = record_from(tmp_path, gates)
    assert reason in "; ".join(record.platforms["linux-x86_64"].failures())


def test_no_platform_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ReleaseRefusedError, match="records no platform"):
        require_platforms("b11312", record_from(tmp_path, {}))


def test_missing_record_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ReleaseRefusedError, match=r"no \[release\.gates\] record"):
        record_from(tmp_path, None)


def test_set_gate_record_round_trips(tmp_path: Path) -> None:
    path = write_releases(tmp_path / "releases.toml", None)
    before = path.read_text()
    record = GateRecord(
        platforms={
            "linux-x86_64": PlatformGates("linux-x86_64", dict(PASSED), "logs/a.txt"),
            "windows-x86_64": PlatformGates("windows-x86_64", {**PASSED, "smoke": "failed"}),
        },
        generator_version="0.1.0",
        providers=("cache",),
        diff_summary="no changes",
    )
    doc = load_document(path)
    set_gate_record(doc, "b11312", record)
    path.write_text(tomlkit.dumps(doc))
    assert path.read_text().startswith(before.rstrip("\n"))
    (entry,) = load_releases(path)
    assert parse_gate_record(entry.ref, entry.extra) == record
    again = parse_gate_record(entry.ref, entry.extra)
    assert again.platforms["windows-x86_64"].failures() == ["smoke = 'failed'"]
