"""Replay the linux-x86_64 jobs (cpu, and vulkan on Mesa's lavapipe) of the committed release
workflow here, step by step.

The job's ``run:`` steps run through bash as the runner would run them: with the workflow's, the
job's and each step's ``env`` (``${{ ... }}`` expressions resolved from the matrix entry, the
workflow inputs and the earlier steps' outcomes), each step's ``if:`` evaluated, in a temporary
copy of this checkout (what ``actions/checkout`` gives). The workflow's commands are proven on one
job, not only linted. What the replay does instead of a step, and why:

* ``actions/checkout``: the copy of this checkout; ``actions/setup-python``: this interpreter,
  first on ``PATH`` (its version checked against the step's ``python-version``);
  ``actions/upload-artifact``: the folder it would upload is checked to exist and hold files;
  ``actions/cache``: its path is checked to lie in the llama-bindgen cache folder the job uses,
  which is this machine's own cache, linked at ``$RUNNER_TEMP/llama-bindgen-cache`` (as a
  restored cache would hold it: the builds stay warm).
* ``$GITHUB_ENV``: a file, whose ``KEY=VALUE`` lines a step writes are in the later steps'
  environment, as on the runner; ``$RUNNER_TEMP`` and ``runner.temp``: a temporary folder.
* The platform's setup step (``sudo apt-get ... install PKGS``) needs root and the network: the
  replay checks instead that every package it names is installed here (``dpkg-query``).
* The nox sessions find their virtualenvs already made (nox reuses them) with this interpreter's
  packages on their path, and pip runs with no index: the test runs offline, and the sessions
  still install this copy of the project into their own environments and run its CLI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.paths import default_cache_dir
from generator.release.workflow import default_workflow_path
from tests.repo import REPO_ROOT
from tests.trees import PIN

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

PLATFORM = "linux-x86_64"
REF = PIN
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
COMPARISON = re.compile(r"^([\w.\-]+)\s*(==|!=)\s*'([^']*)'$")
APT_SETUP = re.compile(r"^sudo apt-get update && sudo apt-get install -y ((?:[\w.+\-]+ ?)+)$")


class Context:
    """The expression contexts a step sees: inputs, matrix, github, steps."""

    def __init__(self, matrix: dict[str, Any]) -> None:
        self.values: dict[str, Any] = {
            "inputs": {"ref": REF, "publish": False},
            "matrix": matrix,
            "github": {
                "server_url": "https://github.com",
                "repository": "llama-bindgen/llama-bindgen",
                "run_id": "1",
            },
            "steps": {},
        }

    def lookup(self, dotted: str) -> Any:
        value: Any = self.values
        for part in dotted.split("."):
            assert isinstance(value, dict) and part in value, f"the replay cannot resolve {dotted}"
            value = value[part]
        return value

    def text(self, template: str) -> str:
        def one(match: re.Match[str]) -> str:
            value = self.lookup(match.group(1))
            return str(value).lower() if isinstance(value, bool) else str(value)

        return EXPRESSION.sub(one, template)

    def condition(self, expression: str | None, failed: bool) -> bool:
        """A step's ``if:`` (GitHub's default is ``success()``)."""
        if expression is None:
            return not failed
        inner = EXPRESSION.sub(lambda m: m.group(1), expression).strip()
        parts = [part.strip() for part in inner.split("&&")]
        always = "always()" in parts  # no status function: GitHub adds success()
        return all(self._holds(p, expression) for p in parts if p != "always()") and (
            always or not failed
        )

    def _holds(self, comparison: str, expression: str) -> bool:
        match = COMPARISON.match(comparison)
        assert match, f"the replay does not understand the condition {expression!r}"
        equal = str(self.lookup(match.group(1))) == match.group(3)
        return equal if match.group(2) == "==" else not equal


def _copy_checkout(dest: Path) -> None:
    """Tracked and untracked-but-not-ignored files: what a push of this working tree holds."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = REPO_ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def _prepare_nox_env(clone: Path, session: str) -> None:
    """The session's virtualenv, made as nox makes it, seeing this interpreter's packages."""
    venv = clone / ".nox" / session
    subprocess.run([sys.executable, "-m", "virtualenv", "-q", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "replay-parent-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")


def _sessions_used(steps: list[dict[str, Any]]) -> list[str]:
    return sorted({m for s in steps for m in re.findall(r"nox -s (\w+)", s.get("run", ""))})


def _runner_folders(tmp_path: Path, ctx: Context) -> dict[str, str]:
    """``RUNNER_TEMP`` (this machine's cache linked in it) and an empty ``GITHUB_ENV`` file."""
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    (temp / "llama-bindgen-cache").symlink_to(default_cache_dir(), target_is_directory=True)
    ctx.values["runner"] = {"temp": str(temp)}
    github_env = tmp_path / "github-env"
    github_env.write_text("")
    return {"RUNNER_TEMP": str(temp), "GITHUB_ENV": str(github_env)}


def _written_env(github_env: Path) -> dict[str, str]:
    """The ``KEY=VALUE`` lines a step wrote to ``$GITHUB_ENV`` (the file is emptied)."""
    lines = github_env.read_text().splitlines()
    github_env.write_text("")
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _setup_step(env: dict[str, str]) -> tuple[bool, str]:
    match = APT_SETUP.match(env["SETUP"])
    assert match, f"the replay expects an apt-get setup on a Linux runner: {env['SETUP']!r}"
    missing = []
    for package in match.group(1).split():
        proc = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True
        )
        if "install ok installed" not in proc.stdout:
            missing.append(package)
    return not missing, f"not installed here: {' '.join(missing)}" if missing else ""


