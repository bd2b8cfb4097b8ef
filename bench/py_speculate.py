"""Greedy generation through llama-bindgen's runtime with any speculative strategies; prints one
JSON line (section "strategies").

``python -m bench.py_speculate SPEC_JSON``: SPEC_JSON holds ``model``, ``prompt`` (token ids),
``n`` (tokens to generate), ``threads``, ``n_ctx``, ``lib_dir``, ``draft_max``, ``strategies``
(a list of objects: ``kind`` and optional :class:`llama_bindings.runtime.Strategy` fields; empty:
plain decoding), ``draft_model`` (a path or null: draft-simple's, draft-eagle3's, draft-dflash's or
draft-dspark's draft, opened on the target's libraries) and ``warmup`` (one 2-token
generation first, on another context with the same options, closed before the timed one is made).
"""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack
from typing import Any

from bench.py_generate import result_record


def main(argv: list[str]) -> int:
    from llama_bindings.runtime import Context, Model, SpeculativeDecoding, Strategy

    spec: dict[str, Any] = json.loads(argv[0])
    strategies = tuple(Strategy(**s) for s in spec["strategies"])
    kinds = [s.kind.value for s in strategies]
    with ExitStack() as stack:
        model = stack.enter_context(
            Model(spec["model"], load_mtp="draft-mtp" in kinds, lib_dir=spec["lib_dir"])
        )
        draft = None
        if spec.get("draft_model"):
            draft = stack.enter_context(Model(spec["draft_model"], libs=model.libs))
        decoding = (
            SpeculativeDecoding(
                strategies=strategies, draft_model=draft, draft_token_max=spec["draft_max"]
            )
            if strategies
            else SpeculativeDecoding()
        )

        def context() -> Context:
            return Context(
                model, n_ctx=spec["n_ctx"], n_threads=spec["threads"], speculative=decoding
            )

        if spec.get("warmup"):
            # on a context of its own: a strategy's state (ngram-map-k's map, for one) lives as
            # long as its context, and would otherwise carry the warm-up into the timed run
            with context() as warm:
                warm.generate(spec["prompt"], max_tokens=2)
        ctx = stack.enter_context(context())
        result = ctx.generate(spec["prompt"], max_tokens=spec["n"])
    per_strategy = [s.as_dict() for s in result.metrics.strategies]
    print(json.dumps({**result_record(result), "strategies": per_strategy}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
