"""Closing a model or a context, in every order, never touches freed memory.

Each case runs in a process of its own (``tests.bindings_process``): a signal (an abort, a
segfault) fails the test instead of taking pytest down. Each case prints what it observed; the
test asserts it. Every method and property of a closed object raises ``LlamaClosedError``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from generator.native.build import BuildResult
from tests.bindings_process import run_json
from tests.mtp.conftest import BINDINGS_PARENT

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

# Shared by every case: the libraries, the models (argv: lib dir, model, MTP model), and
# ``outcome(fn)``: the name of the exception fn raises ("ok" when it returns).
PREAMBLE = """
import gc, json, sys, threading
import llama_bindings
from llama_bindings import runtime as rt
libs = llama_bindings.load(sys.argv[1])
MODEL, MTP_MODEL = sys.argv[2], sys.argv[3]
seen = {}
def outcome(fn):
    try:
        fn()
    except Exception as exc:
        return type(exc).__name__
    return "ok"
"""

MODEL_SURFACE = """
def model_surface(m):
    return {
        "handle": outcome(lambda: m.handle), "vocab": outcome(lambda: m.vocab),
        "n_vocab": outcome(lambda: m.n_vocab), "tokenize": outcome(lambda: m.tokenize("a b")),
        "token_bytes": outcome(lambda: m.token_bytes(1)),
        "detokenize": outcome(lambda: m.detokenize([])),
        "is_end_of_generation": outcome(lambda: m.is_end_of_generation(1)),
        "chat_template": outcome(lambda: m.chat_template),
        "apply_chat_template": outcome(
            lambda: m.apply_chat_template([{"role": "user", "content": "hi"}], template="chatml")
        ),
        "metadata_value": outcome(lambda: m.metadata_value("general.architecture")),
        "n_nextn_layers": outcome(lambda: m.n_nextn_layers),
        "enter": outcome(lambda: m.__enter__()),
    }
def context_surface(c):
    return {
        "handle": outcome(lambda: c.handle), "n_ctx": outcome(lambda: c.n_ctx),
        "settings": outcome(lambda: c.settings), "mtp_enabled": outcome(lambda: c.mtp_enabled),
        "generate": outcome(lambda: c.generate([3, 4], max_tokens=2)),
        "stream": outcome(lambda: list(c.stream([3, 4], max_tokens=2))),
        "chat": outcome(lambda: c.chat([{"role": "user", "content": "hi"}], template="chatml")),
        "save_state": outcome(lambda: c.save_state()),
        "load_state": outcome(lambda: c.load_state(b"", [])),
        "enter": outcome(lambda: c.__enter__()),
    }
"""

CASES = {
    "model closed under a live context": """
m = rt.Model(MODEL, libs=libs)
c = rt.Context(m, n_ctx=128)
c.generate([3, 4], max_tokens=2)
m.close()
m.close()  # a second close does nothing
seen["model"] = model_surface(m)
seen["context"] = context_surface(c)
seen["closed"] = [m.closed, c.closed]
c.close()
""",
    "context closed, model still usable": """
m = rt.Model(MODEL, libs=libs)
c = rt.Context(m, n_ctx=128)
c.close()
seen["context"] = context_surface(c)
seen["model_still"] = outcome(lambda: m.tokenize("a b"))
c2 = rt.Context(m, n_ctx=128)
seen["new_context"] = outcome(lambda: c2.generate([3, 4], max_tokens=2))
m.close()
""",
    "model closed while a stream is open": """
m = rt.Model(MODEL, libs=libs)
c = rt.Context(m, n_ctx=128)
s = c.stream([3, 4], max_tokens=16)
next(s)
m.close()
seen["next_piece"] = outcome(lambda: next(s))
seen["stream_close"] = outcome(s.close)
""",
    "context closed from on_token": """
m = rt.Model(MODEL, libs=libs)
c = rt.Context(m, n_ctx=128)
closing = lambda token, piece: c.close()
seen["generate"] = outcome(lambda: c.generate([3, 4], max_tokens=8, on_token=closing))
seen["model_still"] = outcome(lambda: m.n_vocab)
m.close()
""",
    "close from another thread during a step is refused": """
