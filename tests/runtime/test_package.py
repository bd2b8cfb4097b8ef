"""The runtime is a package of modules, one job each; what was importable from
``llama_bindings.runtime`` when it was one module still is (six private names from the modules
that load later, from those), and importing it loads no library, no ``enums`` and not the decode
loops (they come with the first generation)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from tests.runtime.conftest import BINDINGS_PARENT

# The runtime's API, and the names it re-exports from the bindings' other modules.
PUBLIC = (
    "Cancellation",
    "ChatDelta",
    "ChatMessage",
    "ChatMessages",
    "ChatOptions",
    "ChatResult",
    "ChatStream",
    "ChatTemplateError",
    "ChatTemplates",
    "Context",
    "ControlVectorData",
    "Device",
    "FLASH_ATTN_CHOICES",
    "FinishReason",
    "GGML_LOG_LEVEL_CONT",
    "GGML_LOG_LEVEL_DEBUG",
    "GGML_LOG_LEVEL_ERROR",
    "GGML_LOG_LEVEL_INFO",
    "GGML_LOG_LEVEL_WARN",
    "GenerateOptions",
    "GenerationMetrics",
    "GenerationResult",
    "Grammar",
    "GrammarTrigger",
    "PromptReuse",
    "LLAMA_CPP_RELEASE",
    "LLAMA_CPP_TAG",
    "LLAMA_DEFAULT_SEED",
    "LLAMA_LOGGER",
    "LOAD_MTP_PARAM",
    "LOGGER",
    "Libraries",
    "LlamaChatParseError",
    "LlamaClosedError",
    "LlamaLoadError",
    "LlamaMediaError",
    "LlamaQueueFullError",
    "LlamaRpcError",
    "LlamaRpcHandshakeError",
    "LlamaRpcUnreachableError",
    "LlamaRpcVersionError",
    "LlamaRuntimeError",
    "LlamaSchemaError",
    "LlamaSlotBusyError",
    "LlamaStateError",
    "LlamaUnsupportedError",
    "LoraAdapter",
    "MTP_API",
    "MTP_DRAFT_CONTEXT",
    "MTP_STRATEGY_TYPES",
    "MediaInput",
    "MediaPrompt",
    "Model",
    "NEXTN_COUNT_FUNCTION",
    "NativeObject",
    "Projector",
    "RenderedChat",
    "RopeScaling",
    "SYMBOL_ERRORS",
    "Sampling",
    "SlotStats",
    "RequestTimes",
    "Slots",
    "SpeculativeDecoding",
    "SpeculativeMode",
    "Strategy",
    "StrategyMetrics",
    "Stream",
    "TAIL_TOKEN",
    "TextPiece",
    "TokenCallback",
    "TokenLogprob",
    "ToolCall",
    "ToolCallDelta",
    "apply_rope",
    "check_count",
    "check_flag",
    "check_top",
    "choose",
    "constants",
    "enum_name",
    "ggml_type",
    "json_schema_to_grammar",
    "list_devices",
    "load",
    "normalized",
    "requested_settings",
    "set_field",
    "set_llama_log",
    "strategy_support",
    "token_logprob",
    "wait_for_rpc_server",
)
# Private names of the one module: importable from their modules, no longer from the package.
PRIVATE = {
    "llama_log": ("LLAMA_LOG", "_LineJoiner", "_LlamaLog"),
    "results": ("role_content",),
    "sampling": ("_check", "_is_real"),
    "speculative": (
        "_MTP_FUNCTIONS", "_STRATEGY_FUNCTIONS", "_check_mix", "mtp_wrapper", "refused_statuses",
    ),
}  # fmt: skip
# A generation's request and bookkeeping (with the options, loaded with the runtime), and the
# names of the decode loops' module, which loads with the first generation: importable from them.
INTERNAL = {
    "generation": ("Plan", "Run", "plan_request", "sampling_of", "stop_sequences"),
}
LAZY = {
    "decoding": ("generate_plain", "generate_mtp", "running", "run_steps", "run_batch"),
}
MODULES = (
    "adapters",
    "chat_layer",
    "chat_request",
    "context",
    "decoding",
    "devices",
    "embeddings",
    "generation",
    "llama_log",
    "media",
    "model",
    "results",
    "sampling",
    "session",
    "slots",
    "speculative",
    "state",
)


def test_every_name_of_the_single_module_is_still_importable(runtime: Any) -> None:
    import importlib

    missing = [n for n in PUBLIC if not hasattr(runtime, n)]
    for module, names in {**PRIVATE, **INTERNAL, **LAZY}.items():
        found = importlib.import_module(f"llama_bindings.runtime.{module}")
        missing += [f"{module}.{n}" for n in names if not hasattr(found, n)]
    assert missing == []


def test_the_package_hands_out_no_private_name(runtime: Any) -> None:
    """Its re-exports are the public names: a private one lives in its module only."""
    assert [n for names in PRIVATE.values() for n in names if hasattr(runtime, n)] == []
    assert [n for n in vars(runtime) if n.startswith("_") and not n.startswith("__")] == []


def test_the_package_hands_out_no_standard_library_module(runtime: Any) -> None:
    """The one module's own imports (os, sys, typing names) were importable from it by
    accident; the package does not re-export them."""
    assert not any(hasattr(runtime, n) for n in ("os", "sys", "time", "Any", "cast", "dataclass"))


def test_a_star_import_gives_the_public_names_and_the_modules(runtime: Any) -> None:
    names: dict[str, Any] = {}
    exec("from llama_bindings.runtime import *", names)
    lazy = {"__builtins__", *LAZY}  # there once a generation imported them
    assert set(names) - lazy == {*PUBLIC, *MODULES, "annotations"} - lazy


def test_classes_say_where_they_live(runtime: Any) -> None:
    """Each class is defined in one module of the package, and the package hands out that one."""
    import importlib

    for name in ("Model", "Context", "Sampling", "SpeculativeDecoding", "GenerationResult"):
        cls = getattr(runtime, name)
        module = importlib.import_module(cls.__module__)
        assert cls.__module__.rpartition(".")[0] == "llama_bindings.runtime"
        assert getattr(module, name) is cls


def test_importing_the_runtime_loads_no_library_no_enums_and_no_decode_loop() -> None:
    code = (
        "import sys\n"
        "import llama_bindings.runtime as runtime\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('llama_bindings.runtime.'))\n"
        "print(' '.join(loaded))\n"
        "print('llama_bindings.enums' in sys.modules, runtime.LOGGER.name)\n"
        "maps = open('/proc/self/maps').read() if sys.platform == 'linux' else ''\n"
        "print('libllama' in maps or 'libggml' in maps)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=BINDINGS_PARENT, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    loaded, enums, native = proc.stdout.splitlines()
    eager = [f"llama_bindings.runtime.{m}" for m in MODULES if m not in LAZY]
    assert loaded.split() == eager
    assert enums == "False llama_bindings.runtime"
    assert native == "False"  # no library mapped into the process
