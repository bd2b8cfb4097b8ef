"""Saved states with the speculative sidecar, on the synthetic models: a conversation saved
after its first turn and loaded into a new context continues exactly as the uninterrupted one,
in every mode; a state from another model, release or speculative setup is refused with the
difference named; a truncated or altered one is refused, never a crash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.mtp.test_speculation_composes import MODES, REPLY, TURNS, context_factory

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]


@pytest.mark.parametrize("mode", MODES)
def test_load_then_continue_equals_the_uninterrupted_conversation(
    runtime: Any, libs: Any, models: dict[str, Path], mode: str, tmp_path: Path
) -> None:
    with context_factory(runtime, libs, models, mode) as make:
        first = make()
        reply = first.generate(TURNS[0], max_tokens=REPLY)
        saved = first.save_state()
        first.save_state_file(tmp_path / "state.bin")
        follow = TURNS[0] + list(reply.tokens) + TURNS[1]
        uninterrupted = first.generate(follow, max_tokens=REPLY)
        for load in ("bytes", "file"):
            second = make()
            if load == "bytes":
                second.load_state(saved)
            else:
                second.load_state_file(tmp_path / "state.bin")
            resumed = second.generate(follow, max_tokens=REPLY)
            assert resumed.tokens == uninterrupted.tokens
            assert resumed.metrics.prompt_reuse == runtime.PromptReuse.KEPT
            assert resumed.metrics.decoded_prompt_tokens == len(TURNS[1]) + 1
    assert (tmp_path / "state.bin").read_bytes() == saved
    assert not (tmp_path / "state.bin.partial").exists()


def test_a_state_from_elsewhere_names_the_difference(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    from llama_bindings.runtime.state import SavedState

    with context_factory(runtime, libs, models, "draft-mtp") as make:
        ctx = make()
        ctx.generate(TURNS[0], max_tokens=4)
        saved = ctx.save_state()
    with context_factory(runtime, libs, models, "ngram-mod") as make:  # the same model
        with pytest.raises(runtime.LlamaStateError, match="another speculative"):
            make().load_state(saved)
    with runtime.Model(models["agree"], libs=libs) as other:  # another model
        with (
            runtime.Context(other, n_ctx=512) as ctx,
            pytest.raises(runtime.LlamaStateError, match="another model"),
        ):
            ctx.load_state(saved)
    parsed = SavedState.from_bytes(saved)
    elsewhere = dict(parsed.identity, llama_cpp={"release": "b1", "commit": "0" * 40})
    moved = SavedState(elsewhere, parsed.scope, parsed.held, parsed.target, parsed.draft).to_bytes()
    with context_factory(runtime, libs, models, "draft-mtp") as make:
        ctx = make()
        with pytest.raises(runtime.LlamaStateError, match=r"another llama\.cpp.*'b1'"):
            ctx.load_state(moved)
        with pytest.raises(runtime.LlamaStateError, match="tokens= differs"):
            ctx.load_state(saved, [1, 2, 3])
        ctx.load_state(saved, parsed.held[0])  # the right tokens, named: loads


@pytest.mark.parametrize("mode", ["none", "draft-mtp"])
def test_truncated_or_altered_states_raise(
    runtime: Any, libs: Any, models: dict[str, Path], mode: str
) -> None:
    with context_factory(runtime, libs, models, mode) as make:
        ctx = make()
        expected = ctx.generate(TURNS[0], max_tokens=REPLY)
        saved = ctx.save_state()
        altered = bytearray(saved)
        altered[len(saved) // 2] ^= 0xFF
        broken = {
            "truncated": saved[: len(saved) - 100],
            "header cut": saved[:20],
            "altered": bytes(altered),
            "padded": saved + b"\0",
            "another format": saved[:8] + b"\x09" + saved[9:],
            "garbage": b"LLBSTATE" + b"\xff" * 64,
        }
        for name, data in broken.items():
            with pytest.raises(runtime.LlamaStateError):
                ctx.load_state(data)
            assert name
        # the context still works, and a good state still loads into it
        ctx.load_state(saved)
        assert ctx.generate(TURNS[0], max_tokens=REPLY).tokens == expected.tokens
