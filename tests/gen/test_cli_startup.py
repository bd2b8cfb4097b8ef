"""What a ``llama-bindgen`` run loads: only its own command, and templates compiled once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from generator import cli, templating
from generator.paths import CACHE_ENV
from tests.repo import REPO_ROOT


def _modules_after_parsing(argv: list[str]) -> set[str]:
    code = (
        "import json, sys\n"
        "from generator import cli\n"
        f"only = cli._chosen_command({argv!r})\n"
        f"parser = cli.build_parser(only)\n"
        f"if only is not None:\n"
        f"    parser.parse_known_args({argv!r})\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, check=True, capture_output=True, text=True
    ).stdout
    return set(json.loads(out))


def test_generate_does_not_import_other_commands_dependencies() -> None:
    loaded = _modules_after_parsing(["generate", "--tree", "x"])
    assert "generator.commands.generate" in loaded
    assert not {"requests", "gguf", "numpy", "generator.commands.fetch"} & loaded


def test_the_full_parser_lists_every_command() -> None:
    loaded = _modules_after_parsing(["--version"])
    assert set(cli.COMMAND_MODULES) <= loaded
    help_text = cli.build_parser().format_help()
    for name in (m.rsplit(".", 1)[1].replace("_", "-") for m in cli.COMMAND_MODULES):
        assert f"    {name} " in help_text or f"    {name}\n" in help_text


def test_chosen_command_is_the_first_word() -> None:
    assert cli._chosen_command(["make-test-model", "out.gguf"]) == (
        "generator.commands.make_test_model"
    )
    assert cli._chosen_command(["--version"]) is None
    assert cli._chosen_command(["no-such-command"]) is None


def test_template_bytecode_is_cached_and_an_unwritable_cache_is_ignored(tmp_path: Path) -> None:
    env = dict(os.environ, **{CACHE_ENV: str(tmp_path / "cache")})
    render_code = (
        "from generator.templating import environment\n"
        "environment().get_template('bindings/_ffi.py.j2')\n"
    )
    subprocess.run([sys.executable, "-c", render_code], cwd=REPO_ROOT, env=env, check=True)
    assert list((tmp_path / "cache" / templating.BYTECODE_FOLDER).glob("*.cache"))
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    env[CACHE_ENV] = str(blocker)
    done = subprocess.run(
        [sys.executable, "-c", render_code], cwd=REPO_ROOT, env=env, capture_output=True
    )
    assert done.returncode == 0, done.stderr
