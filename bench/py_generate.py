"""Greedy generation through llama-bindgen's runtime; prints one JSON line.

``python -m bench.py_generate MODEL PROMPT N_PREDICT N_THREADS N_CTX LIB_DIR DRAFT_MAX WARMUP``
(DRAFT_MAX > 0: speculative mode draft-mtp with that draft_token_max; WARMUP 1: one short
generation on the same context first, as upstream's drivers warm up before timing);
optional NO_ABORT_CALLBACK 1: a diagnostic variant that clears the runtime's abort callback (a
Python callback llama.cpp's CPU backend polls while computing a graph).
"""

from __future__ import annotations

import json
import sys
from typing import Any


def main(argv: list[str]) -> int:
    from llama_bindings.runtime import Context, Model, SpeculativeDecoding, SpeculativeMode

    path, prompt, n_predict, n_threads, n_ctx, lib_dir = argv[:6]
    draft_max, warmup = int(argv[6]), argv[7] == "1"
    no_abort_callback = len(argv) > 8 and argv[8] == "1"
    spec = (
        SpeculativeDecoding(SpeculativeMode.DRAFT_MTP, draft_token_max=draft_max)
        if draft_max > 0
        else SpeculativeDecoding()
    )
    with (
        Model(path, load_mtp=draft_max > 0, lib_dir=lib_dir) as model,
        Context(model, n_ctx=int(n_ctx), n_threads=int(n_threads), speculative=spec) as ctx,
    ):
        if no_abort_callback:
            ctx.llama.llama_set_abort_callback(ctx.handle, ctx.ffi.NULL, ctx.ffi.NULL)
        if warmup:
            ctx.generate(prompt, max_tokens=2)
        # the timed prompt decoded whole, as before prefix reuse became the default (the warm-up
        # ran the same prompt on this context)
        result = ctx.generate(prompt, max_tokens=int(n_predict), reuse_prefix=False)
    print(json.dumps(result_record(result)))
    return 0


def result_record(result: Any) -> dict[str, Any]:
    """What the bench reads from one ``GenerationResult``: its metrics and tokens."""
    m = result.metrics
    return {
        "generated_tokens": m.generated_tokens,
        "generation_seconds": m.generation_seconds,
        "tokens_per_second": m.tokens_per_second,
        "prompt_tokens": m.prompt_tokens,
        "drafted_tokens": m.drafted_tokens,
        "accepted_tokens": m.accepted_tokens,
        "steps": m.steps,
        "tokens": list(result.tokens),
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
