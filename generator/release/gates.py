"""The gate record of a release entry, and the rule that decides whether it may be released.

In ``releases.toml`` each ``[[release]]`` that went through a bump carries::

    [release.gates]
    generator_version = "0.1.0"          # the toolchain that ran the gates
    providers = ["pypi-sdist ..."]       # where the tree came from
    diff_summary = "..."                 # one line: the API/ABI change count

    [release.gates.linux-x86_64]         # one table per platform (CPU backend), or per
    build = "passed"                     # platform and backend: [release.gates.linux-x86_64-cuda]
    symbols = "passed"
    layout = "passed"
    smoke = "passed"
    log = "logs/b11312/linux-x86_64.txt" # optional: where the gate output was kept

Every key of a platform table except ``log`` is a gate; a gate's value is ``passed``, ``failed`` or
``not-run``. A platform is released only when it has every required gate and each is exactly
``"passed"``; the others are left out of the release and named with the reason.

A native folder built by a CI job carries ``gates.json`` (written by ``generator.release.ci_job``:
``{"platform", "backend", "gates": {...}, "reasons": {...}, "log"}``). It describes the very
binaries in that folder, so it is their record, ahead of the releases.toml entry's, and obeys the
same rule: all four gates passed on the job's runner.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from generator.platforms import gate_key
from generator.release.errors import ReleaseRefusedError

if TYPE_CHECKING:  # tomlkit is imported lazily: CI jobs run ci_job.py before installing anything
    import tomlkit

PASSED = "passed"
FAILED = "failed"
NOT_RUN = "not-run"
OUTCOMES: tuple[str, ...] = (PASSED, FAILED, NOT_RUN)
REQUIRED_GATES: tuple[str, ...] = ("build", "symbols", "layout", "smoke")
GATES_FILE = "gates.json"
_NOT_GATES = frozenset({"log"})


@dataclass(frozen=True)
class PlatformGates:
    """The gate results of one platform (and backend)."""

    key: str  # "linux-x86_64" (CPU) or "linux-x86_64-cuda"
    results: dict[str, str]
    log: str = ""
    reasons: dict[str, str] = field(default_factory=dict)  # gate -> why it did not pass

    def failures(self, required: tuple[str, ...] = REQUIRED_GATES) -> list[str]:
        """Why this platform may not be released ([] when every required gate passed)."""
        out = [f"{gate} missing" for gate in required if gate not in self.results]
        for gate, value in sorted(self.results.items()):
            if value != PASSED:
                why = self.reasons.get(gate, "")
                out.append(f"{gate} = {value!r}" + (f" ({why})" if why else ""))
        return out


@dataclass(frozen=True)
class GateRecord:
    """``[release.gates]`` of one releases.toml entry."""

    platforms: dict[str, PlatformGates]
    generator_version: str = ""
    providers: tuple[str, ...] = ()
    diff_summary: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def lookup(self, platform: str, backend: str) -> PlatformGates | None:
        return self.platforms.get(gate_key(platform, backend)) or self.platforms.get(
            f"{platform}-{backend}"
        )


def _platform_gates(key: str, table: Mapping[str, Any], where: str) -> PlatformGates:
    results: dict[str, str] = {}
    for name, value in table.items():
        if name in _NOT_GATES:
            continue
        if not isinstance(value, str):
            raise ReleaseRefusedError(f"{where}: gate {key}.{name} is {value!r}, not a string")
        results[name] = value
    log = table.get("log", "")
    return PlatformGates(key, results, log if isinstance(log, str) else "")


def parse_gate_record(ref: str, entry_extra: Mapping[str, Any]) -> GateRecord:
    """Read ``[release.gates]`` from a release entry's unknown keys; refuse when it is absent."""
    where = f"releases.toml entry {ref!r}"
    raw = entry_extra.get("gates")
    if raw is None:
        raise ReleaseRefusedError(
            f"{where} has no [release.gates] record: run `llama-bindgen bump {ref}` first"
        )
    if not isinstance(raw, Mapping):
        raise ReleaseRefusedError(f"{where}: gates is not a table")
    platforms: dict[str, PlatformGates] = {}
    meta: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, Mapping):
            platforms[key] = _platform_gates(key, value, where)
        else:
            meta[key] = value
    providers = meta.pop("providers", ())
    return GateRecord(
        platforms=platforms,
        generator_version=str(meta.pop("generator_version", "")),
        providers=tuple(str(p) for p in providers) if isinstance(providers, list) else (),
        diff_summary=str(meta.pop("diff_summary", "")),
        extra=meta,
    )


def require_platforms(ref: str, record: GateRecord) -> None:
    """Refuse a record that names no platform (a bump that built nothing)."""
    if not record.platforms:
        raise ReleaseRefusedError(
            f"releases.toml entry {ref!r}: [release.gates] records no platform; nothing to release"
        )


def read_ci_gates(folder: Path) -> PlatformGates | None:
    """The ``gates.json`` a CI job left in a native folder, or None when there is none."""
    path = folder / GATES_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        key = gate_key(str(data["platform"]), str(data["backend"]))
        table = dict(data["gates"])
        reasons = {str(k): str(v) for k, v in dict(data.get("reasons", {})).items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReleaseRefusedError(f"{path}: not a gate record ({exc})") from exc
    table["log"] = data.get("log", "")
    gates = _platform_gates(key, table, str(path))
    return PlatformGates(gates.key, gates.results, gates.log, reasons)


def set_gate_record(doc: tomlkit.TOMLDocument, ref: str, record: GateRecord) -> None:
    """Store ``record`` as ``[release.gates]`` of entry ``ref`` in a releases.toml document.

    For ``bump``: load with ``generator.releases.load_document``, call this, write the document
    back (tomlkit keeps the rest of the file as it was). Replaces an earlier record.
    """
    import tomlkit

    entries = [e for e in doc.get("release", []) if e.get("ref") == ref]
    if len(entries) != 1:
        raise ReleaseRefusedError(f"releases.toml has {len(entries)} entries with ref {ref!r}")
    table = tomlkit.table()
    table["generator_version"] = record.generator_version
    table["providers"] = list(record.providers)
    table["diff_summary"] = record.diff_summary
    for key, value in sorted(record.extra.items()):
        table[key] = value
    for key, gates in sorted(record.platforms.items()):
        sub = tomlkit.table()
        for gate, result in gates.results.items():
            sub[gate] = result
        if gates.log:
            sub["log"] = gates.log
        table[key] = sub
    entries[0]["gates"] = table
