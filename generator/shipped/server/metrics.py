"""The server's Prometheus metrics (``/metrics``), in a registry of its own: requests by endpoint
and status, and, read from the slots at each scrape, the queue, the busy slots, tokens, and
drafted and accepted tokens per slot and per speculative strategy."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..runtime import Slots


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


class ServerMetrics:
    """The registry ``/metrics`` shows, and the request counter the app counts in."""

    def __init__(self, slots: Slots) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(SlotsCollector(slots))
        self.requests = Counter(
            "llama_bindings_http_requests", "HTTP requests answered",
            ["endpoint", "status"], registry=self.registry,
        )  # fmt: skip
