"""The server's Prometheus metrics (``/metrics``), in a registry of its own: requests by endpoint
and status; histograms of each ended request's queue time, time to first token, time per
output token and end-to-end time (from the slots taking it); and, read from the slots at each
scrape, the queue, the busy slots, the KV cells each slot holds, tokens, and drafted and
accepted tokens per slot, per speculative strategy and per draft position."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..runtime import RequestTimes, Slots, SlotStats

# seconds: a request's wait, first token and whole time; a token's time after the first
REQUEST_BUCKETS: Final = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
TOKEN_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0)


class SlotsCollector(Collector):
    """What :meth:`Slots.stats` says, at each scrape."""

    def __init__(self, slots: Slots) -> None:
        self.slots = slots

    def collect(self) -> Iterator[Metric]:
        stats = self.slots.stats()
        yield GaugeMetricFamily(
            "llama_bindings_queue_depth", "requests waiting for a slot", value=self.slots.waiting
        )
        yield GaugeMetricFamily(
            "llama_bindings_slots_busy", "slots generating", value=sum(s.busy for s in stats)
        )
        cells = GaugeMetricFamily(
            "llama_bindings_kv_cells_used", "KV cells a slot holds", labels=["slot"]
        )
        for slot, used in enumerate(self.slots.cells_in_use()):
            cells.add_metric([str(slot)], used)
        yield cells
        per_slot = {  # SlotStats' field: what it counts
            "requests": "requests ended",
            "prompt_tokens": "prompt tokens",
            "reused_prompt_tokens": "prompt tokens the slot held already",
            "generated_tokens": "generated tokens",
            "drafted_tokens": "drafted tokens",
            "accepted_tokens": "accepted draft tokens",
        }
        for name, text in per_slot.items():
            family = CounterMetricFamily(f"llama_bindings_{name}", text, labels=["slot"])
            for s in stats:
                family.add_metric([str(s.slot)], getattr(s, name))
            yield family
        rate = GaugeMetricFamily(
            "llama_bindings_acceptance_rate", "accepted / drafted tokens", labels=["slot"]
        )
        for s in stats:
            rate.add_metric([str(s.slot)], s.acceptance_rate)
        yield rate
        strategies: dict[str, list[int]] = {}
        for s in stats:
            for kind, (drafted, accepted) in s.strategies.items():
                total = strategies.setdefault(kind, [0, 0])
                total[0] += drafted
                total[1] += accepted
        drafted_family = CounterMetricFamily(
            "llama_bindings_strategy_drafted_tokens", "drafted tokens", labels=["strategy"]
        )
        accepted_family = CounterMetricFamily(
            "llama_bindings_strategy_accepted_tokens", "accepted tokens", labels=["strategy"]
        )
        for kind, (drafted, accepted) in sorted(strategies.items()):
            drafted_family.add_metric([kind], drafted)
            accepted_family.add_metric([kind], accepted)
        yield drafted_family
        yield accepted_family
        yield from _by_position(stats)


def _by_position(stats: list[SlotStats]) -> Iterator[Metric]:
    """Drafted and accepted tokens per draft position (1: a draft's first token), every slot's."""
    every = SlotStats(slot=-1)  # every slot's counts added up
    for s in stats:
        every.add_positions(s.drafted_at, s.accepted_at)
    drafted, accepted = every.drafted_at, every.accepted_at
    drafted_family = CounterMetricFamily(
        "llama_bindings_position_drafted_tokens", "drafts with a token at this position",
        labels=["position"],
    )  # fmt: skip
    accepted_family = CounterMetricFamily(
        "llama_bindings_position_accepted_tokens",
        "drafts whose token at this position was accepted", labels=["position"],
    )  # fmt: skip
    rate = GaugeMetricFamily(
        "llama_bindings_position_acceptance_rate", "accepted / drafted at this position",
        labels=["position"],
    )  # fmt: skip
    for position, count in enumerate(drafted):
        taken = accepted[position] if position < len(accepted) else 0
        label = [str(position + 1)]
        drafted_family.add_metric(label, count)
        accepted_family.add_metric(label, taken)
        rate.add_metric(label, taken / count if count else 0.0)
    yield from (drafted_family, accepted_family, rate)


class ServerMetrics:
    """The registry ``/metrics`` shows, and the request counter the app counts in."""

    def __init__(self, slots: Slots) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(SlotsCollector(slots))
        self.requests = Counter(
            "llama_bindings_http_requests", "HTTP requests answered",
            ["endpoint", "status"], registry=self.registry,
        )  # fmt: skip
        registry = self.registry
        self.queued = Histogram(
            "llama_bindings_request_queue_time_seconds", "time a request waited for a slot",
            buckets=REQUEST_BUCKETS, registry=registry,
        )  # fmt: skip
        self.first_token = Histogram(
            "llama_bindings_time_to_first_token_seconds", "time from a request's arrival in the "
            "slots to its first generated token", buckets=REQUEST_BUCKETS, registry=registry,
        )  # fmt: skip
        self.per_output_token = Histogram(
            "llama_bindings_time_per_output_token_seconds", "a request's time per generated "
            "token after its first", buckets=TOKEN_BUCKETS, registry=registry,
        )  # fmt: skip
        self.total = Histogram(
            "llama_bindings_e2e_request_latency_seconds", "time from a request's arrival in the "
            "slots to its end", buckets=REQUEST_BUCKETS, registry=registry,
        )  # fmt: skip
        slots.on_request_end(self.observe)

    def observe(self, times: RequestTimes) -> None:
        """One ended request's times into the histograms."""
        self.queued.observe(times.queued)
        self.total.observe(times.total)
        if times.first_token is not None:
            self.first_token.observe(times.first_token)
        if times.per_output_token is not None:
            self.per_output_token.observe(times.per_output_token)
