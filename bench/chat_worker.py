"""One timed multi-turn chat on a real model, ours or llama-cpp-python's; prints one JSON line
(section "chat").

``python -m bench.chat_worker SPEC_JSON``: SPEC_JSON holds ``side`` (``ours`` or ``theirs``),
``model``, ``lib_dir``, ``n_ctx``, ``threads``, ``max_tokens`` (per reply), ``system`` (the
system prompt), ``questions`` (one user message per turn), ``warmup`` (a text: one 2-token
generation of it first, untimed), ``reuse_prefix`` and ``flash_attn`` (ours only; None: the
default) and ``speculative``: null (plain
decoding), for ours a list of :class:`llama_bindings.runtime.Strategy` fields plus ``draft_max``,
for theirs the arguments of ``LlamaPromptLookupDecoding``. Theirs needs its ``llama_cpp`` package
importable and ``LLAMA_CPP_LIB_PATH`` set (the caller's environment).

Each side keeps one context (theirs: one ``Llama``) for the whole chat and appends its own reply
to the messages after each turn. The clock runs from the first turn's call to the last turn's
return; each turn is also timed alone. Prompt tokens decoded per turn: ours
``GenerationMetrics.decoded_prompt_tokens``; theirs the size of the first ``Llama.eval`` of each
``Llama.generate`` call (the prompt's suffix after the prefix it kept; every later eval is one
step: the last sampled token and a draft), counted by wrapping ``eval`` and ``generate`` on the
instance.

Llama-cpp-python's ``gemma`` chat format drops a system message (Gemma has no system role);
llama.cpp's ``gemma`` template, ours, puts it at the start of the first user message, followed by
a blank line. Theirs gets that first user message written out the same way, so that both sides
decode the same prompt ids (recorded per turn and compared by the section).
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

from bench.realmodel_worker import SETTINGS, _theirs_settings


class _Lines(logging.Handler):
    """Keeps llama.cpp's log lines (ours routes them to the ``llama_bindings.llama_cpp`` logger)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _ours_decoding(spec: dict[str, Any]) -> Any:
    from llama_bindings.runtime import SpeculativeDecoding, Strategy

    given = spec["speculative"]
    if not given:
        return SpeculativeDecoding()
    return SpeculativeDecoding(
        strategies=tuple(Strategy(**s) for s in given["strategies"]),
        draft_token_max=given["draft_max"],
    )


def _ours_turn(result: Any, seconds: float) -> dict[str, Any]:
    m = result.metrics
    return {
        "seconds": seconds,
        "prompt_tokens": m.prompt_tokens,
        "decoded_prompt_tokens": m.decoded_prompt_tokens,
        "reused_prompt_tokens": m.reused_prompt_tokens,
        "prompt_reuse": m.prompt_reuse.value,
        "generated_tokens": m.generated_tokens,
        "steps": m.steps,
        "drafted_tokens": m.drafted_tokens,
        "accepted_tokens": m.accepted_tokens,
        "text": result.text,
        "finish_reason": result.finish_reason.value,
    }


def run_ours(spec: dict[str, Any]) -> dict[str, Any]:
    from llama_bindings.runtime import Context, Model

    log = _Lines()
    llama_log = logging.getLogger("llama_bindings.llama_cpp")
    llama_log.setLevel(logging.INFO)
    llama_log.addHandler(log)
    decoding = _ours_decoding(spec)
    n = spec["threads"]
    turns: list[dict[str, Any]] = []
    with Model(spec["model"], lib_dir=spec["lib_dir"]) as model:

        def context() -> Context:
            return Context(
                model, n_ctx=spec["n_ctx"], n_threads=n, n_threads_batch=n,
                flash_attn=spec.get("flash_attn"), speculative=decoding,
            )  # fmt: skip

        # the warm-up on a context of its own: n-gram strategies keep state per context
        with context() as warm:
            warm.generate(spec["warmup"], max_tokens=2)
        messages = [{"role": "system", "content": spec["system"]}]
        with context() as ctx:
            settings = ctx.settings
            start = time.perf_counter()
            for question in spec["questions"]:
                messages.append({"role": "user", "content": question})
                began = time.perf_counter()
                result = ctx.chat(
                    messages, template="gemma", max_tokens=spec["max_tokens"],
                    reuse_prefix=spec["reuse_prefix"],
                )  # fmt: skip
                turns.append(_ours_turn(result, time.perf_counter() - began))
                messages.append({"role": "assistant", "content": result.text})
            end = time.perf_counter()
        # untimed, after the chat: the prompt ids each turn's chat() decoded from
        prompts = [
            model.tokenize(
                model.apply_chat_template(messages[: 2 + 2 * i], template="gemma"),
                parse_special=True,
            )
            for i in range(len(turns))
        ]
    llama_log.removeHandler(log)
    flash = [line for line in log.lines if "Flash Attention" in line]
    return {
        "total_seconds": end - start,
        "turns": turns,
        "prompts": prompts,
        "settings": {
            **{k: settings.get(k) for k in SETTINGS},
            # llama.cpp resolves flash_attn "auto" when it creates the context; its log says how
            "flash_attn_resolved": flash[-1] if flash else None,
        },
    }