def _job_and_entry(backend: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    workflow = yaml.safe_load(default_workflow_path().read_text(encoding="utf-8"))
    job = workflow["jobs"]["build"]
    entries = [
        e
        for e in job["strategy"]["matrix"]["include"]
        if e["platform"] == PLATFORM and e["backend"] == backend
    ]
    assert len(entries) == 1, f"one {PLATFORM}/{backend} job in the workflow, found {entries}"
    return workflow, job, entries[0]


@pytest.mark.parametrize("backend", ["cpu", "vulkan"])
def test_a_linux_x86_64_job_runs_here(backend: str, tmp_path: Path) -> None:
    """The Vulkan job stays experimental: here it builds against Debian 13's headers, on the
    runner against Ubuntu's; the commands, paths and records are the same and proven here."""
    workflow, job, entry = _job_and_entry(backend)
    if backend == "cpu":
        assert not entry["experimental"], "the job the replay proves is not marked experimental"
    ctx = Context(entry)
    clone = tmp_path / "checkout"
    _copy_checkout(clone)
    for session in _sessions_used(job["steps"]):
        _prepare_nox_env(clone, session)

    base_env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0", "CI": "true"}
    base_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{base_env['PATH']}"
    base_env.update(_runner_folders(tmp_path, ctx))
    base_env.pop("VIRTUAL_ENV", None)
    for scope in (workflow.get("env", {}), job.get("env", {})):
        base_env.update({k: ctx.text(str(v)) for k, v in scope.items()})
    assert base_env["PLATFORM"] == PLATFORM and base_env["LLAMA_BINDGEN_REF"] == REF

    log: list[str] = []
    failed = False
    ran: list[str] = []
    for index, step in enumerate(job["steps"]):
        name = step.get("name") or step.get("uses") or f"step {index}"
        if not ctx.condition(step.get("if"), failed):
            outcome = "skipped"
        else:
            env = {**base_env, **{k: ctx.text(str(v)) for k, v in step.get("env", {}).items()}}
            ok, detail = _run_step(step, env, clone, ctx)
            base_env.update(_written_env(Path(base_env["GITHUB_ENV"])))
            outcome = "success" if ok else "failure"
            failed = failed or not ok
            ran.append(name)
            log.append(f"== {name}: {outcome}\n{detail[-4000:]}")
        if "id" in step:
            ctx.values["steps"][step["id"]] = {"outcome": outcome, "conclusion": outcome}
    assert not failed, "\n".join(log)

    # Every step ran (the setup one included) but the not-gated wheel's, which only the CUDA job
    # makes, and the job left what the release job gathers.
    wheel_steps = [s for s in job["steps"] if "matrix.wheel" in str(s.get("if", ""))]
    expected = len(job["steps"]) - (len(wheel_steps) if entry["wheel"] == "none" else 0)
    assert len(wheel_steps) == 2 and len(ran) == expected, "\n".join(log)
    folder = clone / "native-out" / entry["key"]
    assert entry["key"] == (PLATFORM if backend == "cpu" else f"{PLATFORM}-{backend}")
    record = json.loads((folder / "gates.json").read_text(encoding="utf-8"))
    assert record["platform"] == PLATFORM and record["backend"] == backend
    assert set(record["gates"].values()) == {"passed"}, record
    sums = (folder / "SHA256SUMS").read_text(encoding="utf-8")
    assert "lib/libllama_mtp.so" in sums and "gates.json" in sums


def _run_step(
    step: dict[str, Any], env: dict[str, str], clone: Path, ctx: Context
) -> tuple[bool, str]:
    uses = step.get("uses")
    if uses is not None:
        action = uses.split("@", 1)[0]
        if action == "actions/checkout":
            return (clone / "pyproject.toml").is_file(), "a copy of this checkout"
        if action == "actions/setup-python":
            want = str(step["with"]["python-version"])
            have = f"{sys.version_info.major}.{sys.version_info.minor}"
            return have == want, f"python {have} (the step asks for {want})"
        if action == "actions/cache":
            path = Path(ctx.text(step["with"]["path"]))
            inside = path.is_relative_to(Path(env["LLAMA_BINDGEN_CACHE"]))
            return inside, f"{path}: in the job's cache folder, this machine's cache"
        if action == "actions/upload-artifact":
            path = clone / ctx.text(step["with"]["path"])
            files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else []
            return bool(files), f"{len(files)} files under {path}"
        pytest.fail(f"the replay does not know the action {uses}")
    script = ctx.text(step["run"])
    if script.strip() == 'eval "$SETUP"':
        return _setup_step(env)
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=clone, env=env, capture_output=True, text=True, timeout=3000,
    )  # fmt: skip
    return proc.returncode == 0, f"$ {script}\nexit {proc.returncode}\n{proc.stdout}{proc.stderr}"
