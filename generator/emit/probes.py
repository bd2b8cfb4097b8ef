"""C sources generated from the IR before a build: the layout probe and the ABI identity library.

The layout probe records ``sizeof``/``_Alignof`` of every struct and union the IR lays out,
``offsetof`` of every named non-bit-field member, and ``sizeof`` of every enum, in one array behind
a magic marker (``verify.layout_probe`` compiles it and reads the values back). The ABI identity
library compiles the same values into the build, for the load-time guard.
"""

from __future__ import annotations

from dataclasses import dataclass

from generator import __version__
from generator.ir.interface import Interface
from generator.sources import mtmd_api, rpc_api
from generator.sources.tree import WRAPPER_HEADER
from generator.templating import environment

# "LLAMABND" and "LAYOUT01" as little-endian 64-bit words: every target we build is little-endian.
MAGIC = (
    int.from_bytes(b"LLAMABND", "little"),
    int.from_bytes(b"LAYOUT01", "little"),
)


@dataclass(frozen=True)
class ProbeValue:
    # ("size"|"align", name) / ("offset", name, field) / ("enum", name); names as the IR and the
    # ABI manifest spell them (the tag, or the typedef name of a tagless record)
    key: tuple[str, ...]
    expr: str


def probe_values(interface: Interface, triple: str) -> list[ProbeValue]:
    """What the probe measures, in a fixed order (records, then enums, each sorted by name)."""
    values: list[ProbeValue] = []
    for record in sorted(interface.records, key=lambda r: r.name):
        layout = record.layouts.get(triple)
        if record.opaque or layout is None:
            continue
        values.append(ProbeValue(("size", record.name), f"sizeof({record.c_name})"))
        values.append(ProbeValue(("align", record.name), f"_Alignof({record.c_name})"))
        for fld in layout.fields:
            if fld.bit_width is not None:
                continue  # offsetof cannot name a bit-field; its record's size still covers it
            values.append(
                ProbeValue(
                    ("offset", record.name, fld.name), f"offsetof({record.c_name}, {fld.name})"
                )
            )
    for enum in sorted(interface.enums, key=lambda e: e.name):
        if triple in enum.sizes:
            values.append(ProbeValue(("enum", enum.name), f"sizeof({enum.c_name})"))
    return values


def probe_headers(interface: Interface) -> list[str]:
    """The headers a C probe of ``interface`` (the layout probe, the ABI identity library)
    includes: llama.h, the wrapper's header, libmtmd's headers and ``ggml-rpc.h`` when the parse
    had them. Their folders: the build's include/ (ggml installs ``ggml-rpc.h`` there), and
    :func:`mtmd_api.include_dir` of the tree for mtmd's."""
    headers = ["llama.h"]
    if interface.has_library("llama_mtp"):
        headers.append(WRAPPER_HEADER)
    if interface.has_library(mtmd_api.LIBRARY):
        headers.extend(h for h in mtmd_api.rule().headers if h in interface.headers)
    if interface.has_library(rpc_api.LIBRARY):
        headers.append(rpc_api.HEADER)
    return headers


def key_text(key: tuple[str, ...]) -> str:
    """A probe key as one string (``offset struct llama_context_params n_rs_seq``)."""
    return " ".join(key)


def expected_values(interface: Interface, triple: str) -> dict[str, int]:
    """What a build for ``triple`` reports for each probe key (``key_text``), from the IR's
    layouts: what the load-time guard compares with the ABI identity library."""
    records = {r.name: r for r in interface.records}
    sizes = {e.name: e.sizes.get(triple) for e in interface.enums}
    values: dict[str, int] = {}
    for probe in probe_values(interface, triple):
        kind, name, *member = probe.key
        if kind == "enum":
            size = sizes[name]
            assert size is not None  # probe_values keeps enums with a size for triple
            values[key_text(probe.key)] = size
            continue
        layout = records[name].layouts[triple]
        if kind == "offset":
            found = layout.field(member[0])
            assert found is not None
            values[key_text(probe.key)] = found.offset
        else:
            values[key_text(probe.key)] = layout.size if kind == "size" else layout.align
    return values


def render_abi_identity(interface: Interface, headers: list[str], digest: str) -> str:
    """C source of the ABI identity library: commit, tree digest and the compiled layouts."""
    values = probe_values(interface, interface.host_target)
    return (
        environment()
        .get_template("probe/abi_identity.c.j2")
        .render(
            generator_version=__version__,
            tag=interface.source.tag,
            commit=interface.source.commit,
            digest=digest,
            headers=headers,
            values=[{"expr": v.expr, "key": key_text(v.key)} for v in values],
        )
    )


def render_probe(
    interface: Interface, triple: str, headers: list[str]
) -> tuple[str, list[ProbeValue]]:
    values = probe_values(interface, triple)
    text = (
        environment()
        .get_template("probe/layout_probe.c.j2")
        .render(
            generator_version=__version__,
            tag=interface.source.tag,
            commit=interface.source.commit,
            headers=headers,
            values=[{"expr": v.expr, "key": key_text(v.key)} for v in values],
            magic=[f"0x{m:016X}" for m in MAGIC],
        )
    )
    return text, values
