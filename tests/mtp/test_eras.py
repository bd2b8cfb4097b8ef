"""The runtime's paths for releases before ``load_mtp``, ``llama_model_n_layer_nextn`` and
draft backend sampling, exercised on the pinned bindings with the release facts switched off (the
real older releases run through `llama-bindgen compat`, which `.ci/run` runs on three tags)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.mtp.conftest import mtp_spec

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]


def test_the_nextn_count_without_its_function_reads_the_gguf_key(
    runtime: Any, libs: Any, models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = {}
    for kind in ("agree", "plain"):
        with runtime.Model(models[kind], libs=libs) as model:
            with_function = model.n_nextn_layers
            monkeypatch.setattr(runtime.model, "NEXTN_COUNT_FUNCTION", False)
            counts[kind] = (with_function, model.n_nextn_layers)
            monkeypatch.setattr(runtime.model, "NEXTN_COUNT_FUNCTION", True)
            assert model.metadata_value("no.such.key") is None
    assert counts == {"agree": (1, 1), "plain": (0, 0)}


def test_load_mtp_is_left_alone_where_the_release_has_no_such_field(
    runtime: Any, libs: Any, models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the field the runtime does not set it (such releases load NextN layers always);
    here the field exists and stays false, so the wrapper's own check refuses draft-mtp: the
    runtime neither wrote a field it must not have nor passed the refusal over."""
    monkeypatch.setattr(runtime.model, "LOAD_MTP_PARAM", False)  # Model reads it
    with runtime.Model(models["agree"], load_mtp=True, libs=libs) as model:
        with pytest.raises(runtime.LlamaUnsupportedError, match="load_mtp = true"):
            runtime.Context(model, n_ctx=128, speculative=mtp_spec(runtime))


def test_backend_sampling_defaults_to_the_releases_own(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    assert mtp_spec(runtime).backend_sampling is None
    with runtime.Model(models["agree"], load_mtp=True, libs=libs) as model:
        with runtime.Context(model, n_ctx=128, speculative=mtp_spec(runtime)) as ctx:
            result = ctx.generate([10, 11, 12], max_tokens=8)
    # the pinned tree samples drafts on the backend by default (llama.cpp's default there)
    assert result.metrics.drafts > 0
    assert result.metrics.backend_sampled_drafts == result.metrics.drafts


def test_strategy_support_names_what_the_libraries_refuse(runtime: Any, libs: Any) -> None:
    """The pinned libraries run every strategy (the reasons of a release that lacks one are
    tests/native/test_strategy_table.py's)."""
    for mode in runtime.SpeculativeMode:
        if mode is not runtime.SpeculativeMode.NONE:
            assert runtime.strategy_support(mode, libs) is None, mode
    assert runtime.strategy_support("draft-eagle3", libs) is None
    with pytest.raises(ValueError):
        runtime.strategy_support("none", libs)
