"""Markdown report and PNG chart of one bench result (the JSON the runner writes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _fmt(s: dict[str, Any], digits: int = 2) -> str:
    """median (min..max, n runs)."""
    if not s or s.get("median") is None or not s.get("runs"):
        return "-"
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}..{s['max']:.{digits}f}, n={s['runs']})"


def markdown(result: dict[str, Any], chart_name: str) -> str:
    env = result["environment"]
    lines = [
        f"# llama-bindgen benchmarks: {result['name']}",
        "",
        f"llama.cpp {env['llama_cpp_tag']} ({env['llama_cpp_commit'][:12]}), "
        f"{env['cpu_count']} CPU(s), load average at start {env['load_average']}, "
        f"Python {env['python']}. Figures: median (min..max, n runs) of interleaved runs; "
        "ratios are taken per repeat between runs measured side by side, so that a shared, "
        "noisy machine moves both sides. No figure here is a test threshold.",
        "",
        f"![chart]({chart_name})",
        "",
    ]
    sections = result["sections"]
    if "generation" in sections:
        g = sections["generation"]
        lines += [
            "## 1. Generating bindings: `generate` vs ctypeslib2's clang2py",
            "",
            g["method"],
            "",
            "| tool | wall s | peak MB | wall / clang2py | output lines |",
            "|---|---|---|---|---|",
        ]
        for tool in g["wall_s"]:
            ratio = g["wall_ratio_vs_clang2py"].get(tool, {})
            lines.append(
                f"| {tool} | {_fmt(g['wall_s'][tool])} | {_fmt(g['peak_rss_mb'][tool], 0)} | "
                f"{_fmt(ratio) if ratio else '1'} | {g['output_lines'][tool]} |"
            )
        lines.append("")
    if "calls" in sections:
        c = sections["calls"]
        lines += [
            "## 2. Foreign-call overhead vs llama-cpp-python (ctypes)",
            "",
            c["method"],
            "",
            "| call | ctypes ns | ours, ABI-mode fallback ns | ABI / ctypes | "
            "ours as shipped (API mode) ns | API / ctypes |",
            "|---|---|---|---|---|---|",
        ]
        for case in c["ns"]["cffi_abi"]:
            base = case.replace("_slices", "")
            api = c["ns"].get("cffi_api", {}).get(case, {})
            api_ratio = c["ratio_vs_ctypes"].get("cffi_api", {}).get(case, {})
            lines.append(
                f"| {case} | {_fmt(c['ns']['ctypes'][base], 0)} | "
                f"{_fmt(c['ns']['cffi_abi'][case], 0)} | "
                f"{_fmt(c['ratio_vs_ctypes']['cffi_abi'][case])} | {_fmt(api, 0)} | "
                f"{_fmt(api_ratio)} |"
            )
        lines.append("")
    if "loop" in sections:
        lo = sections["loop"]
        tps = lo["tokens_per_second"]
        lines += [
            "## 3. Greedy generation loop: our runtime vs a C driver",
            "",
            lo["method"],
            f" Model `{lo['model']}`.",
            "",
            "| driver | tokens/s | peak MB |",
            "|---|---|---|",
            f"| C driver | {_fmt(tps['c_driver'], 1)} | {_fmt(lo['peak_rss_mb']['c_driver'], 0)} |",
            f"| Python runtime | {_fmt(tps['python_runtime'], 1)} | "
            f"{_fmt(lo['peak_rss_mb']['python_runtime'], 0)} |",
            f"| Python runtime, abort callback cleared (diagnostic) | "
            f"{_fmt(tps['python_runtime_no_abort_callback'], 1)} | "
            f"{_fmt(lo['peak_rss_mb']['python_runtime_no_abort_callback'], 0)} |",
            "",
            f"Python / C tokens/s: **{_fmt(lo['ratio_python_over_c'], 3)}** (target >= 0.97); "
            f"identical tokens: {lo['identical_tokens']}. With the runtime's abort callback "
            f"cleared: {_fmt(lo['ratio_python_no_abort_callback_over_c'], 3)}. The runtime's "
            f"extra time per token (1/Python - 1/C, microseconds): "
            f"{_fmt(lo.get('python_overhead_us_per_token', {}), 0)}.",
            "",
        ]
    if "bump" in sections:
        b = sections["bump"]
        lines += [
            "## 5. A bump beyond its native builds",
            "",
            b["method"],
            "",
            "| case | wall s | against | ratio |",
            "|---|---|---|---|",
            f"| bump of a new tag ({b['platform']}, warm ccache) | {_fmt(b['new_tag_wall_s'], 0)} "
            f"| its build gate {_fmt(b['new_tag_build_s'], 0)} s "
            f"| {_fmt(b['new_tag_wall_over_build'])} |",
            f"| re-bump of the pin (caches warm) | {_fmt(b['rebump_wall_s'], 1)} "
            f"| a cold build {b['cold_build_s']:.0f} s | {_fmt(b['rebump_over_cold_build'], 3)} |",
            "",
        ]
    if "import" in sections:
        lines += _import_lines(sections["import"])
    if "tags" in sections:
        from bench.tag_builds import lines as tag_lines

        lines += tag_lines(sections["tags"])
    if "strategies" in sections:
        lines += _strategies_lines(sections["strategies"])
    if "realmodel" in sections:
        lines += _realmodel_lines(sections["realmodel"])
    if "chat" in sections:
        lines += _chat_lines(sections["chat"])
    if "server" in sections:
        lines += _server_lines(sections["server"])
    if "rpc" in sections:
        lines += _rpc_lines(sections["rpc"])
    if "mtp" in sections:
        m = sections["mtp"]
        lines += ["## 4. MTP speculative decoding", "", m["method"], ""]
        for kind, d in m["models"].items():
            lines += [
                f"### {kind} (`{d['model']}`)",
                "",
                "| configuration | tokens/s | vs ours plain | acceptance | peak MB |",
                "|---|---|---|---|---|",
            ]
            for name, s in d["tokens_per_second"].items():
                lines.append(
                    f"| {name} | {_fmt(s, 1)} | {_fmt(d['speedup_vs_ours_plain'].get(name, {}))} "
                    f"| {_fmt(d['acceptance'].get(name, {}), 3)} | "
                    f"{_fmt(d['peak_rss_mb'][name], 0)} |"
                )
            lines.append("")
            if d["ours_over_upstream"]:
                lines.append(
                    "Ours / upstream tokens/s: "
                    + ", ".join(f"{k} **{_fmt(v)}**" for k, v in d["ours_over_upstream"].items())
                    + "."
                )
            lines += [
                f"Our MTP output equals plain output: {d['ours_mtp_output_equals_plain']}.",
                "",
            ]
    return "\n".join(lines) + "\n"


def _met(flag: bool | None) -> str:
    return "not measured" if flag is None else ("**met**" if flag else "**not met**")


def _median(s: dict[str, Any] | None) -> str:
    return f"{s['median']:.0f}" if s and s.get("runs") else "-"


def _per_strategy_cell(per: dict[str, Any], kinds: list[str]) -> str:
    """``kind accepted/drafted (acceptance)`` per strategy, in the configuration's order."""
    cells = []
    for kind in kinds:
        d = per.get(kind)
        if d is None:
            continue
        acc = d["acceptance"]
        rate = f"{acc['median']:.3f}" if acc.get("runs") else "-"
        cells.append(
            f"{kind} {d['accepted_tokens']['median']:.0f}/{d['drafted_tokens']['median']:.0f} "
            f"({rate})"
        )
    return "; ".join(cells) or "-"


