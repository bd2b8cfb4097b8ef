"""IR -> the vendorable ``llama_bindings`` package, through the templates in ``templates/``.

Emission never calls the parser. Files are rendered into a fresh folder beside the output and
swapped in only when every file rendered, so a failure leaves the old output as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator import __version__, jsontext
from generator.emit.abi_module import ABI_GUARD_CDEF, ABI_MODULE_FILE, abi_module_context
from generator.emit.cdef import Cdef, build_cdef, cdef_identity, declarations_text
from generator.emit.cross_abi import cross_abi_context
from generator.emit.enums import member_names
from generator.emit.manifest import build_manifest
from generator.emit.probes import expected_values
from generator.emit.pytypes import PythonTypes
from generator.emit.support import SupportCheck, Unsupported
from generator.emit.wrapper_contract import contract_context
from generator.ir import Interface
from generator.paths import shipped_dir
from generator.platforms import PLATFORMS
from generator.sources import rpc_api
from generator.sources.licenses import LLAMA_LICENSE
from generator.sources.mtmd_api import LIBRARY as MTMD_LIBRARY
from generator.sources.tree import WRAPPER_HEADER
from generator.templating import environment

PACKAGE_NAME = "llama_bindings"
LIB_DIR_ENV = "LLAMA_BINDGEN_LIB_DIR"
SKIP_ABI_CHECK_ENV = "LLAMA_BINDGEN_SKIP_ABI_CHECK"
CFFI_MODE_ENV = "LLAMA_BINDGEN_CFFI_MODE"
# The compiled cffi API-mode module ``llama-bindgen build`` puts beside the libraries.
API_MODULE = "_llama_bindings_api"
# What stands for a library's stem in ``_about.LIBRARY_FILE_NAMES`` (``str.format``'s field).
STEM_FIELD = "{stem}"
LIBRARY_CLASSES = (
    ("llama", "LlamaLibrary"),
    ("ggml", "GgmlLibrary"),
    ("llama_mtp", "LlamaMtpLibrary"),
    ("mtmd", "MtmdLibrary"),
    (rpc_api.LIBRARY, "GgmlRpcLibrary"),
)

# output file -> template
FILES: tuple[tuple[str, str], ...] = (
    ("__init__.py", "bindings/__init__.py.j2"),
    ("_about.py", "bindings/_about.py.j2"),
    ("_abi_expected.py", "bindings/_abi_expected.py.j2"),
    ("_ffi.py", "bindings/_ffi.py.j2"),
    ("abi_manifest.json", "bindings/abi_manifest.json.j2"),
    ("api.pyi", "bindings/api.pyi.j2"),
    ("cdef.h", "bindings/cdef.h.j2"),
    ("constants.py", "bindings/constants.py.j2"),
    ("CROSS_ABI.md", "report/cross_abi.md.j2"),
    ("enums.py", "bindings/enums.py.j2"),
    ("GENERATION_REPORT.md", "report/generation.md.j2"),
    ("ir.json", "bindings/ir.json.j2"),
    ("py.typed", "bindings/py.typed.j2"),
    ("README.md", "bindings/README.md.j2"),
)


@dataclass(frozen=True)
class EmitResult:
    package_dir: Path
    files: tuple[str, ...]
    cdef: Cdef
    unsupported: tuple[Unsupported, ...]


def _json_text(data: Any) -> str:
    """The ABI manifest: targets -> target -> structs/enums -> one layout per line."""
    return jsontext.dumps(data, depth=4)


def _deprecation(message: str | None) -> str:
    if message is None:
        return ""
    return f"Deprecated: {message}." if message else "Deprecated."


def mtp_api_facts(api: Interface) -> dict[str, bool]:
    """What the runtime's MTP path needs to know of llama.h. ``runtime_mtp``: the tree has the MTP
    API (``sources.mtp_api``'s rule, which decided that the parse includes the wrapper header;
    every tag since MTP landed). Two parts
    came later and are checked for: ``load_mtp_param`` (``llama_model_params.load_mtp``; before
    it, llama.cpp always loads a model's NextN layers) and ``nextn_count_function``
    (``llama_model_n_layer_nextn``; before it, the count is the GGUF key
    ``<arch>.nextn_predict_layers``)."""
    fields = {(r.name, f.name) for r in api.records for f in r.fields}
    return {
        "runtime_mtp": WRAPPER_HEADER in api.headers,
        "load_mtp_param": ("llama_model_params", "load_mtp") in fields,
        "nextn_count_function": any(f.name == "llama_model_n_layer_nextn" for f in api.functions),
    }


def _optional_library(api: Interface, library: str, without: str) -> tuple[bool, str]:
    """Whether the bindings carry an optional library (its rule decided that the parse includes
    its headers) and, when they do not, why (``without`` when the IR records no reason)."""
    has = api.has_library(library)
    absent = "" if has else dict(api.absent_libraries).get(library, "") or without
    return has, absent


def mtmd_facts(api: Interface) -> dict[str, Any]:
    """Whether the bindings carry libmtmd (``sources.mtmd_api``'s rule) and, when they do not,
    why: the loader's error names it."""
    has_mtmd, absent = _optional_library(
        api, MTMD_LIBRARY, "these bindings were generated without libmtmd's headers"
    )
    return {
        "has_mtmd": has_mtmd,
        "mtmd_absent": _string_literal(absent),
        "mtmd_absent_text": absent,
        "absent_libraries": api.absent_libraries,
    }


def rpc_facts(api: Interface) -> dict[str, Any]:
    """Whether the bindings carry libggml-rpc (``sources.rpc_api``'s rule), why not, and the RPC
    protocol version its header defines ("" without one)."""
    has_rpc, absent = _optional_library(
        api, rpc_api.LIBRARY, f"these bindings were generated without {rpc_api.HEADER}"
    )
    return {
        "has_rpc": has_rpc,
        "rpc_absent": _string_literal(absent),
        "rpc_absent_text": absent,
        "rpc_protocol": rpc_api.protocol_version(api),
    }


def _string_literal(text: str) -> str:
    """``text`` as a Python string literal that keeps generated lines short (in parentheses,
    split between words)."""
    if len(text) <= 60:
        return json.dumps(text)
    parts = [json.dumps(line) for line in textwrap.wrap(text, 80, drop_whitespace=False)]
    return "(\n" + "".join(f"    {part}\n" for part in parts) + ")"


def _python_tuple(items: tuple[str, ...] | list[str]) -> str:
    quoted = [json.dumps(item) for item in items]
    return f"({quoted[0]},)" if len(quoted) == 1 else f"({', '.join(quoted)})"


def runtime_platform_tables() -> dict[str, dict[Any, tuple[str, ...]]]:
    """What the bindings' loader and guard read of the platform registry on the running machine
    (``_about.py``): the names a library's file may have per ``sys.platform`` ("{stem}" the
    library; "" any other system, named as the first ELF platform names them), and the IR
    triples per (``sys.platform``, machine)."""
    names: dict[str, tuple[str, ...]] = {}
    targets: dict[tuple[str, str], tuple[str, ...]] = {}
    for plat in PLATFORMS.values():
        known = names.get(plat.python_platform, ())
        own = plat.library_file_names(STEM_FIELD)
        names[plat.python_platform] = (*known, *(n for n in own if n not in known))
        targets[(plat.python_platform, plat.python_machine)] = plat.triples
    elf = next(p for p in PLATFORMS.values() if p.binary_format == "elf")
    names[""] = elf.library_file_names(STEM_FIELD)
    return {"library_file_names": names, "runtime_targets": targets}


def _runtime_context() -> dict[str, Any]:
    tables = runtime_platform_tables()
    return {key: {k: _python_tuple(v) for k, v in table.items()} for key, table in tables.items()}


def _guard_layouts(api: Interface) -> dict[str, Any]:
    """The guard's layouts per target; targets that lay everything out alike share one table."""
    tables: list[dict[str, int]] = []
    table_of: dict[str, int] = {}
    for target in api.targets:
        values = expected_values(api, target)
        if values not in tables:
            tables.append(values)
        table_of[target] = tables.index(values)
    return {"guard_tables": tables, "guard_table_of": table_of}


def _abi_context(api: Interface, bound: set[str]) -> dict[str, Any]:
    """The ABI manifest; what the load-time guard compares, taken from the same IR ahead of time
    (``_abi_expected.py``: layouts per target keyed as the ABI identity library keys them, and
    the bound functions per library); the names the pre-parsed ``ffi`` module needs."""
    manifest = build_manifest(api, bound)
    functions: dict[str, list[str]] = {}
    for function in manifest["functions"]:
        if function["bound"]:
            functions.setdefault(function["library"], []).append(function["name"])
    guard = _guard_layouts(api)
    compared = {
        "commit": api.source.commit,
        "layouts": {t: guard["guard_tables"][i] for t, i in guard["guard_table_of"].items()},
        "functions": functions,
    }
    return {
        "manifest_json": _json_text(manifest),
        **guard,
        "guard_functions": dict(sorted(functions.items())),
        "guard_identity": hashlib.sha256(_json_text(compared).encode()).hexdigest(),
        "abi_guard_cdef": ABI_GUARD_CDEF,
        "abi_module": ABI_MODULE_FILE.removesuffix(".py"),
    }


def _counts(api: Interface, cdef: Cdef) -> dict[str, int]:
    """What the report and the package README count."""
    return {
        "functions": len(cdef.bound_functions),
        "mtmd_functions": sum(1 for f in cdef.bound_functions if f.library == MTMD_LIBRARY),
        "rpc_functions": sum(1 for f in cdef.bound_functions if f.library == rpc_api.LIBRARY),
        "records": sum(1 for r in cdef.bound_records if not r.opaque),
        "opaque": sum(1 for r in cdef.bound_records if r.opaque),
        "enums": len(api.enums),
        "typedefs": len(cdef.bound_typedefs),
        "constants": len(api.constants),
    }


def build_context(api: Interface) -> tuple[dict[str, Any], Cdef]:
    cdef = build_cdef(api)
    check = SupportCheck(api)
    struct_classes = {r.name for r in cdef.bound_records}
    function_names = {f.name for f in cdef.bound_functions}
    aliases = {name: f"_struct_{name}" for name in sorted(struct_classes & function_names)}
    pytypes = PythonTypes(check, struct_classes, aliases)
    records = [
        {
            "name": r.name,
            "c_name": r.c_name,
            "header": r.header,
            "doc": r.doc,
            "opaque": r.opaque,
            "attributes": pytypes.record_attributes(r),
        }
        for r in cdef.bound_records
    ]
    libraries = []
    for library, class_name in LIBRARY_CLASSES:
        functions = [
            {
                "name": f.name,
                "signature": f.signature(),
                "header": f.header,
                "doc": f.doc,
                "deprecation": _deprecation(f.deprecated),
                "params": pytypes.parameters(f),
                "result": pytypes.value(f.result),
            }
            for f in cdef.bound_functions
            if f.library == library
        ]
        libraries.append({"name": library, "class_name": class_name, "functions": functions})
    enums = [
        {
            "name": e.name,
            "c_name": e.c_name,
            "header": e.header,
            "doc": e.doc,
            "members": member_names(e),
        }
        for e in api.enums
    ]
    bound = {f.name for f in cdef.bound_functions}
    context: dict[str, Any] = {
        "generator_version": __version__,
        "tag": api.source.tag,
        "commit": api.source.commit,
        "digest": api.source.digest,
        "has_wrapper": api.has_library("llama_mtp"),
        **mtmd_facts(api),
        **rpc_facts(api),
        **mtp_api_facts(api),
        "lib_dir_env": LIB_DIR_ENV,
        "skip_env": SKIP_ABI_CHECK_ENV,
        "cdef": cdef,
        "cdef_identity": cdef_identity(cdef),
        "api_module": API_MODULE,
        "cffi_mode_env": CFFI_MODE_ENV,
        "records": records,
        "libraries": libraries,
        "aliases": [(alias, name) for name, alias in sorted(aliases.items())],
        "enums": enums,
        "constants": api.constants,
        **contract_context(api),
        "targets": api.targets,
        "unsupported": cdef.unsupported,
        "skipped_macros": api.skipped_macros,
        "failed_targets": api.failed_targets,
        "counts": _counts(api, cdef),
        **_abi_context(api, bound),
        "ir_json": api.dumps().rstrip("\n"),
        **cross_abi_context(api),
        **_runtime_context(),
    }
    return context, cdef


# Hand-written modules (generator/shipped/) copied into the package below the generated header,
# by their paths there (``/``-separated; ``runtime/`` is a subpackage).
SHIPPED = (
    "__main__.py",
    "abi_guard.py",
    "errors.py",
    "lifetimes.py",
    "loader.py",
    "openai_format.py",
    "outputs.py",
    "params.py",
    "rpc_protocol.py",
    "rpc_worker.py",
    "runtime/__init__.py",
    "runtime/adapters.py",
    "runtime/chat_layer.py",
    "runtime/chat_request.py",
    "runtime/context.py",
    "runtime/decoding.py",
    "runtime/devices.py",
    "runtime/embeddings.py",
    "runtime/generation.py",
    "runtime/llama_log.py",
    "runtime/media.py",
    "runtime/model.py",
    "runtime/results.py",
    "runtime/sampling.py",
    "runtime/session.py",
    "runtime/slots.py",
    "runtime/speculative.py",
    "runtime/state.py",
    "server/__init__.py",
    "server/app.py",
    "server/cli.py",
    "server/config.py",
    "server/metrics.py",
    "server/requests.py",
    "server/served.py",
    "verified_files.py",
)


def render_files(api: Interface) -> tuple[dict[str, str], Cdef]:
    context, cdef = build_context(api)
    env = environment()
    rendered = {name: env.get_template(template).render(context) for name, template in FILES}
    # cffi's out-of-line ABI module: the declarations parsed now, not at every import
    module_name = f"{PACKAGE_NAME}.{context['abi_module']}"
    abi_module = abi_module_context(module_name, declarations_text(cdef))
    rendered[ABI_MODULE_FILE] = env.get_template("bindings/_ffi_abi.py.j2").render(
        context, **abi_module
    )
    shipped = env.get_template("bindings/shipped.py.j2")
    for name in SHIPPED:
        source = (shipped_dir() / name).read_text(encoding="utf-8")
        rendered[name] = shipped.render(context, source=source.rstrip("\n"))
    return rendered, cdef


def emit_package(api: Interface, out_dir: Path, *, llama_license: bytes | None) -> EmitResult:
    """Write ``out_dir/llama_bindings/`` (replacing it whole) and return what was written.
    ``llama_license``: the tree's LICENSE, shipped beside the doc comments taken from llama.h;
    None for a tree without one (a lean PyPI sdist's): the package then has no
    ``LICENSE-llama.cpp``, and ``release`` refuses to ship it."""
    rendered, cdef = render_files(api)
    package_dir = out_dir / PACKAGE_NAME
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{PACKAGE_NAME}-", dir=out_dir))
    staging.chmod(0o755)
    try:
        for name, text in sorted(rendered.items()):
            path = staging / name
            if not path.parent.is_dir():  # a subpackage's folder (runtime/)
                path.parent.mkdir(parents=True)
                path.parent.chmod(0o755)
            path.write_text(text, encoding="utf-8", newline="\n")
        if llama_license is not None:
            (staging / LLAMA_LICENSE).write_bytes(llama_license)
        # keep prebuilt native libraries a user dropped into lib/
        if (package_dir / "lib").is_dir():
            os.replace(package_dir / "lib", staging / "lib")
        if package_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{PACKAGE_NAME}-old-", dir=out_dir))
            os.replace(package_dir, old / PACKAGE_NAME)
            os.replace(staging, package_dir)
            shutil.rmtree(old)
        else:
            os.replace(staging, package_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    files = tuple(sorted([*rendered, *([LLAMA_LICENSE] if llama_license is not None else [])]))
    return EmitResult(package_dir, files, cdef, tuple(cdef.unsupported))
