"""Whether a llama.cpp tree's multimodal library (libmtmd) is bound, and from which headers: the
one rule.

The rule is data, ``native_wrapper/mtmd_rule.txt``: the folder of libmtmd's public headers, the
headers (in include order) and the CMake list of the tree that must name exactly them. The parse
includes those headers exactly when the rule holds (``parse.options``), emit's ``MTMD_API`` is
whether it did, and the loader follows; when it does not hold, the reason is recorded in the IR
(``Interface.absent_libraries``) and shown in GENERATION_REPORT.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from generator.paths import wrapper_dir
from generator.sources.cmake_list import listed_files

RULE_FILE = "mtmd_rule.txt"
LIBRARY = "mtmd"


@dataclass(frozen=True)
class MtmdRule:
    folder: str  # relative to the tree's root
    cmake_list: str  # the variable of the folder's CMakeLists.txt that lists the public headers
    headers: tuple[str, ...]  # in include order


def rule(path: Path | None = None) -> MtmdRule:
    """The rule file's values."""
    source = path or wrapper_dir() / RULE_FILE
    values: dict[str, list[str]] = {}
    for line in source.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        key, value = (part.strip() for part in line.split("|"))
        values.setdefault(key, []).append(value)
    return MtmdRule(values["folder"][0], values["cmake_list"][0], tuple(values["header"]))


def headers(root: Path) -> tuple[tuple[Path, ...], str | None]:
    """The mtmd headers of the tree at ``root`` the bindings parse, and None; or no headers and
    the reason mtmd is not bound."""
    need = rule()
    folder = root / need.folder
    if not folder.is_dir():
        return (), f"the tree has no {need.folder} (it predates libmtmd)"
    missing = [name for name in need.headers if not (folder / name).is_file()]
    if missing:
        return (), f"{need.folder} has no {', '.join(missing)}"
    listed = listed_files(folder / "CMakeLists.txt", need.cmake_list)
    if listed is None:
        return (), (
            f"{need.folder}/CMakeLists.txt sets no {need.cmake_list}: the tree's public mtmd "
            "headers are unknown"
        )
    if sorted(listed) != sorted(need.headers):
        return (), (
            f"the tree's public mtmd headers ({need.cmake_list}: {', '.join(listed)}) are not "
            f"the rule's ({', '.join(need.headers)}): {RULE_FILE} needs updating"
        )
    return tuple(folder / name for name in need.headers), None


def include_dir(root: Path) -> Path:
    """The folder of the tree's mtmd headers (what a C probe of them needs)."""
    return root / rule().folder