def _strategies_models(models: dict[str, Any]) -> str:
    """The target and each draft model (results before the layer drafts name draft-simple's
    draft only, as ``draft``)."""
    drafts = models.get("drafts") or {"draft-simple": models["draft"]}
    named = "".join(f", {kind}'s draft `{name}`" for kind, name in drafts.items())
    return f" Models: target `{models['target']}`{named}."


def _strategies_lines(st: dict[str, Any]) -> list[str]:
    lines = [
        "## Speculative strategies: our runtime vs upstream's llama-speculative-simple",
        "",
        st["method"],
        _strategies_models(st["models"]),
        "",
    ]
    for prompt in st["prompt_order"]:
        d = st["prompts"][prompt]
        tps, up = d["tokens_per_second"], d["ours_over_upstream"]
        lines += [
            f"### {prompt} prompt",
            "",
            "| configuration | ours tokens/s | upstream tokens/s | ours / upstream | ours vs ours "
            "plain | acceptance ours / upstream | per strategy, ours: accepted/drafted "
            "(acceptance) | per strategy, upstream | steps ours / upstream | output = plain "
            "(ours / upstream) |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name, kinds in st["configurations"]:
            ours, theirs = f"ours_{name}", f"upstream_{name}"
            not_run = d["not_run"].get(theirs)
            up_cell = f"not-run: {not_run}" if not_run else _fmt(tps.get(theirs, {}), 1)
            if not kinds:
                up_cell = "(not compared)"
            acc, eq, steps = d["acceptance"], d["output_equals_plain"], d.get("steps", {})
            lines.append(
                f"| {name} | {_fmt(tps.get(ours, {}), 1)} | {up_cell} | "
                f"{_fmt(up.get(name, {}))} | {_fmt(d['speedup_vs_ours_plain'].get(ours, {}))} | "
                f"{_fmt(acc.get(ours, {}), 3)} / {_fmt(acc.get(theirs, {}), 3)} | "
                f"{_per_strategy_cell(d['per_strategy'].get(ours, {}), kinds)} | "
                f"{_per_strategy_cell(d['per_strategy'].get(theirs, {}), kinds)} | "
                f"{_median(steps.get(ours))} / {_median(steps.get(theirs))} | "
                f"{eq.get(ours, '-')} / {eq.get(theirs, '-')} |"
            )
        lines += [
            "",
            f"Upstream's prompt echo equals the prompt ids: {d['upstream_prompt_echo_matches']}; "
            f"upstream runs without statistics, run again: "
            f"{d['upstream_reruns_missing_statistics']}.",
            "",
        ]
    best = st["targets"]["best_over_upstream_draft_mtp"]
    each = st["targets"]["ours_over_upstream_each"]
    ratios = {
        f"{p}:{n}": r for p, d in st["prompts"].items() for n, r in d["ours_over_upstream"].items()
    }
    missed = [f"{k} {ratios[k]['median']:.3f}" for k, ok in each["met"].items() if not ok]
    lines += ["### Targets", ""]
    if best["met"] is None:
        lines.append(f"* Best / upstream draft-mtp >= {best['target']}: not measured "
                     f"({best.get('reason', '')}).")  # fmt: skip
    else:
        lines.append(
            f"* Repetitive prompt, our best configuration (`{best['configuration']}`) / "
            f"upstream's draft-mtp alone: **{_fmt(best['ratio'])}** (target >= "
            f"{best['target']}): {_met(best['met'])}."
        )
    lines.append(
        f"* Ours / upstream >= {each['target']} for each identical configuration: "
        f"{_met(each['all_met'])}"
        + (f"; below it (median): {', '.join(missed)}" if missed else "")
        + (f"; not-run: {', '.join(each['not_run'])}" if each["not_run"] else "")
        + "."
    )
    return [*lines, ""]


def _realmodel_lines(rm: dict[str, Any]) -> list[str]:
    lines = [
        "## Real model: our runtime vs llama-cpp-python's `Llama`",
        "",
        rm["method"],
        "",
    ]
    if rm.get("peer_unavailable"):
        lines += [f"**llama-cpp-python unavailable, not measured:** {rm['peer_unavailable']}", ""]
    if "wall_seconds" in rm:
        lines += [
            f"The section took {rm['wall_seconds']:.0f} s on {rm['cpu_count']} CPU(s) shared with "
            f"other work; load average at its end {rm['load_average_end']} (a 1-thread run "
            "alone would add about 1).",
            "",
        ]
    for prompt, d in rm["prompts"].items():
        tps, pps = d["tokens_per_second"], d["prompt_tokens_per_second"]
        lines += [
            f"### {prompt} prompt ({_median(d['generated_tokens'].get('ours_plain'))} tokens "
            f"generated after {len(d['text'])} characters)",
            "",
            "| run | generation tokens/s | prompt tokens/s | whole call s | vs own plain "
            "(tokens/s) | steps | drafted | peak MB | output = ours plain | finish |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name in tps:
            lines.append(
                f"| {name} | {_fmt(tps[name], 1)} | {_fmt(pps[name], 0)} | "
                f"{_fmt(d['call_seconds'][name])} | "
                f"{_fmt(d['speedup_vs_own_plain'].get(name, {}))} | "
                f"{_median(d['steps'][name])} | {_median(d['drafted_tokens'][name])} | "
                f"{_fmt(d['peak_rss_mb'][name], 0)} | {d['output_equals_ours_plain'][name]} | "
                f"{', '.join(d['finish_reasons'][name])} |"
            )
        lines += ["", "| ours / theirs | generation tokens/s | prompt tokens/s | whole call |",
                  "|---|---|---|---|"]  # fmt: skip
        for pair, r in d["ours_over_theirs"].items():
            lines.append(
                f"| {pair} | **{_fmt(r['tokens_per_second'])}** | "
                f"{_fmt(r['prompt_tokens_per_second'])} | {_fmt(r['call_speed'])} |"
            )
        same_prompt = all(d["prompt_equals_ours"].values())
        lines += [
            "",
            f"Same prompt ids on both sides: {same_prompt}. Context settings (ours plain): "
            f"{d['settings'].get('ours_plain')}; theirs plain: "
            f"{d['settings'].get('theirs_plain', '-')}. Ours plain's output begins: "
            f"{d['ours_plain_text'][:160]!r}.",
            "",
        ]
    return lines


def _per_turn(turns: list[dict[str, Any]], digits: int = 0) -> str:
    """Per-turn medians: ``a / b / c / d``."""
    return " / ".join(f"{t['median']:.{digits}f}" if t.get("runs") else "-" for t in turns)


def _rpc_lines(rp: dict[str, Any]) -> list[str]:
    lines = ["## RPC: local vs split over two loopback workers", "", rp["method"], ""]
    lines += [
        f"{rp['repeats']} repeats, {rp['n']} tokens per run.",
        "",
        "| model and mode | tok/s local | tok/s split | split / local | load s local | "
        "load s split | load split / local | same tokens |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in rp["runs"].items():
        lines.append(
            f"| {name} | {_fmt(r['local_tokens_per_second'], 1)} | "
            f"{_fmt(r['split_tokens_per_second'], 1)} | {_fmt(r['tps_split_over_local'], 3)} | "
            f"{_fmt(r['local_load_s'], 3)} | {_fmt(r['split_load_s'], 3)} | "
            f"{_fmt(r['load_split_over_local'], 2)} | {'yes' if r['same_tokens'] else 'NO'} |"
        )
    return [*lines, ""]


def _chat_lines(ch: dict[str, Any]) -> list[str]:
    lines = ["## Real-model chat: our runtime vs llama-cpp-python's `Llama`", "", ch["method"], ""]
    if ch.get("peer_unavailable"):
        lines += [f"**llama-cpp-python unavailable, not measured:** {ch['peer_unavailable']}", ""]
    lines += [
        f"The section took {ch['wall_seconds']:.0f} s on {ch['cpu_count']} CPU(s) shared with "
        f"other work; load average at its end {ch['load_average_end']}.",
        "",
        "| run | whole chat s | per turn s | prompt tokens per turn | prompt tokens decoded per "
        "turn | reuse | generated per turn | steps | drafted | peak MB | replies = ours_default "
        "| finish |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, total in ch["total_seconds"].items():
        equal = ch["replies_equal_ours_default"][name]
        reuse = " / ".join(",".join(k) for k in ch["prompt_reuse"][name])
        lines.append(
            f"| {name} | {_fmt(total)} | {_per_turn(ch['turn_seconds'][name], 2)} | "
            f"{_per_turn(ch['prompt_tokens'][name])} | "
            f"**{_per_turn(ch['decoded_prompt_tokens'][name])}** | {reuse} | "
            f"{_per_turn(ch['generated_tokens'][name])} | {_median(ch['steps'][name])} | "
            f"{_median(ch['drafted_tokens'][name])} | {_fmt(ch['peak_rss_mb'][name], 0)} | "
            f"{sum(equal)} of {len(equal)} | {', '.join(ch['finish_reasons'][name])} |"
        )
    lines += [
        "",
        "| ours / theirs | whole chat: theirs' time / ours | replies equal (repeats) | "
        "first differing turn (repeat 1) | same prompt ids per turn (repeat 1) |",
        "|---|---|---|---|---|",
    ]
    for pair, r in ch["ours_over_theirs"].items():
        diff = r["first_difference"]
        where = f"turn {diff['turn']}, after {diff['common_characters']} chars" if diff else "none"
        lines.append(
            f"| {pair} | **{_fmt(r['chat_speed'])}** | {sum(r['replies_equal'])} of "
            f"{len(r['replies_equal'])} | {where} | {r['prompt_ids_equal_per_turn']} |"
        )
    own = ", ".join(f"{k} {_fmt(v)}" for k, v in ch["speedup_vs_own"].items())
    lines += [
        "",
        f"Within a side, the reference's whole-chat time / the configuration's: {own}. Replies "
        f"the same in every repeat: {ch['replies_stable']}. Context settings: "
        f"{ch['settings']}.",
        "",
    ]
    for name, replies in ch["replies"].items():
        lines.append(f"* {name}, replies (repeat 1): {[r[:120] for r in replies]}")
    return [*lines, ""]


def _acceptance_cell(a: dict[str, Any] | None) -> str:
    if not a or not a.get("drafted"):
        return "-"
    return f"{a['rate']:.3f} ({a['accepted']:.0f}/{a['drafted']:.0f})"


SERVER_MODES = ("plain", "ngram-mod", "draft-mtp")


def _by_clients(by: dict[str, Any]) -> list[tuple[str, Any]]:
    """A side's per-client-count entries, fewest clients first (the JSON sorts them as text)."""
    return sorted(by.items(), key=lambda kv: int(kv[0]))


def _server_modes(sv: dict[str, Any]) -> list[tuple[str, Any]]:
    order = {m: i for i, m in enumerate(SERVER_MODES)}
    return sorted(sv["modes"].items(), key=lambda kv: order.get(kv[0], len(order)))


def _server_lines(sv: dict[str, Any]) -> list[str]:
    lines = ["## Server: OpenAI-compatible servers under concurrent chat clients", "", sv["method"]]
    lines += ["", f"Models: {sv['models']}. Peers: {sv['peers']}."]
    if sv.get("peer_unavailable"):
        lines += ["", f"**llama-cpp-python's server unavailable:** {sv['peer_unavailable']}"]
    lines += [
        "",
        f"The section took {sv['wall_seconds']:.0f} s on {sv['cpu_count']} CPU(s) shared with "
        f"other work; load average at its end {sv['load_average_end']}.",
    ]
    for mode, m in _server_modes(sv):
        lines += [
            "",
            f"### {mode}",
            "",
            "| side | clients | tokens/s | latency p50 s | latency p95 s | acceptance (accepted/"
            "drafted) | requests | failed clients | replies = first run | finish |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for side, by in m["sides"].items():
            for clients, r in _by_clients(by):
                equal, total = r["replies_equal_reference"]
                lines.append(
                    f"| {side} | {clients} | {_fmt(r['tokens_per_second'], 1)} | "
                    f"{_fmt(r['latency_p50_s'])} | {_fmt(r['latency_p95_s'])} | "
                    f"{_acceptance_cell(r['acceptance'])} | {r['requests']} | "
                    f"{r['failed_clients']} | {equal} of {total} | "
                    f"{', '.join(r['finish_reasons'])} |"
                )
        if m["ours_over"]:
            lines += [
                "",
                "| ours / peer | clients | tokens/s, ours / peer | latency p50, peer / ours | "
                "latency p95, peer / ours |",
                "|---|---|---|---|---|",
            ]
            for peer, by in m["ours_over"].items():
                for clients, r in _by_clients(by):
                    lines.append(
                        f"| ours / {peer} | {clients} | **{_fmt(r['tokens_per_second'])}** | "
                        f"{_fmt(r['latency_p50'])} | {_fmt(r['latency_p95'])} |"
                    )
        for clients, r in _by_clients(m["sides"].get("ours", {})):
            if r["slot_acceptance"]:
                per = ", ".join(
                    f"{slot}: {s['rate']:.2f}" for slot, s in r["slot_acceptance"].items()
                )
                lines += ["", f"Ours, acceptance per slot at {clients} client(s): {per}."]
        errors = [e for by in m["sides"].values() for r in by.values() for e in r["errors"]]
        if errors:
            lines += ["", f"Failed requests (first ones): {errors[:5]}"]
        lines += ["", f"First run's replies equal ours: {m['replies_equal_ours']}."]
    return [*lines, ""]


IMPORT_CASES = {
    "python_start": "interpreter start only (`python -c` printing one line)",
    "ours_abi": "ours, ABI mode, declarations pre-parsed (`_ffi_abi.py`)",
    "ours_abi_hashing": "ours, ABI mode, every load hashing the libraries (seals off)",
    "ours_api": "ours, compiled API-mode module",
    "ours_inline_cdef": "ours, ABI mode, cdef.h parsed at import (the fallback; before)",
    "llama_cpp_python": "llama-cpp-python 0.3.36 (ctypes)",
}


def _import_lines(im: dict[str, Any]) -> list[str]:
    lines = [
        "## 6. Import and load vs llama-cpp-python (whole process)",
        "",
        im["method"],
        "",
    ]
    if im.get("peer_unavailable"):
        lines += [f"**llama-cpp-python unavailable, not measured:** {im['peer_unavailable']}", ""]
    lines += [
        "| case | whole process s | import s (in process) | load() s (in process) | "
        "/ llama-cpp-python | net of interpreter start / llama-cpp-python |",
        "|---|---|---|---|---|---|",
    ]
    for case, wall in im["wall_s"].items():
        inside = im["in_process_s"].get(case, {})
        ratio = im["ratio_vs_llama_cpp_python"].get(case, {})
        net = im["net_ratio_vs_llama_cpp_python"].get(case, {})
        lines.append(
            f"| {IMPORT_CASES.get(case, case)} | {_fmt(wall, 3)} | "
            f"{_fmt(inside.get('import_s', {}), 3)} | {_fmt(inside.get('load_s', {}), 3)} | "
            f"{_fmt(ratio, 3) if ratio else ('1' if case == 'llama_cpp_python' else '-')} | "
            f"{_fmt(net, 3) if net else '-'} |"
        )
    abi = im["ratio_vs_llama_cpp_python"].get("ours_abi")
    api = im["ratio_vs_llama_cpp_python"].get("ours_api")
    if abi:
        lines += [
            "",
            f"Ours / llama-cpp-python, whole process: ABI mode **{_fmt(abi, 3)}**"
            + (f", API mode **{_fmt(api, 3)}**" if api else "")
            + " (target <= 0.2).",
        ]
    return [*lines, ""]


def _bar(ax: Any, labels: list[str], stats: list[dict[str, Any]], title: str, ref: float) -> None:
    med = [s["median"] for s in stats]
    lo = [s["median"] - s["min"] for s in stats]
    hi = [s["max"] - s["median"] for s in stats]
    # upstream's and ctypes-free variants in a second colour
    colors = ["#dd8452" if ("upstream" in x or "api" in x) else "#4c72b0" for x in labels]
    ax.bar(range(len(labels)), med, yerr=[lo, hi], capsize=3, color=colors)
    ax.axhline(ref, color="#c44e52", linewidth=1, linestyle="--")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
    ax.set_title(title, fontsize=9)
    for i, v in enumerate(med):
        ax.annotate(f"{v:.2f}", (i, v), ha="center", va="bottom", fontsize=7)


Panel = tuple[list[str], list[dict[str, Any]], str, float]


def _panels(sections: dict[str, Any]) -> list[Panel]:
    """One bar chart per section that ran and has ratios: labels, stats, title, target line."""
    panels: list[Panel] = []
    if "generation" in sections:
        r = sections["generation"]["wall_ratio_vs_clang2py"]
        panels.append(
            (list(r), list(r.values()), "1. generate wall time / clang2py (lower is better)", 1)
        )
    if "calls" in sections:
        rc = sections["calls"]["ratio_vs_ctypes"]
        labels = [f"{impl}:{case}" for impl, cases in rc.items() for case in cases]
        stats = [s for cases in rc.values() for s in cases.values()]
        panels.append(
            (labels, stats, "2. time per call / ctypes (lower is better; target 0.5)", 0.5)
        )
    if "loop" in sections:
        lo = sections["loop"]
        panels.append(
            (
                ["runtime / C", "runtime, abort callback cleared / C"],
                [lo["ratio_python_over_c"], lo["ratio_python_no_abort_callback_over_c"]],
                "3. greedy tokens/s, Python runtime / C driver (target 0.97)",
                0.97,
            )
        )
    if "mtp" in sections:
        models = sections["mtp"]["models"]
        labels = [
            f"{kind}:{name}" for kind, d in models.items() for name in d["speedup_vs_ours_plain"]
        ]
        stats = [s for d in models.values() for s in d["speedup_vs_ours_plain"].values()]
        panels.append((labels, stats, "4. MTP tokens/s / ours plain (higher is better)", 1))
    if "strategies" in sections:
        st = sections["strategies"]
        prompts = st["prompts"]
        order = [(p, name) for p in st["prompt_order"] for name, _ in st["configurations"]]
        pairs = [(p, n) for p, n in order if n in prompts[p]["ours_over_upstream"]]
        labels = [f"{p}:{n}" for p, n in pairs]
        stats = [prompts[p]["ours_over_upstream"][n] for p, n in pairs]
        title = "strategies: ours / upstream tokens/s, same configuration (target 1)"
        panels.append((labels, stats, title, 1))
        rep = prompts["repetitive"]["speedup_vs_ours_plain"]
        names = [f"{side}_{n}" for n, _ in st["configurations"] for side in ("upstream", "ours")]
        names = [n for n in names if n in rep]
        title = "strategies, repetitive prompt: tokens/s / ours plain (higher is better)"
        panels.append((names, [rep[n] for n in names], title, 1))
    if "realmodel" in sections:
        prompts = sections["realmodel"]["prompts"]
        labels = [f"{p}:{pair.replace('ours_', '').replace('theirs_', '')}"
                  for p, d in prompts.items() for pair in d["ours_over_theirs"]]  # fmt: skip
        stats = [r["tokens_per_second"] for d in prompts.values()
                 for r in d["ours_over_theirs"].values()]  # fmt: skip
        title = "realmodel: generation tokens/s, ours / llama-cpp-python (higher is better)"
        panels.append((labels, stats, title, 1))
        labels = [f"{p}:{n}" for p, d in prompts.items() for n in d["speedup_vs_own_plain"]]
        stats = [s for d in prompts.values() for s in d["speedup_vs_own_plain"].values()]
        title = "realmodel: speculation tokens/s / the same side's plain (higher is better)"
        panels.append((labels, stats, title, 1))
    if "chat" in sections:
        ch = sections["chat"]
        names = [*ch["ours_over_theirs"], *ch["speedup_vs_own"]]
        labels = [n.replace("_", " ").replace("/", " vs ") for n in names]
        stats = [r["chat_speed"] for r in ch["ours_over_theirs"].values()]
        stats += list(ch["speedup_vs_own"].values())
        title = "chat: whole 4-turn chat, time of B / time of A for 'A vs B' (higher: A faster)"
        panels.append((labels, stats, title, 1))
    if "server" in sections:
        modes = sections["server"]["modes"]
        keys = [(mode, peer, c) for mode, m in _server_modes(sections["server"])
                for peer, by in m["ours_over"].items() for c, _ in _by_clients(by)]  # fmt: skip
        labels = [f"{mode}:{peer}:x{c}" for mode, peer, c in keys]
        stats = [modes[mode]["ours_over"][peer][c]["tokens_per_second"] for mode, peer, c in keys]
        title = "server: generated tokens/s, ours / peer at N clients (higher: ours faster)"
        panels.append((labels, stats, title, 1))
    if "tags" in sections:
        from bench.tag_builds import panel

        panels.append(panel(sections["tags"]))
    if sections.get("import", {}).get("ratio_vs_llama_cpp_python"):
        r = sections["import"]["ratio_vs_llama_cpp_python"]
        title = "6. import + load() + one call, whole process / llama-cpp-python (target 0.2)"
        panels.append((list(r), list(r.values()), title, 0.2))
    return panels


def chart(result: dict[str, Any], path: Path) -> None:
    """A bar chart per section that ran, two to a row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = _panels(result["sections"])
    rows = max(1, (len(panels) + 1) // 2)
    fig, axes = plt.subplots(rows, 2, figsize=(11, 4 * rows), squeeze=False)
    cells = [ax for row in axes for ax in row]
    for ax, (labels, stats, title, ref) in zip(cells, panels, strict=False):
        _bar(ax, labels, stats, title, ref)
    for ax in cells[len(panels) :]:
        ax.axis("off")
    fig.suptitle(
        f"llama-bindgen bench {result['name']} (llama.cpp {result['environment']['llama_cpp_tag']})"
        "; bars: median, whiskers: min..max",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str]) -> int:
    """``python -m bench.report RESULT.json``: re-render its Markdown and chart beside it."""
    import json
    import sys

    path = Path(argv[0])
    result = json.loads(path.read_text())
    chart(result, path.with_suffix(".png"))
    path.with_suffix(".md").write_text(markdown(result, path.with_suffix(".png").name))
    print(path.with_suffix(".md"), file=sys.stdout)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
