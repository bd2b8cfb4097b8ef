"""The server section's statistics, metrics parsing, summary and report, offline (no timings)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import report, server
from bench.server_load import (
    Request,
    percentile,
    replies_by_conversation,
    run_figures,
    slot_acceptance,
    slot_counters,
)


def _request(client: int, turn: int, started: float, latency: float, **kw: Any) -> Request:
    fields: dict[str, Any] = {
        "conversation": client % 2, "prompt_tokens": 10, "completion_tokens": 8,
        "finish_reason": "length", "text": f"reply {client % 2}.{turn}", "drafted": None,
        "accepted": None,
    }  # fmt: skip
    fields.update(kw)
    return Request(client=client, turn=turn, started=started, latency_s=latency, **fields)


def test_percentile_is_linear_between_ranks() -> None:
    assert percentile([3.0, 1.0, 2.0, 4.0], 50) == pytest.approx(2.5)
    assert percentile(list(map(float, range(1, 21))), 95) == pytest.approx(19.05)
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 50) != percentile([], 50)  # nan


def test_run_figures_take_tokens_over_the_whole_run() -> None:
    requests = [
        _request(0, 0, 10.0, 1.0),
        _request(0, 1, 11.0, 1.0),
        _request(1, 0, 10.5, 2.5, drafted=6, accepted=4),
    ]
    fig = run_figures(requests)
    assert fig["wall_s"] == pytest.approx(3.0)  # first call at 10.0, last answer at 13.0
    assert fig["completion_tokens"] == 24
    assert fig["tokens_per_second"] == pytest.approx(8.0)
    assert fig["latency_p50_s"] == pytest.approx(1.0)
    assert (fig["drafted"], fig["accepted"]) == (6, 4)
    assert run_figures([]) == {"requests": 0}


def test_replies_are_grouped_by_conversation_in_turn_order() -> None:
    requests = [_request(2, 1, 0, 1), _request(0, 0, 0, 1), _request(2, 0, 0, 1)]
    assert replies_by_conversation(requests) == {0: [["reply 0.0"], ["reply 0.0", "reply 0.1"]]}


METRICS_BEFORE = """# HELP llama_bindings_drafted_tokens_total drafted tokens
# TYPE llama_bindings_drafted_tokens_total counter
llama_bindings_drafted_tokens_total{slot="0"} 10.0
llama_bindings_drafted_tokens_total{slot="1"} 0.0
llama_bindings_accepted_tokens_total{slot="0"} 5.0
llama_bindings_accepted_tokens_total{slot="1"} 0.0
llama_bindings_acceptance_rate{slot="0"} 0.5
"""
METRICS_AFTER = METRICS_BEFORE.replace('slot="0"} 10.0', 'slot="0"} 30.0').replace(
    'accepted_tokens_total{slot="0"} 5.0', 'accepted_tokens_total{slot="0"} 20.0'
)


def test_slot_counters_and_acceptance_between_two_scrapes() -> None:
    before, after = slot_counters(METRICS_BEFORE), slot_counters(METRICS_AFTER)
    assert before["llama_bindings_drafted_tokens"] == {0: 10.0, 1: 0.0}
    assert before["llama_bindings_acceptance_rate"] == {0: 0.5}
    # slot 1 drafted nothing in between: left out
    assert slot_acceptance(before, after) == {0: {"drafted": 20.0, "accepted": 15.0, "rate": 0.75}}


def test_conversations_share_the_facts_and_differ_in_questions() -> None:
    chats = server.conversations(3)
    assert len(chats) == server.N_CONVERSATIONS and all(len(c) == 3 for c in chats)
    assert all(c[0].startswith(server.FACTS) for c in chats)
    assert len({c[0] for c in chats}) == server.N_CONVERSATIONS


def _setup(tmp_path: Path) -> server.Setup:
    return server.Setup(
        repo=tmp_path, bindings=tmp_path / "b", lib_dir=tmp_path / "lib",
        models={"gemma": tmp_path / "g.gguf", "mtp": tmp_path / "m.gguf"},
        llama_server=tmp_path / "bin", peer_python=tmp_path / "py",
        peer_package=tmp_path / "p" / "llama_cpp",
        threads=1, max_tokens=48, turns=3, ctx_size=1024, slots=16,
    )  # fmt: skip


def test_each_side_gets_the_same_threads_slots_and_template(tmp_path: Path) -> None:
    setup = _setup(tmp_path)
    plain, ngram = server.MODES[0], server.MODES[1]
    ours, ours_env = server.command(setup, "ours", ngram, 9000)
    assert ours[1:4] == ["-m", "llama_bindings", "serve"]
    assert ours[ours.index("--slots") + 1] == "16" and ours[ours.index("--threads") + 1] == "1"
    assert ours[ours.index("--speculative") + 1] == "ngram-mod"
    assert ours_env["LLAMA_BINDGEN_LIB_DIR"] == str(setup.lib_dir)
    theirs, env = server.command(setup, "llama-server", ngram, 9000)
    assert theirs[theirs.index("-np") + 1] == "16" and theirs[theirs.index("-c") + 1] == "16384"
    assert theirs[theirs.index("--spec-type") + 1] == "ngram-mod"
    assert env["LD_LIBRARY_PATH"].startswith(str(setup.lib_dir))
    peer, peer_env = server.command(setup, "llama-cpp-python", plain, 9000)
    assert peer[peer.index("--chat_format") + 1] == "gemma"
    assert peer[peer.index("--n_threads_batch") + 1] == "1"
    assert peer_env["LLAMA_CPP_LIB_PATH"] == str(setup.lib_dir)


def _fig(tps: float, p50: float, replies: dict[int, list[list[str]]], **kw: Any) -> dict[str, Any]:
    figures = {"requests": 3, "tokens_per_second": tps, "latency_p50_s": p50,
               "latency_p95_s": 2 * p50, "completion_tokens": 24.0,
               "finish_reasons": ["length"], "drafted": kw.get("drafted"),
               "accepted": kw.get("accepted")}  # fmt: skip
    return {"figures": figures, "replies": replies, "errors": kw.get("errors", []),
            "slots": kw.get("slots", {})}  # fmt: skip


def _runs() -> server.Runs:
    a, b = {0: [["x", "y"]]}, {0: [["x", "y"], ["x", "z"]]}
    return {
        "draft-mtp": {
            "ours": {
                1: [_fig(10.0, 1.0, a, slots={"0": {"drafted": 10, "accepted": 5}})] * 2,
                16: [_fig(40.0, 2.0, b, slots={"3": {"drafted": 4, "accepted": 4}})] * 2,
            },
            "llama-server": {
                1: [_fig(5.0, 2.0, a, drafted=8, accepted=2), _fig(5.0, 4.0, a)],
                16: [_fig(20.0, 8.0, a, errors=["client 3 turn 1: boom"])] * 2,
            },
        }
    }


def test_summary_ratios_acceptance_and_replies() -> None:
    mode = server.summarise(_runs())["modes"]["draft-mtp"]
    ours = mode["sides"]["ours"]
    assert ours["1"]["tokens_per_second"]["median"] == 10.0
    assert ours["1"]["acceptance"] == {"drafted": 20, "accepted": 10, "rate": 0.5}
    assert ours["16"]["slot_acceptance"] == {"3": {"drafted": 8, "accepted": 8, "rate": 1.0}}
    # at 16 clients one of the two clients of conversation 0 differs, in each repeat
    assert ours["16"]["replies_equal_reference"] == [2, 4]
    theirs = mode["sides"]["llama-server"]
    assert theirs["1"]["acceptance"] == {"drafted": 8, "accepted": 2, "rate": 0.25}
    assert theirs["16"]["failed_clients"] == 2
    ratios = mode["ours_over"]["llama-server"]
    assert ratios["1"]["tokens_per_second"]["values"] == [2.0, 2.0]
    assert ratios["1"]["latency_p50"]["values"] == [2.0, 4.0]  # peer / ours: higher, ours faster
    assert mode["replies_equal_ours"] == {"llama-server": {"0": True}}


def test_report_renders_the_server_section(tmp_path: Path) -> None:
    setup = _setup(tmp_path)
    section = {
        "method": server.method(setup, 2), "models": {"gemma": "g.gguf"},
        "peers": {"llama-server": "x", "llama-cpp-python": None},
        "peer_unavailable": "no sdist", "wall_seconds": 12.0, "cpu_count": 2,
        "load_average_end": [1.0, 1.0, 1.0], **server.summarise(_runs()),
    }  # fmt: skip
    text = "\n".join(report._server_lines(section))
    assert "### draft-mtp" in text
    assert "| ours / llama-server | 1 | **2.00 (2.00..2.00, n=2)**" in text
    assert "0.500 (10/20)" in text and "2 of 4" in text
    assert "slot at 16 client(s): 3: 1.00" in text.replace("per slot", "slot")
    assert "boom" in text and "no sdist" in text
    panels = report._panels({"server": section})
    assert panels[0][0] == ["draft-mtp:llama-server:x1", "draft-mtp:llama-server:x16"]
