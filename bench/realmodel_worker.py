"""One timed greedy generation on a real model, ours or llama-cpp-python's; prints one JSON line
(section "realmodel").

``python -m bench.realmodel_worker SPEC_JSON``: SPEC_JSON holds ``side`` (``ours`` or
``theirs``), ``model``, ``lib_dir``, ``prompt`` (text), ``n`` (tokens to generate), ``n_ctx``,
``n_batch``, ``threads``, ``flash_attn`` (``"on"`` or ``"off"``), ``warmup`` (a text: one 2-token
generation of it first, untimed) and ``speculative``: null (plain decoding), for ours a list of
:class:`llama_bindings.runtime.Strategy` fields plus ``draft_max``, for theirs the arguments of
``LlamaPromptLookupDecoding``. Theirs needs its ``llama_cpp`` package importable and
``LLAMA_CPP_LIB_PATH`` set (the caller's environment).

Both sides are timed the same way: the call (``Context.generate``, ``Llama.create_completion``)
starts the clock; prompt processing ends when the prompt's decode returns (ours: where
``GenerationMetrics.generation_seconds`` starts; theirs: the return of the first ``Llama.eval``,
the prompt's); generation runs from there to the last token handed over, each token stamped as the
library hands it to the caller (ours: ``on_token``; theirs: ``Llama.generate``, which
``create_completion`` iterates). Theirs' ``generate`` and ``eval`` are wrapped on the instance to
stamp and count. With speculation ours decodes the prompt's last token with the first draft (as
upstream's drivers do), so that token counts in its generation, not its prompt.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections.abc import Iterator
from typing import Any


def _timing(
    start: float, prompt_done: float, stamps: list[float], end: float, n_prompt: int
) -> dict[str, Any]:
    """Prompt: from the call to the end of the prompt's decode; generation: from there to the last
    token handed over (the first token's sample included)."""
    prompt_s = prompt_done - start
    gen_s = (stamps[-1] if stamps else end) - prompt_done
    n = len(stamps)
    return {
        "prompt_tokens": n_prompt,
        "prompt_seconds": prompt_s,
        "prompt_tokens_per_second": n_prompt / prompt_s if prompt_s > 0 else 0.0,
        "generated_tokens": n,
        "generation_seconds": gen_s,
        "tokens_per_second": n / gen_s if gen_s > 0 else 0.0,
        # the whole call, prompt included, to the return of the result
        "call_seconds": end - start,
        "first_token_seconds": stamps[0] - start if stamps else None,
    }


def run_ours(spec: dict[str, Any]) -> dict[str, Any]:
    from llama_bindings.runtime import (
        TAIL_TOKEN,
        Context,
        Model,
        SpeculativeDecoding,
        Strategy,
    )

    given = spec["speculative"]
    decoding = (
        SpeculativeDecoding(
            strategies=tuple(Strategy(**s) for s in given["strategies"]),
            draft_token_max=given["draft_max"],
        )
        if given
        else SpeculativeDecoding()
    )
    stamps: list[float] = []

    def on_token(token: int, piece: str) -> None:
        if token != TAIL_TOKEN:
            stamps.append(time.perf_counter())

    with Model(spec["model"], lib_dir=spec["lib_dir"]) as model:

        def context() -> Context:
            return Context(
                model, n_ctx=spec["n_ctx"], n_batch=spec["n_batch"], n_threads=spec["threads"],
                n_threads_batch=spec["threads"], flash_attn=spec["flash_attn"],
                speculative=decoding,
            )  # fmt: skip

        # the warm-up on a context of its own: n-gram strategies keep state per context
        with context() as warm:
            warm.generate(spec["warmup"], max_tokens=2)
        prompt_tokens = model.tokenize(spec["prompt"])
        with context() as ctx:
            settings = ctx.settings
            start = time.perf_counter()
            result = ctx.generate(spec["prompt"], max_tokens=spec["n"], on_token=on_token)
            end = time.perf_counter()
    m = result.metrics
    return {
        # the end of the prompt's decode: GenerationMetrics.generation_seconds runs from there to
        # the result, made just before generate() returns
        **_timing(start, end - m.generation_seconds, stamps, end, len(prompt_tokens)),
        "prompt": prompt_tokens,
        "tokens": list(result.tokens),
        "text": result.text,
        "finish_reason": result.finish_reason.value,
        "settings": {k: settings.get(k) for k in SETTINGS},
        "own_metrics": {
            "prompt_seconds": m.prompt_seconds,
            "tokens_per_second": m.tokens_per_second,
            "steps": m.steps,
            "drafted_tokens": m.drafted_tokens,
            "accepted_tokens": m.accepted_tokens,
        },
    }


# the context parameters both sides report
SETTINGS = (
    "n_ctx", "n_batch", "n_ubatch", "n_threads", "n_threads_batch", "flash_attn_type",
    "swa_full", "type_k", "type_v",
)  # fmt: skip


def _theirs_settings(llm: Any, llama_cpp: Any) -> dict[str, Any]:
    """The same fields as ours, read from llama-cpp-python's context parameters and context."""
    p, ctx = llm.context_params, llm.ctx
    fa = {
        llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED: "on",
        llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED: "off",
        llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO: "auto",
    }
    ggml_types = {1: "f16", 0: "f32", 8: "q8_0", 2: "q4_0"}
    return {
        "n_ctx": int(llama_cpp.llama_n_ctx(ctx)),
        "n_batch": int(llama_cpp.llama_n_batch(ctx)),
        "n_ubatch": int(llama_cpp.llama_n_ubatch(ctx)),
        "n_threads": int(p.n_threads),
        "n_threads_batch": int(p.n_threads_batch),
        "flash_attn_type": fa.get(int(p.flash_attn_type), int(p.flash_attn_type)),
        "swa_full": bool(p.swa_full),
        "type_k": ggml_types.get(int(p.type_k), int(p.type_k)),
        "type_v": ggml_types.get(int(p.type_v), int(p.type_v)),
    }


def run_theirs(spec: dict[str, Any]) -> dict[str, Any]:
    # by name: the package is on PYTHONPATH only in the worker (no stubs for the type checker)
    llama_cpp: Any = importlib.import_module("llama_cpp")
    speculative: Any = importlib.import_module("llama_cpp.llama_speculative")
    Llama, LlamaPromptLookupDecoding = llama_cpp.Llama, speculative.LlamaPromptLookupDecoding

    given = spec["speculative"]
    llm = Llama(
        spec["model"], n_ctx=spec["n_ctx"], n_batch=spec["n_batch"], n_ubatch=spec["n_batch"],
        n_threads=spec["threads"], n_threads_batch=spec["threads"],
        flash_attn=spec["flash_attn"] == "on", verbose=False,
        draft_model=LlamaPromptLookupDecoding(**given) if given else None,
    )  # fmt: skip
    llm.create_completion(spec["warmup"], max_tokens=2, temperature=0.0)
    llm.reset()  # the timed prompt is decoded whole, not after a reused prefix
    stamps: list[float] = []
    tokens: list[int] = []
    prompts: list[list[int]] = []
    evals: list[tuple[int, float]] = []  # (tokens, the time it returned) per eval
    library_generate, library_eval = llm.generate, llm.eval

    def generate(prompt: Any, *args: Any, **kwargs: Any) -> Iterator[int]:
        prompts.append(list(prompt))
        for token in library_generate(prompt, *args, **kwargs):
            stamps.append(time.perf_counter())
            tokens.append(token)
            yield token

    def counting_eval(batch: Any) -> None:
        library_eval(batch)
        evals.append((len(batch), time.perf_counter()))

    llm.generate = generate
    llm.eval = counting_eval
    settings = _theirs_settings(llm, llama_cpp)
    start = time.perf_counter()
    out: Any = llm.create_completion(spec["prompt"], max_tokens=spec["n"], temperature=0.0)
    end = time.perf_counter()
    choice = out["choices"][0]
    n = int(out["usage"]["completion_tokens"])
    # the first eval is the prompt's; each one after it is a target decode step (the last token
    # and the draft after it)
    steps = [size for size, _ in evals[1:]]
    return {
        **_timing(start, evals[0][1], stamps[:n], end, len(prompts[0])),
        "prompt": prompts[0],
        "tokens": tokens[:n],
        "text": choice["text"],
        "finish_reason": choice["finish_reason"],
        "settings": settings,
        "own_metrics": {
            "steps": len(steps),
            # tokens verified beyond the one sampled token of each step
            "drafted_tokens": sum(steps) - len(steps),
        },
    }


def main(argv: list[str]) -> int:
    spec: dict[str, Any] = json.loads(argv[0])
    record = run_ours(spec) if spec["side"] == "ours" else run_theirs(spec)
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
