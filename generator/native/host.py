"""What this machine uses for a platform: the toolchain that builds its code and the way its
programs run. The registry (``generator.platforms``) only describes both; what they need on
disk is made here, when a build or a run asks: zig's wrapper scripts, wine's prefix folder."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import os
import shlex
import sys

from generator.paths import default_cache_dir
from generator.platforms import Execution, Platform, Toolchain, host_platform_name
from generator.templating import environment


def host_toolchain(plat: Platform) -> Toolchain:
    """The toolchain that builds ``plat`` on this machine (zig's wrapper scripts written)."""
    toolchain = plat.toolchain_for(host_platform_name())
    return zig_toolchain(toolchain) if toolchain.zig_target else toolchain


def zig_toolchain(toolchain: Toolchain) -> Toolchain:
    """``toolchain`` with its compilers, ar and ranlib pointing at wrapper scripts that run this
    interpreter's ziglang, written under the cache (``zig/<target>/``). Unchanged when ziglang
    is not installed: ``missing_tools()`` then says so."""
    if importlib.util.find_spec("ziglang") is None:
        return toolchain
    template = environment().get_template("native/zig-wrapper.sh.j2")
    folder = default_cache_dir() / "zig" / toolchain.zig_target
    folder.mkdir(parents=True, exist_ok=True)
    paths: dict[str, str] = {}
    for tool in ("cc", "c++", "ar", "ranlib"):
        target_args = f"-target {toolchain.zig_target}" if tool in ("cc", "c++") else ""
        text = template.render(
            tool=tool, target=toolchain.zig_target, target_args=target_args,
            python=shlex.quote(sys.executable), version=importlib.metadata.version("ziglang"),
        )  # fmt: skip
        path = folder / f"zig-{tool}"
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            # by rename: a build running with the old script never reads half of the new one
            fresh = path.with_name(f".{path.name}.{os.getpid()}")
            fresh.write_text(text, encoding="utf-8")
            fresh.chmod(0o755)
            fresh.replace(path)
        paths[tool] = str(path)
    return dataclasses.replace(
        toolchain, c_compiler=paths["cc"], cxx_compiler=paths["c++"], archiver=paths["ar"],
        ranlib=paths["ranlib"],
    )  # fmt: skip


def execution_here(plat: Platform) -> Execution:
    """How this machine runs ``plat``'s programs (raises ``CannotRunError``); the folder a wine
    prefix lives in is made (wine makes the prefix itself, but not its parent)."""
    execution = plat.execution(host_platform_name())
    prefix = execution.env.get("WINEPREFIX")
    if prefix:
        os.makedirs(os.path.dirname(prefix), exist_ok=True)
    return execution