m = rt.Model(MODEL, libs=libs)
c = rt.Context(m, n_ctx=128)
refused = []
def on_token(token, piece):
    t = threading.Thread(target=lambda: refused.append(outcome(m.close)))
    t.start()
    t.join()
result = c.generate([3, 4], max_tokens=3, on_token=on_token)
seen["refused"] = sorted(set(refused))
seen["tokens"] = len(result.tokens)
m.close()
seen["after"] = outcome(lambda: c.n_ctx)
""",
    "draft model closed under its speculative context": """
m = rt.Model(MODEL, libs=libs)
d = rt.Model(MODEL, libs=libs)
spec = rt.SpeculativeDecoding(strategies=("draft-simple",), draft_model=d)
c = rt.Context(m, n_ctx=128, speculative=spec)
c.generate([3, 4], max_tokens=4)
d.close()
seen["context"] = context_surface(c)
seen["target_still"] = outcome(lambda: m.tokenize("a"))
m.close()
""",
    "model closed under an MTP context": """
m = rt.Model(MTP_MODEL, libs=libs, load_mtp=True)
c = rt.Context(m, n_ctx=128, speculative=rt.SpeculativeDecoding("draft-mtp"))
c.generate([3, 4], max_tokens=4)
m.close()
seen["context"] = context_surface(c)
""",
    "objects left to the collector and to the exit": """
m = rt.Model(MODEL, libs=libs)
c = rt.Context(m, n_ctx=128)
c.generate([3, 4], max_tokens=2)
del m, c
gc.collect()
kept_model = rt.Model(MODEL, libs=libs)
kept = rt.Context(kept_model, n_ctx=128, speculative=rt.SpeculativeDecoding("ngram-simple"))
kept.generate([3, 4, 3, 4], max_tokens=4)
seen["left_open"] = True  # freed at exit, contexts first
""",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_lifetime(case: str, host_build: BuildResult, models: dict[str, Path]) -> None:
    code = PREAMBLE + MODEL_SURFACE + CASES[case] + "\nprint(json.dumps(seen))\n"
    seen: dict[str, Any] = run_json(
        code, BINDINGS_PARENT, str(host_build.lib_dir), str(models["plain"]), str(models["agree"])
    )
    check = EXPECTED[case]
    check(seen)


def _all_closed(surface: dict[str, str]) -> None:
    assert surface and set(surface.values()) == {"LlamaClosedError"}, surface


def _model_closed_under_context(seen: dict[str, Any]) -> None:
    _all_closed(seen["model"])
    _all_closed(seen["context"])
    assert seen["closed"] == [True, True]


def _context_closed(seen: dict[str, Any]) -> None:
    _all_closed(seen["context"])
    assert seen["model_still"] == "ok" and seen["new_context"] == "ok"


def _stream(seen: dict[str, Any]) -> None:
    assert seen == {"next_piece": "LlamaClosedError", "stream_close": "ok"}


def _on_token(seen: dict[str, Any]) -> None:
    assert seen == {"generate": "LlamaClosedError", "model_still": "ok"}


def _other_thread(seen: dict[str, Any]) -> None:
    assert seen == {"refused": ["LlamaRuntimeError"], "tokens": 3, "after": "LlamaClosedError"}


def _draft(seen: dict[str, Any]) -> None:
    _all_closed(seen["context"])
    assert seen["target_still"] == "ok"


def _mtp(seen: dict[str, Any]) -> None:
    _all_closed(seen["context"])


def _collector(seen: dict[str, Any]) -> None:
    assert seen == {"left_open": True}


EXPECTED = {
    "model closed under a live context": _model_closed_under_context,
    "context closed, model still usable": _context_closed,
    "model closed while a stream is open": _stream,
    "context closed from on_token": _on_token,
    "close from another thread during a step is refused": _other_thread,
    "draft model closed under its speculative context": _draft,
    "model closed under an MTP context": _mtp,
    "objects left to the collector and to the exit": _collector,
}
