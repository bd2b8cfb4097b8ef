"""Entry points of the front end: parse a tree per target into an IR ``Interface``.

Only ``generator.parse.clang_api`` imports ``clang.cindex``.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from generator.errors import BindgenError, UsageError
from generator.ir.constant import Constant
from generator.ir.interface import Interface, SkippedMacro, Source
from generator.ir.record import RecordLayout
from generator.parse import declarations, probes
from generator.parse.clang_api import TranslationUnit, diagnostics, parse
from generator.parse.options import ENTRY_NAME, ParseOptions, freestanding_dir
from generator.paths import wrapper_dir
from generator.platforms import DEFAULT_TARGETS, HOST_TARGET
from generator.releases import commit_label
from generator.sources.tree import WRAPPER_HEADER, Tree, mtp_api_missing_reason
from generator.sources.tree_metadata import TREE_METADATA, load_tree_metadata

if TYPE_CHECKING:
    from concurrent.futures import Future

_T = TypeVar("_T")

__all__ = [
    "DEFAULT_TARGETS",
    "HOST_TARGET",
    "TREE_METADATA",
    "ClangParseError",
    "ParseOptions",
    "default_wrapper_header",
    "parse_interface",
    "parse_tree",
    "tree_source",
]


class ClangParseError(BindgenError):
    """clang reported errors: the headers (or the compile options) are broken."""

    def __init__(self, target: str, errors: list[str]) -> None:
        shown = "\n  ".join(errors[:20])
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        hint = ""
        if any("file not found" in error for error in errors):
            bundled = ", ".join(sorted(p.name for p in freestanding_dir().glob("*.h")))
            hint = (
                "\n(a header not found: the parse sees the tree's headers and a small bundled "
                f"set of standard ones, {bundled}, in {freestanding_dir()}; a standard header "
                "missing there needs a minimal one added, with the types the headers use)"
            )
        super().__init__(f"clang errors parsing for {target}:\n  {shown}{more}{hint}")
        self.errors = errors


class _Background(Generic[_T]):
    """``function(*args)`` in a thread of its own; ``result()`` waits and returns or raises.
    (``concurrent.futures`` would do, but it imports ``logging``: milliseconds at each start
    of a one-target ``generate``, which needs no pool.)"""

    def __init__(self, function: Callable[..., _T], *args: object) -> None:
        self._value: list[_T] = []  # a box: the function may return None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(function, args), daemon=True)
        self._thread.start()

    def _run(self, function: Callable[..., _T], args: tuple[object, ...]) -> None:
        try:
            self._value.append(function(*args))
        except BaseException as exc:  # handed to the thread that asks for the result
            self._error = exc

    def result(self) -> _T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value[0]


def _parse_target(options: ParseOptions, target: str) -> TranslationUnit:
    # only the host parse reads macros (the detailed record); the others give layouts
    detailed = target == HOST_TARGET
    tu = parse(ENTRY_NAME, options.entry_text(), options.clang_args(target), detailed=detailed)
    errors = [str(d) for d in diagnostics(tu) if d.is_error]
    if errors:
        raise ClangParseError(target, errors)
    return tu


def parse_interface(options: ParseOptions, source: Source, progress: bool = False) -> Interface:
    """Parse once per target: the host parse gives declarations, every parse gives layouts."""
    if not (options.llama_include / "llama.h").is_file():
        raise BindgenError(f"{options.tree} is not a llama.cpp tree (no include/llama.h)")
    if options.wrapper_header is not None and not options.wrapper_header.is_file():
        raise BindgenError(f"wrapper header not found: {options.wrapper_header}")
    targets = options.all_targets()
    # The other targets' parses run in libclang (which releases the GIL) while this thread walks
    # the host's declarations in Python; their layouts are read here afterwards, in order.
    others = [t for t in targets if t != HOST_TARGET]
    if not others:
        return _interface(options, source, targets, {}, progress)
    # only with other targets: concurrent.futures imports logging, milliseconds at each start
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) - 1)) as pool:
        pending = {t: pool.submit(_parse_target, options, t) for t in others}
        return _interface(options, source, targets, pending, progress)


def _file_names_only(error: str) -> str:
    """A clang error with each file's folders left out (what is written must not depend on where
    the tree lies)."""
    return re.sub(r"(?:[A-Za-z]:)?[/\\](?:[^\s:/\\]+[/\\])*([^\s:/\\]+:\d+)", r"\1", error)


def _target_layouts(
    targets: tuple[str, ...],
    pending: dict[str, Future[TranslationUnit]],
    host_layouts: declarations.TargetLayouts,
    found: declarations.Declarations,
    into: tuple[dict[str, dict[str, RecordLayout]], dict[str, dict[str, int]]],
    progress: bool,
) -> dict[str, str]:
    """Each target's record layouts and enum sizes, into ``into``; returns the targets whose
    parse failed, with clang's first errors (those get no layouts, the rest is bound)."""
    record_layouts, enum_sizes = into
    enum_names = set(found.enums)
    failed: dict[str, str] = {}
    for target in targets:
        if progress:
            print(f"parse: {target} (layouts)", file=sys.stderr)
        if target == HOST_TARGET:
            layouts = host_layouts
        else:
            try:
                tu = pending[target].result()
            except ClangParseError as exc:  # that target's layouts only: the rest is bound
                failed[target] = "; ".join(_file_names_only(e) for e in exc.errors[:3])
                print(
                    f"parse: {target} failed, no layouts for it: {failed[target]}", file=sys.stderr
                )
                continue
            layouts = declarations.collect_layouts(
                tu, found.records, enum_names, host_layouts.locations
            )
        for name, layout in layouts.records.items():
            record_layouts[name][target] = layout
        for name, size in layouts.enum_sizes.items():
            enum_sizes[name][target] = size

    return failed


