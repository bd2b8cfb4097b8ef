"""Whether a llama.cpp tree's RPC backend (libggml-rpc, ``ggml-rpc.h``) is bound: the one rule,
and the RPC protocol version the bound header states.

The rule: ggml's include folder holds ``ggml-rpc.h``, ggml's CMake project installs it (its
``GGML_PUBLIC_HEADERS`` names it, so a build's include/ has it for the C probes) and the tree has
the backend's sources (``ggml/src/ggml-rpc``, which ``GGML_RPC=ON`` builds into libggml-rpc;
every platform's builds turn it on, ``platforms.BASE_CMAKE_OPTIONS``). The parse includes the
header exactly when the rule holds (``parse.options``); when it does not, the reason is recorded
in the IR (``Interface.absent_libraries``) and shown in GENERATION_REPORT.md, as for libmtmd.

The functions are their own library (``ggml_rpc``, ``libs.ggml_rpc`` in the bindings), not
ggml's: they live in their own file, and unlike ggml's headers (which declare functions no build
defines) every one of them is held to being exported.
"""

from __future__ import annotations

from pathlib import Path

from generator.ir.interface import Interface
from generator.sources.cmake_list import listed_files

LIBRARY = "ggml_rpc"  # the IR's and the bindings' name (libs.ggml_rpc)
STEM = "ggml-rpc"  # the library file's stem: libggml-rpc.so, ggml-rpc.dll, libggml-rpc.dylib
HEADER = "ggml-rpc.h"
INCLUDE = "ggml/include"  # the header's folder, relative to the tree's root
SOURCES = "ggml/src/ggml-rpc"
CMAKE_LIST = "GGML_PUBLIC_HEADERS"  # in ggml/CMakeLists.txt: the headers ggml installs
# the header's macros that make the protocol version, in order
VERSION_MACROS = ("RPC_PROTO_MAJOR_VERSION", "RPC_PROTO_MINOR_VERSION", "RPC_PROTO_PATCH_VERSION")


def header(root: Path) -> tuple[Path | None, str | None]:
    """The RPC header of the tree at ``root`` the bindings parse, and None; or None and the
    reason libggml-rpc is not bound."""
    path = root / INCLUDE / HEADER
    if not path.is_file():
        return None, f"the tree has no {INCLUDE}/{HEADER} (it predates ggml's RPC backend)"
    if not (root / SOURCES / "CMakeLists.txt").is_file():
        return None, f"the tree has {HEADER} but no {SOURCES}/CMakeLists.txt to build it from"
    listed = listed_files(root / "ggml" / "CMakeLists.txt", CMAKE_LIST)
    if listed is None or HEADER not in listed:
        why = f"ggml/CMakeLists.txt's {CMAKE_LIST} does not name {HEADER}: no build installs it"
        return None, why
    return path, None


def protocol_version(api: Interface) -> str:
    """The RPC protocol version (``major.minor.patch``) the bound ``ggml-rpc.h`` defines; ``""``
    when the bindings carry no RPC or the header states no version."""
    if not api.has_library(LIBRARY):
        return ""
    parts = [api.constant(name) for name in VERSION_MACROS]
    if any(part is None for part in parts):
        return ""
    return ".".join(str(part.value) for part in parts if part is not None)
