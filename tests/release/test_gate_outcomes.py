"""Every gate outcome, fed through a CI job's recording (``ci_job``) and ``release``: a gate that
did not run is never recorded as passed, and only a platform whose every gate passed is packed."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from generator.cli import main
from generator.release.ci_job import main as ci_job
from generator.release.gates import GATES_FILE, REQUIRED_GATES
from tests.release.fixtures import PASSED, TAG, make_generated, make_native, write_releases

BUILD_OUTCOMES = ("success", "failure", "cancelled", "skipped")
STATUSES = ("passed", "failed", "not-run", "success", None)  # None: the gate is absent
# gates files: missing, unreadable, another platform's, and one per status of each gate
GATES_FILES: list[tuple[str, dict[str, object] | str | None]] = [
    ("missing", None),
    ("unreadable", "{not json"),
    ("other platform", {"platform": "linux-aarch64", "backend": "cpu", "gates": PASSED}),
]
for gate, status in itertools.product(REQUIRED_GATES, STATUSES):
    statuses: dict[str, object] = dict(PASSED)
    if status is None:
        del statuses[gate]
    else:
        statuses[gate] = status
    doc = {"platform": "linux-x86_64", "backend": "cuda", "gates": statuses,
           "details": {gate: f"why {gate}"}}  # fmt: skip
    GATES_FILES.append((f"{gate}={status}", doc))


@pytest.mark.parametrize("build", BUILD_OUTCOMES)
@pytest.mark.parametrize(("label", "content"), GATES_FILES, ids=[g[0] for g in GATES_FILES])
def test_outcome_is_recorded_as_it_ran(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    build: str,
    label: str,
    content: dict[str, object] | str | None,
) -> None:
    native = tmp_path / "native"
    make_native(native, "linux-x86_64")  # the pinned CPU build, gated by releases.toml
    folder = native / "native-linux-x86_64-cuda"
    if build == "success":
        make_native(native, "linux-x86_64", "cuda", folder=folder.name)
    result = tmp_path / "gates-result.json"
    if content is not None:
        result.write_text(content if isinstance(content, str) else json.dumps(content))
    code = ci_job(
        [str(folder), "--platform", "linux-x86_64", "--backend", "cuda", "--build", build,
         "--gates", str(result)]
    )  # fmt: skip
    recorded = json.loads((folder / GATES_FILE).read_text())["gates"]
    reasons = json.loads((folder / GATES_FILE).read_text())["reasons"]

    said = content["gates"] if isinstance(content, dict) else {}
    trusted = isinstance(content, dict) and content["platform"] == "linux-x86_64"
    assert isinstance(said, dict)
    for gate in REQUIRED_GATES:
        assert recorded[gate] in ("passed", "failed", "not-run")
        if recorded[gate] == "passed":  # only what the build step or the gates run said passed
            assert build == "success"
            assert (said.get(gate) == "passed") if trusted else gate == "build"
        else:
            assert reasons.get(gate), f"{gate} is {recorded[gate]} without a reason"
    every = all(v == "passed" for v in recorded.values())
    assert (code == 0) == every

    write_releases(tmp_path / "releases.toml", {"linux-x86_64": PASSED})
    make_generated(tmp_path)
    out = tmp_path / "dist"
    argv = ["release", TAG, "--out", str(out), "--native", str(native), "--generated",
            str(tmp_path / "generated"), "--releases", str(tmp_path / "releases.toml")]  # fmt: skip
    assert main(argv) == 0
    packed = (out / f"llama-bindgen-linux-x86_64-cuda-{TAG}.tar.gz").is_file()
    assert packed == every
    assert every == (build == "success" and trusted and all(
        said.get(g) == "passed" for g in REQUIRED_GATES))  # fmt: skip
    if not packed:
        assert "left out linux-x86_64-cuda" in capsys.readouterr().err
        assert "- linux-x86_64-cuda: " in (out / "RELEASE_NOTES.md").read_text()
