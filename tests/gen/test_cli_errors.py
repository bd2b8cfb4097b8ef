"""Bad inputs end in one line and exit status 2, never a traceback (and diff writes nothing
it was not asked to)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.repo import REPO_ROOT

PACKAGE = REPO_ROOT / "generated" / "llama_bindings"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "generator", *args],
        capture_output=True, text=True, cwd=cwd, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip


def _one_line_error(proc: subprocess.CompletedProcess[str], verb: str) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith(f"llama-bindgen {verb}: error: "), proc.stderr
    return errors[0]


def test_generate_from_a_missing_tree(tmp_path: Path) -> None:
    proc = _cli("generate", "--tree", "/nonexistent", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert "/nonexistent" in _one_line_error(proc, "generate")


@pytest.mark.needs_tree
def test_generate_for_an_unknown_target(tree_pin: Path, tmp_path: Path) -> None:
    proc = _cli("generate", "--tree", str(tree_pin), "--target", "bogus-triple",
                "--out", str(tmp_path / "o"), cwd=tmp_path)  # fmt: skip
    assert "bogus-triple" in _one_line_error(proc, "generate")
    assert not (tmp_path / "o").exists()


def test_diff_of_a_file_that_is_not_an_ir(tmp_path: Path) -> None:
    proc = _cli("diff", str(REPO_ROOT / "README.md"), str(PACKAGE), cwd=tmp_path)
    assert "README.md: not an ir.json" in _one_line_error(proc, "diff")


def test_diff_writes_only_what_is_asked(tmp_path: Path) -> None:
    ir = str(PACKAGE / "ir.json")
    proc = _cli("diff", ir, ir, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert list(tmp_path.iterdir()) == [], "diff wrote files nobody asked for"
    proc = _cli("diff", ir, ir, "--json", "r.json", cwd=tmp_path)
    assert proc.returncode == 0 and (tmp_path / "r.json").is_file(), proc.stderr


# One bad input (or more) per command: each ends in one line and exit status 2.
BAD_INPUTS: list[tuple[tuple[str, ...], str]] = [
    (("build", "--tree", "/nonexistent", "--platform", "linux-x86_64"), "/nonexistent"),
    (("build", "--tree", "{tree}", "--platform", "linux-x86_64", "--jobs", "0"), "--jobs"),
    (("build", "--tree", "{tree}", "--platform", "linux-x86_64", "--backend", "cuda",
      "--cuda-arch", "sm_89"), "--cuda-arch 'sm_89': expected CUDA architectures"),
    (("bump", "nosuchtag", "--no-github", "--repo", "{checkout}"), "no provider to try"),
    (("bump", "b11312", "--repo", "{tmp}/nowhere"), "not a llama-bindgen checkout"),
    (("cache", "--cache", "{file}"), "--cache {file}: not a folder"),
    (("diff", "{tmp}/missing.json", str(PACKAGE)), "no such file or folder"),
    (("doctor", "--platform", "linux-sparc"), "--platform linux-sparc: not a build key"),
    (("fetch", ""), "empty REF"),
    (("fetch", "b1", "--no-github", "--source", "{tmp}/nothing"), "no such file or folder"),
    (("fetch-model", "gemma3-1b"), "unknown model 'gemma3-1b': known models are gemma3-270m"),
    (("gates", "--tree", "{tree}", "--platform", "linux-x86_64", "--bindings", "{tmp}"),
     "abi_manifest.json not found"),
    (("generate", "--tree", "{tree}"), "needs a llama-bindgen checkout"),
    (("gpu-check", "run", "--kit", "{tmp}/none", "--out", "{tmp}/out"), "no gpu-check kit"),
    (("latest", "--upstream", "not-a-repo"), "is not OWNER/NAME"),
    (("latest", "--api-url", "http://127.0.0.1:9"), "GET /repos/ggml-org/llama.cpp/releases"),
    (("make-test-model", "{file}/model.gguf"), "{file}"),
    (("make-test-model", "{tmp}/d.gguf", "--kind", "dspark", "--chat-template", "x"),
     "the dspark draft carries no chat template"),
    (("matrix", "--output", "{file}/release.yml"), "{file}"),
    (("propose", "b1", "--github-repo", "o/r", "--gates", "{tmp}/none.json"), "--gates"),
    (("propose", "b1", "--github-repo", "o/r", "--gates", "{file}"), "not JSON"),
    (("release", "nosuch", "--repo", "{checkout}"), "has no entry"),
    (("wheel", "nosuch", "--platform", "macos-arm64", "--repo", "{checkout}"), "has no entry"),
    (("smoke", "--platform", "linux-x86_64", "--bindings", "{tmp}"),
     "abi_manifest.json not found"),
    (("smoke", "--platform", "linux-x86_64", "--model", "{tmp}/none.gguf"), "not found"),
    (("compat", "b9246", "main"), "not an upstream build tag (bN): main"),
    (("smoke", "--platform", "linux-x86_64", "--lib-dir", "{tmp}/none",
      "--bindings", str(REPO_ROOT / "generated")), "no such folder"),
]  # fmt: skip


@pytest.mark.needs_tree
@pytest.mark.parametrize(
    ("args", "expected"), BAD_INPUTS, ids=[" ".join(a)[:50] for a, _ in BAD_INPUTS]
)
def test_every_command_refuses_bad_input_in_one_line(
    args: tuple[str, ...], expected: str, tree_pin: Path, tmp_path: Path
) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "releases.toml").write_bytes((REPO_ROOT / "releases.toml").read_bytes())
    (tmp_path / "a-file").write_text("not a folder\n")
    values = {"tree": str(tree_pin), "checkout": str(checkout), "tmp": str(tmp_path),
              "file": str(tmp_path / "a-file")}  # fmt: skip
    work = tmp_path / "work"
    work.mkdir()
    proc = _cli(*(a.format(**values) for a in args), cwd=work)
    assert expected.format(**values) in _one_line_error(proc, args[0])
    assert list(work.iterdir()) == [], "a refused command left files behind"


def test_every_command_has_a_bad_input_case() -> None:
    from generator.cli import COMMAND_MODULES

    commands = {m.rsplit(".", 1)[1].replace("_", "-") for m in COMMAND_MODULES}
    assert commands == {args[0] for args, _ in BAD_INPUTS}


def test_a_bug_is_one_line_with_a_way_to_the_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from generator import cli

    def broken(args: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr("generator.commands.matrix.run", broken)
    monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)
    assert cli.main(["matrix", "--check"]) == cli.INTERNAL_EXIT
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "RuntimeError: boom" in err and cli.TRACEBACK_ENV in err
    monkeypatch.setenv(cli.TRACEBACK_ENV, "1")
    with pytest.raises(RuntimeError, match="boom"):
        cli.main(["matrix", "--check"])
