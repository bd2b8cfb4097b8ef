"""Gemma 3 270M Q4_K_M split over this machine's CPU and two RPC workers (the host build's, on
loopback) generates the tokens of the local run. Both load without ggml's repacked CPU weight
layouts (``use_extra_bufts=False``): a worker's CPU device keeps the file's layout, so a local
run with them computes the quantized matrices differently and may pick other greedy tokens
(on b11549 it did for this prompt continued to 48 tokens); without them, split and local
agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.mtp.conftest import rpc_servers

__all__ = ["rpc_servers"]  # the workers of tests/mtp

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

PROMPT = "The lighthouse on Gull Point had been dark for eleven years when"


def _generate(runtime: Any, libs: Any, model: Path, **options: Any) -> list[int]:
    with runtime.Model(model, libs=libs, use_extra_bufts=False, **options) as loaded:
        with runtime.Context(loaded, n_ctx=512) as ctx:
            return list(ctx.generate(PROMPT, max_tokens=32).tokens)


def test_gemma_split_over_two_workers_generates_the_local_tokens(
    runtime: Any, libs: Any, gemma_model: Path, rpc_servers: list[str]
) -> None:
    local = _generate(runtime, libs, gemma_model)
    # the last 12 of its 18 layers and the output on the workers, half each
    split = _generate(
        runtime, libs, gemma_model, rpc_servers=rpc_servers, n_gpu_layers=12,
        tensor_split=[1.0, 1.0],
    )  # fmt: skip
    assert len(local) == 32 and split == local