def _theirs_messages(system: str, question: str, first: bool) -> dict[str, str]:
    """A user message; the first one carries the system prompt as llama.cpp's gemma template
    writes it (theirs' gemma format drops system messages)."""
    return {"role": "user", "content": f"{system}\n\n{question}" if first else question}


def _theirs_turn(out: Any, seconds: float, prompt: list[int], evals: list[int]) -> dict[str, Any]:
    choice = out["choices"][0]
    steps = evals[1:]  # after the prompt's eval: one per step (the last token and a draft)
    return {
        "seconds": seconds,
        "prompt_tokens": len(prompt),
        "decoded_prompt_tokens": evals[0] if evals else 0,
        "reused_prompt_tokens": len(prompt) - (evals[0] if evals else 0),
        "generated_tokens": int(out["usage"]["completion_tokens"]),
        "steps": len(steps),
        "drafted_tokens": sum(steps) - len(steps),
        "text": choice["message"]["content"],
        "finish_reason": choice["finish_reason"],
    }


def run_theirs(spec: dict[str, Any]) -> dict[str, Any]:
    # by name: the package is on PYTHONPATH only in the worker (no stubs for the type checker)
    llama_cpp: Any = importlib.import_module("llama_cpp")
    speculative: Any = importlib.import_module("llama_cpp.llama_speculative")
    given = spec["speculative"]
    n = spec["threads"]
    # With a draft model its Llama computes every row's logits (its _logits_all) but sizes the
    # array it copies them into by the logits_all argument: n_batch rows unless it is True, so a
    # chat past n_batch tokens fails in Llama.eval (numpy cannot broadcast). logits_all=True,
    # what the draft model implies anyway, sizes it n_ctx rows; without a draft model False is
    # its default.
    llm = llama_cpp.Llama(
        spec["model"], chat_format="gemma", n_threads=n, n_threads_batch=n, n_ctx=spec["n_ctx"],
        verbose=False, logits_all=bool(given),
        draft_model=speculative.LlamaPromptLookupDecoding(**given) if given else None,
    )  # fmt: skip
    llm.create_completion(spec["warmup"], max_tokens=2, temperature=0.0)
    llm.reset()  # the chat starts from an empty context, as ours does
    prompts: list[list[int]] = []
    evals: list[list[int]] = []  # per generate call (one per turn): the size of each eval
    library_generate, library_eval = llm.generate, llm.eval

    def generate(prompt: Any, *args: Any, **kwargs: Any) -> Iterator[int]:
        prompts.append(list(prompt))
        evals.append([])
        yield from library_generate(prompt, *args, **kwargs)

    def counting_eval(batch: Any) -> None:
        library_eval(batch)
        evals[-1].append(len(batch))

    llm.generate, llm.eval = generate, counting_eval
    settings = _theirs_settings(llm, llama_cpp)
    messages: list[dict[str, str]] = []
    turns: list[dict[str, Any]] = []
    start = time.perf_counter()
    for i, question in enumerate(spec["questions"]):
        messages.append(_theirs_messages(spec["system"], question, i == 0))
        began = time.perf_counter()
        out = llm.create_chat_completion(messages, max_tokens=spec["max_tokens"], temperature=0.0)
        turns.append(_theirs_turn(out, time.perf_counter() - began, prompts[i], evals[i]))
        messages.append({"role": "assistant", "content": turns[-1]["text"]})
    end = time.perf_counter()
    return {"total_seconds": end - start, "turns": turns, "prompts": prompts, "settings": settings}


def main(argv: list[str]) -> int:
    spec: dict[str, Any] = json.loads(argv[0])
    record = run_ours(spec) if spec["side"] == "ours" else run_theirs(spec)
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
