"""Python code that imports the generated bindings, run in a process of its own (so that what it
loads is its own and a crash shows as a crash); its last stdout line is a JSON object."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path


def run_json(code: str, package_parent: Path, *args: str, **env: str) -> dict[str, object]:
    """Run ``code`` with ``package_parent`` on ``PYTHONPATH`` (and as its working folder),
    ``args`` as ``sys.argv[1:]`` and ``env`` added to the environment; its last JSON line."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=package_parent,
        env={**os.environ, "PYTHONPATH": str(package_parent), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result
