"""generator/'s imports go one way, down the layers ARCHITECTURE.md draws."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.repo import REPO_ROOT

# A part imports only parts of lower layers (imports inside functions included), never one of its
# own layer: the parts of a layer are independent of each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "errors"),
    ("paths", "jsontext", "hashing", "symbols", "debs", "progress"),
    ("templating",),
    ("platforms", "releases", "testmodel", "testimage"),
    ("testvision", "testdrafts"),
    ("ir",),
    ("sources",),
    ("github_api", "models"),
    ("parse",),
    ("diff", "emit"),
    ("native",),
    ("verify", "smoke"),
    ("release", "tracking"),
    ("bump",),
    ("docs_site", "gpu_check"),
    ("commands",),
    ("cli",),
    ("__main__",),
)
LAYER_OF = {part: n for n, parts in enumerate(LAYERS) for part in parts}
GENERATOR = REPO_ROOT / "generator"


def _part(path: Path) -> str:
    return path.relative_to(GENERATOR).parts[0].removesuffix(".py")


def _imported_parts(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "generator":
                names = [f"generator.{alias.name}" for alias in node.names]
            else:
                names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "generator" and len(parts) > 1:
                found.add(parts[1] if parts[1] != "__version__" else "__init__")
    return found


def test_every_part_of_generator_has_a_layer() -> None:
    parts = {
        _part(p) for p in GENERATOR.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()
    }
    assert not parts - set(LAYER_OF), (
        f"give these a layer in LAYERS: {sorted(parts - set(LAYER_OF))}"
    )


def test_imports_go_down_the_layers() -> None:
    upward = []
    for path in sorted(GENERATOR.rglob("*.py")):
        source = _part(path)
        for target in sorted(_imported_parts(path) - {source}):
            if target in LAYER_OF and LAYER_OF[target] >= LAYER_OF[source]:
                upward.append(f"{path.relative_to(REPO_ROOT)} imports generator.{target}")
    assert not upward, "imports against the layers:\n" + "\n".join(upward)
