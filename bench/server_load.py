"""The server section's clients: ``concurrency`` threads, each one chat of several requests one
after the other through the official ``openai`` client (greedy, a fixed ``max_tokens``, each
reply appended to that client's messages), and the statistics of such a run: tokens per second
over the run's wall time and the requests' latency percentiles. Also the Prometheus text of our
server's ``/metrics`` (drafted and accepted tokens per slot)."""

from __future__ import annotations

import math
import re
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Request:
    """One chat request as a client saw it."""

    client: int
    conversation: int
    turn: int
    started: float  # time.perf_counter() at the call
    latency_s: float
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    text: str
    drafted: int | None  # llama-server's timings.draft_n (None: not reported)
    accepted: int | None  # timings.draft_n_accepted


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100), linear between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def run_figures(requests: Sequence[Request]) -> dict[str, Any]:
    """A run's figures: generated tokens per second over its wall time (first call to last
    answer), the latencies' p50 and p95, the counts, and the drafts where the server told."""
    if not requests:
        return {"requests": 0}
    start = min(r.started for r in requests)
    wall = max(r.started + r.latency_s for r in requests) - start
    tokens = sum(r.completion_tokens for r in requests)
    latencies = [r.latency_s for r in requests]
    drafted = [r.drafted for r in requests if r.drafted is not None]
    accepted = [r.accepted for r in requests if r.accepted is not None]
    return {
        "requests": len(requests),
        "wall_s": wall,
        "completion_tokens": tokens,
        "prompt_tokens": sum(r.prompt_tokens for r in requests),
        "tokens_per_second": tokens / wall if wall > 0 else float("nan"),
        "latency_p50_s": percentile(latencies, 50),
        "latency_p95_s": percentile(latencies, 95),
        "drafted": sum(drafted) if drafted else None,
        "accepted": sum(accepted) if accepted else None,
        "finish_reasons": sorted({r.finish_reason for r in requests}),
    }


def replies_by_conversation(requests: Sequence[Request]) -> dict[int, list[list[str]]]:
    """Per conversation, every client's replies in turn order (clients in order)."""
    by_client: dict[int, list[Request]] = {}
    for r in requests:
        by_client.setdefault(r.client, []).append(r)
    out: dict[int, list[list[str]]] = {}
    for client in sorted(by_client):
        turns = sorted(by_client[client], key=lambda r: r.turn)
        out.setdefault(turns[0].conversation, []).append([r.text for r in turns])
    return out


def _timings(extra: dict[str, Any] | None) -> tuple[int | None, int | None]:
    timings = (extra or {}).get("timings") or {}
    drafted, accepted = timings.get("draft_n"), timings.get("draft_n_accepted")
    return (
        int(drafted) if drafted is not None else None,
        int(accepted) if accepted is not None else None,
    )


def _client(
    base_url: str,
    model: str,
    client: int,
    conversation: int,
    questions: Sequence[str],
    max_tokens: int,
    out: list[Request],
    errors: list[str],
    barrier: threading.Barrier,
) -> None:
    from openai import OpenAI

    api = OpenAI(base_url=f"{base_url}/v1", api_key="bench", max_retries=0, timeout=600.0)
    messages: list[Any] = []  # openai's message dicts
    barrier.wait()
    for turn, question in enumerate(questions):
        messages.append({"role": "user", "content": question})
        started = time.perf_counter()
        try:
            answer = api.chat.completions.create(
                model=model, messages=messages, temperature=0.0, max_tokens=max_tokens, stream=False
            )  # fmt: skip
        except Exception as exc:  # recorded: a failing side is reported, not fatal
            errors.append(f"client {client} turn {turn + 1}: {type(exc).__name__}: {exc}")
            return
        latency = time.perf_counter() - started
        choice = answer.choices[0]
        text = choice.message.content or ""
        usage = answer.usage
        drafted, accepted = _timings(answer.model_extra)
        out.append(
            Request(
                client=client, conversation=conversation, turn=turn, started=started,
                latency_s=latency, prompt_tokens=usage.prompt_tokens if usage else 0,
                completion_tokens=usage.completion_tokens if usage else 0,
                finish_reason=str(choice.finish_reason), text=text,
                drafted=drafted, accepted=accepted,
            )
        )  # fmt: skip
        messages.append({"role": "assistant", "content": text})


def run_clients(
    base_url: str,
    model: str,
    conversations: Sequence[Sequence[str]],
    concurrency: int,
    max_tokens: int,
) -> tuple[list[Request], list[str]]:
    """``concurrency`` clients at once (client i has conversation i mod len(conversations)),
    started together; their requests and the errors of those that failed."""
    out: list[Request] = []
    errors: list[str] = []
    barrier = threading.Barrier(concurrency)
    threads = [
        threading.Thread(
            target=_client,
            args=(
                base_url,
                model,
                i,
                i % len(conversations),
                conversations[i % len(conversations)],
                max_tokens,
                out,
                errors,
                barrier,
            ),
        )
        for i in range(concurrency)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(out, key=lambda r: (r.client, r.turn)), errors


def as_dicts(requests: Sequence[Request]) -> list[dict[str, Any]]:
    return [asdict(r) for r in requests]


_SAMPLE = re.compile(r'^(\w+)\{slot="(\d+)"\}\s+([0-9.eE+-]+)$')


def slot_counters(metrics_text: str) -> dict[str, dict[int, float]]:
    """Our server's per-slot counters in Prometheus text: name (``_total`` dropped) -> slot ->
    value."""
    out: dict[str, dict[int, float]] = {}
    for line in metrics_text.splitlines():
        m = _SAMPLE.match(line.strip())
        if m:
            name = m.group(1).removesuffix("_total")
            out.setdefault(name, {})[int(m.group(2))] = float(m.group(3))
    return out


def slot_acceptance(
    before: dict[str, dict[int, float]], after: dict[str, dict[int, float]]
) -> dict[int, dict[str, float]]:
    """Per slot that drafted between two scrapes: drafted, accepted and their ratio."""
    drafted_key, accepted_key = "llama_bindings_drafted_tokens", "llama_bindings_accepted_tokens"
    out: dict[int, dict[str, float]] = {}
    for slot, value in sorted(after.get(drafted_key, {}).items()):
        drafted = value - before.get(drafted_key, {}).get(slot, 0.0)
        accepted = after.get(accepted_key, {}).get(slot, 0.0) - before.get(accepted_key, {}).get(
            slot, 0.0
        )
        if drafted > 0:
            out[slot] = {"drafted": drafted, "accepted": accepted, "rate": accepted / drafted}
    return out


def scrape(base_url: str) -> dict[str, dict[int, float]]:
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=10) as answer:
        return slot_counters(answer.read().decode())
