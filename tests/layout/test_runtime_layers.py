"""The runtime's imports go one way, down its layers, as tests/layout/test_import_layers.py holds
generator/'s: a module of ``generator/shipped/runtime/`` imports only modules of lower layers,
type-only imports (under ``if TYPE_CHECKING:``) and imports inside functions included, and
never one of its own layer. The one way up: a model's children name their parent's type."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.repo import REPO_ROOT

RUNTIME = REPO_ROOT / "generator" / "shipped" / "runtime"

# Lowest first. The contexts' parts are built on the model; what a context does with its
# session, sidecar and adapters (embeddings, a generation's request, saved state) on them; the
# decode loops on the request; the Context on everything, and the package on the Context.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("devices", "llama_log", "results"),
    ("adapters", "chat_layer", "media"),
    ("model",),
    ("sampling", "speculative"),
    ("session",),
    ("embeddings", "generation", "state"),
    ("chat_request", "decoding"),
    ("slots",),
    ("context",),
    ("__init__",),
)
LAYER_OF = {module: n for n, modules in enumerate(LAYERS) for module in modules}

# Type-only imports allowed up the layers, each with its reason: a LoRA adapter and a projector
# are loaded by their model (Model.load_lora, Model(mmproj=...)), which imports them, and each
# names its parent's type (its constructor takes the model; an adapter checks that it is set on
# a context of its own model).
PARENT_LINKS: dict[tuple[str, str], str] = {
    ("adapters", "model"): "LoraAdapter(model, path) and check_loras(model, ...): the parent",
    ("media", "model"): "Projector(model, path): the parent",
}


def _type_only_nodes(tree: ast.AST) -> set[int]:
    """The ids of the nodes inside ``if TYPE_CHECKING:`` blocks."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        ):
            inside.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return inside


def _runtime_targets(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The runtime modules an import statement names (relative or absolute)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif node.level == 1 and node.module is None:  # from . import x
        return [alias.name for alias in node.names]
    elif node.level == 1:
        return [node.module.split(".")[0]] if node.module else []
    elif node.level == 0 and node.module == "llama_bindings.runtime":
        names = [f"{node.module}.{alias.name}" for alias in node.names]
    elif node.level == 0 and node.module:
        names = [node.module]
    else:  # from .. import x: the bindings' other modules
        return []
    prefix = "llama_bindings.runtime."
    return [name.removeprefix(prefix).split(".")[0] for name in names if name.startswith(prefix)]


def imports_of(source: str) -> list[tuple[int, str, bool]]:
    """Each import of a runtime module in ``source``: its line, the module, whether type-only."""
    tree = ast.parse(source)
    type_only = _type_only_nodes(tree)
    return sorted(
        (node.lineno, target, id(node) in type_only)
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for target in _runtime_targets(node)
    )


def against_the_layers(module: str, source: str) -> list[str]:
    """The imports of ``source`` (runtime module ``module``) that go up or across the layers."""
    found = []
    for line, target, type_only in imports_of(source):
        if target == module or target not in LAYER_OF:
            continue
        if type_only and (module, target) in PARENT_LINKS:
            continue
        if LAYER_OF[target] >= LAYER_OF[module]:
            kind = "type-only import" if type_only else "import"
            found.append(f"runtime/{module}.py:{line}: {kind} of runtime.{target}")
    return found


def _modules() -> dict[str, Path]:
    return {path.stem: path for path in sorted(RUNTIME.glob("*.py"))}


def test_every_runtime_module_has_a_layer() -> None:
    modules = set(_modules())
    assert len(modules) >= 10, modules
    assert not modules - set(LAYER_OF), f"give these a layer in LAYERS: {modules - set(LAYER_OF)}"
    assert not set(LAYER_OF) - modules, f"gone from runtime/: {set(LAYER_OF) - modules}"


def test_runtime_imports_go_down_the_layers() -> None:
    upward = [
        finding
        for module, path in _modules().items()
        for finding in against_the_layers(module, path.read_text(encoding="utf-8"))
    ]
    assert not upward, "imports against the runtime's layers:\n" + "\n".join(upward)


def test_each_parent_link_is_still_used() -> None:
    """An exception nothing needs any more goes from PARENT_LINKS."""
    modules = _modules()
    for module, target in PARENT_LINKS:
        source = modules[module].read_text(encoding="utf-8")
        assert (module, target) in {(module, t) for _, t, only in imports_of(source) if only}
        assert LAYER_OF[target] > LAYER_OF[module], (module, target)


def test_the_check_finds_every_kind_of_import() -> None:
    """Type-only, function-level, absolute and ``from . import`` imports all count; a parent
    link is allowed only as a type-only import."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from .. import constants\n"
        "from .results import LOGGER\n"
        "if TYPE_CHECKING:\n"
        "    from .context import Context\n"
        "    from .model import Model\n"
        "def f() -> None:\n"
        "    from . import decoding\n"
        "    import llama_bindings.runtime.generation\n"
        "    from llama_bindings.runtime import session\n"
    )
    assert against_the_layers("media", source) == [
        "runtime/media.py:5: type-only import of runtime.context",
        "runtime/media.py:8: import of runtime.decoding",
        "runtime/media.py:9: import of runtime.generation",
        "runtime/media.py:10: import of runtime.session",
    ]
    assert against_the_layers("media", "from .model import Model\n") == [
        "runtime/media.py:1: import of runtime.model"
    ]
    assert against_the_layers("adapters", "from .media import Projector\n") == [
        "runtime/adapters.py:1: import of runtime.media"
    ]