def _interface(
    options: ParseOptions,
    source: Source,
    targets: tuple[str, ...],
    pending: dict[str, Future[TranslationUnit]],
    progress: bool,
) -> Interface:
    if progress:
        print(f"parse: {HOST_TARGET} (declarations)", file=sys.stderr)
    host_tu = _parse_target(options, HOST_TARGET)
    found = declarations.collect(host_tu, options)

    record_layouts: dict[str, dict[str, RecordLayout]] = {name: {} for name in found.records}
    enum_sizes: dict[str, dict[str, int]] = {name: {} for name in found.enums}
    enum_names = set(found.enums)
    # the probe's parse (libclang, without the GIL) runs while this thread reads the layouts
    deprecated = sorted(n for n, f in found.functions.items() if f.deprecated is not None)
    probing = _Background(probes.run, options, HOST_TARGET, sorted(found.macros), deprecated)
    host_layouts = declarations.collect_layouts(host_tu, found.records, enum_names)
    failed = _target_layouts(
        targets, pending, host_layouts, found, (record_layouts, enum_sizes), progress
    )

    probe = probing.result()

    functions = tuple(
        replace(f, deprecated=probe.deprecation_messages.get(f.name, f.deprecated))
        if f.deprecated is not None
        else f
        for _, f in sorted(found.functions.items())
    )
    records = tuple(
        replace(r, layouts=record_layouts[name]) for name, r in sorted(found.records.items())
    )
    enums = tuple(replace(e, sizes=enum_sizes[name]) for name, e in sorted(found.enums.items()))
    constants = {n: Constant(n, v, found.macros[n]) for n, v in probe.constants.items()}
    constants.update(found.anonymous_enum_constants)
    constants.update(found.variable_constants)
    skipped = tuple(
        SkippedMacro(n, found.macros[n], f"not an integer constant expression: {reason}")
        for n, reason in sorted(probe.not_constant.items())
    )
    return Interface(
        source=source,
        host_target=HOST_TARGET,
        targets=tuple(t for t in targets if t not in failed),
        headers=tuple(sorted(found.headers)),
        functions=functions,
        records=records,
        enums=enums,
        typedefs=tuple(t for _, t in sorted(found.typedefs.items())),
        constants=tuple(c for _, c in sorted(constants.items())),
        skipped_macros=skipped,
        skipped_variables=tuple(
            SkippedMacro(name, header, why)
            for name, (header, why) in sorted(found.skipped_variables.items())
        ),
        failed_targets=tuple(sorted(failed.items())),
        incomplete_enums=tuple(
            SkippedMacro(name, header, why)
            for name, (header, why) in sorted(found.incomplete_enums.items())
        ),
        absent_libraries=options.absent_libraries(),
    )


def default_wrapper_header(tree: Path | None = None) -> Path | None:
    """The tool's MTP wrapper header, when it exists and (given ``tree``) the tree has the
    MTP API the wrapper needs (``sources.tree``'s rule, the one the native build uses, so the
    bindings and the built ABI identity library describe the same declarations)."""
    candidate = wrapper_dir() / WRAPPER_HEADER
    if not candidate.is_file():
        return None
    if tree is not None and mtp_api_missing_reason(tree) is not None:
        return None
    return candidate


def parse_tree(
    tree: Tree,
    targets: tuple[str, ...] = DEFAULT_TARGETS,
    *,
    with_wrapper: bool = True,
    progress: bool = False,
) -> Interface:
    """A fetched tree's interface: llama.h, and the wrapper header when the tree has the MTP
    API (unless ``with_wrapper`` is false), for ``targets``."""
    header = tree.wrapper_header if with_wrapper else None
    return parse_interface(ParseOptions(tree.root, header, targets), tree.source, progress)


def tree_source(
    tree: Path, tag: str | None = None, commit: str | None = None, required: bool = True
) -> Source:
    """Tag, commit and digest of a verified tree, from the metadata ``llama-bindgen fetch`` writes
    beside it; ``tag``/``commit`` override it. Without metadata and overrides: an error, or (when
    not ``required``) a source named after the folder."""
    if not (tree / "include" / "llama.h").is_file():
        what = "not a llama.cpp tree (no include/llama.h)" if tree.is_dir() else "no such folder"
        raise UsageError(f"{tree}: {what}")
    meta = load_tree_metadata(tree)
    if meta is None and tag is None and commit is None:
        if required:
            raise UsageError(
                f"{tree} has no {TREE_METADATA} (not fetched with `llama-bindgen fetch`): "
                "fetch it, or name it with --tag and --commit"
            )
        return Source(tag=tree.name, commit="", digest="")
    meta = meta or {}
    recorded = commit_label(meta.get("commit", ""), meta.get("provider", "")) if meta else ""
    return Source(
        tag=tag if tag is not None else meta.get("tag", ""),
        commit=commit if commit is not None else recorded,
        digest=meta.get("digest", ""),
    )
