"""What the runtime checks in Python before anything native runs: speculative options and
strategy mixes, sampling values, llama.cpp parameters, stop sequences and generation options,
log-probability counts. No library is built or loaded for these (tests/runtime/conftest.py)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest


def mtp_spec(runtime: Any, **options: Any) -> Any:
    return runtime.SpeculativeDecoding(runtime.SpeculativeMode.DRAFT_MTP, **options)


def test_speculative_options_are_validated(runtime: Any) -> None:
    with pytest.raises(ValueError, match="draft_token_max"):
        mtp_spec(runtime, draft_token_max=0)  # upstream reads 0 as unlimited
    with pytest.raises(ValueError, match="draft_token_min"):
        mtp_spec(runtime, draft_token_max=2, draft_token_min=3)
    with pytest.raises(ValueError, match="p_min"):
        mtp_spec(runtime, p_min=1.5)
    with pytest.raises(ValueError, match="draft_n_ctx"):
        mtp_spec(runtime, draft_n_ctx=-1)
    with pytest.raises(ValueError, match="not a strategy"):
        runtime.Strategy(runtime.SpeculativeMode.NONE)


def test_speculation_is_off_by_default(runtime: Any) -> None:
    default = runtime.SpeculativeDecoding()
    assert not default.enabled and default.kinds == () and default.strategies == ()
    one = mtp_spec(runtime)
    assert one.enabled and one.kinds == (runtime.SpeculativeMode.DRAFT_MTP,)
    assert one.strategies == (runtime.Strategy(runtime.SpeculativeMode.DRAFT_MTP),)


def test_mixes_are_checked_before_anything_native(runtime: Any, tmp_path: Path) -> None:
    sd, unsupported = runtime.SpeculativeDecoding, runtime.LlamaUnsupportedError
    with pytest.raises(unsupported, match="both need a draft context"):
        sd(strategies=("draft-mtp", "draft-simple"))
    with pytest.raises(ValueError, match="listed twice"):
        sd(strategies=("ngram-mod", runtime.Strategy("ngram-mod", n_match=8)))
    with pytest.raises(ValueError, match="needs a draft model"):
        sd(strategies=("draft-simple",))
    with pytest.raises(ValueError, match="either mode or strategies"):
        sd("draft-mtp", strategies=("ngram-mod",))
    with pytest.raises(ValueError, match="size_n"):
        runtime.Strategy("ngram-simple", size_n=0)
    with pytest.raises(ValueError, match="would never draft"):
        runtime.Strategy("ngram-simple", size_n=8, size_m=4)
    with pytest.raises(ValueError, match="mod_n_min"):
        runtime.Strategy("ngram-mod", mod_n_min=70, mod_n_max=64)
    with pytest.raises(ValueError, match="is for ngram-cache"):
        runtime.Strategy("ngram-mod", cache_static=tmp_path)
    with pytest.raises(FileNotFoundError):
        runtime.Strategy("ngram-cache", cache_static=tmp_path / "missing.lookup")
    with pytest.raises(ValueError):
        sd(strategies=("no-such-strategy",))
    assert sd(strategies=("ngram-mod", "draft-mtp")).kinds == (
        runtime.SpeculativeMode.NGRAM_MOD,
        runtime.SpeculativeMode.DRAFT_MTP,
    )


def test_a_draft_model_without_draft_simple_is_refused(runtime: Any) -> None:
    stand_in = object()  # checked before the draft model is used in any way
    with pytest.raises(ValueError, match="no strategy uses it"):
        runtime.SpeculativeDecoding(strategies=("ngram-mod",), draft_model=stand_in)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", -0.1),
        ("temperature", math.nan),
        ("top_k", -1),
        ("top_k", 1.5),
        ("top_p", 0.0),
        ("top_p", 1.5),
        ("min_p", -0.5),
        ("typical_p", 2.0),
        ("repeat_penalty", 0.0),
        ("frequency_penalty", math.inf),
        ("presence_penalty", "1"),
        ("penalty_last_n", -2),
        ("seed", -1),
        ("seed", 0xFFFFFFFF),
        ("logit_bias", {-1: 1.0}),
        ("logit_bias", {3: math.nan}),
        ("logit_bias", [(3, 1.0)]),
    ],
)
def test_sampling_values_are_checked(runtime: Any, field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=re.escape(f"Sampling.{field} ")):
        runtime.Sampling(**{field: value})


def test_sampling_defaults_are_greedy_and_the_bias_is_frozen(runtime: Any) -> None:
    sampling = runtime.Sampling()
    assert sampling.greedy and not sampling.penalized
    bias = {3: -math.inf}
    biased = runtime.Sampling(temperature=0.5, repeat_penalty=1.1, logit_bias=bias)
    bias[4] = 1.0  # the caller's dict is copied
    assert not biased.greedy and biased.penalized and dict(biased.logit_bias) == {3: -math.inf}
    with pytest.raises(TypeError):
        biased.logit_bias[5] = 1.0


def test_bad_rope_scaling_is_refused(runtime: Any) -> None:
    with pytest.raises(ValueError, match="freq_base must be a finite number > 0"):
        runtime.RopeScaling(freq_base=-1.0)
    with pytest.raises(ValueError, match="yarn_beta_fast must be a finite number >= 0"):
        runtime.RopeScaling(yarn_beta_fast=float("nan"))
    with pytest.raises(ValueError, match="yarn_orig_ctx must be an int >= 0"):
        runtime.RopeScaling(yarn_orig_ctx=-3)


def test_counts_and_flags_are_checked(runtime: Any) -> None:
    runtime.check_count(None, "n_ctx", 0)
    runtime.check_count(0, "n_ctx", 0)
    for bad in (-1, True, 1.0, "8"):
        with pytest.raises(ValueError, match=r"n_ctx must be an int >= 0"):
            runtime.check_count(bad, "n_ctx", 0)
    runtime.check_flag(None, "swa_full")
    runtime.check_flag(False, "swa_full")
    with pytest.raises(TypeError, match="swa_full must be True, False or None"):
        runtime.check_flag(1, "swa_full")


def test_model_arguments_are_checked_before_any_library_is_loaded(
    runtime: Any, tmp_path: Path
) -> None:
    """The file and the counts are checked first: these raise without a library to load."""
    with pytest.raises(FileNotFoundError, match="does not exist"):
        runtime.Model(tmp_path / "missing.gguf")
    with pytest.raises(FileNotFoundError, match="is not a file"):
        runtime.Model(tmp_path)
    model_file = tmp_path / "model.gguf"
    model_file.write_bytes(b"")
    with pytest.raises(ValueError, match="n_gpu_layers must be an int >= -1"):
        runtime.Model(model_file, n_gpu_layers=-2)
    with pytest.raises(ValueError, match="main_gpu must be an int >= 0"):
        runtime.Model(model_file, main_gpu=-1)
    with pytest.raises(TypeError, match="use_extra_bufts must be True, False or None"):
        runtime.Model(model_file, use_extra_bufts="yes")


def test_stop_sequences(runtime: Any) -> None:
    from llama_bindings.runtime.generation import stop_sequences

    assert stop_sequences(None) == ()
    assert stop_sequences("\n\n") == ("\n\n",)  # one sequence, never its characters
    assert stop_sequences(["a", "bc"]) == ("a", "bc")
    assert stop_sequences(("a",)) == ("a",)
    with pytest.raises(TypeError, match="got int 3 in it"):
        stop_sequences(["a", 3])
    for bad in (b"stop", 3, {"a"}):
        with pytest.raises(TypeError, match="stop= takes a string or a sequence of strings"):
            stop_sequences(bad)


def test_sampling_options_of_a_generation(runtime: Any) -> None:
    from llama_bindings.runtime import generation

    def sampling_of(sampler: Any = None, **options: Any) -> Any:
        return generation.sampling_of(runtime.GenerateOptions(**options), sampler)

    assert sampling_of() == runtime.Sampling()
    assert sampling_of(temperature=0.5, seed=3) == runtime.Sampling(temperature=0.5, seed=3)
    given = runtime.Sampling(top_k=5)
    assert sampling_of(sampling=given) is given
    assert sampling_of(object()) is None  # a caller's own chain
    with pytest.raises(ValueError, match="give temperature in sampling="):
        sampling_of(sampling=given, temperature=0.5)
    with pytest.raises(ValueError, match="sampler= is a whole llama_sampler chain"):
        sampling_of(object(), grammar="root ::= [a]")
    with pytest.raises(ValueError, match=r"Sampling\.top_k"):
        sampling_of(top_k=-1)


def test_logprob_counts_and_vectors(runtime: Any) -> None:
    assert runtime.check_top(None) is None
    assert runtime.check_top(0) == 0 and runtime.check_top(5) == 5
    for bad in (-1, True, 1.5, "2"):
        with pytest.raises(ValueError, match="logprobs must be None or an int >= 0"):
            runtime.check_top(bad)
    assert runtime.normalized([3.0, 4.0]) == [0.6, 0.8]
    assert runtime.normalized([0.0, 0.0]) == [0.0, 0.0]
    logprob = runtime.TokenLogprob(7, -0.5, ((7, -0.5), (9, -1.5)))
    piece = runtime.TextPiece("ab", (logprob,))
    assert piece == "ab" and isinstance(piece, str) and piece.logprobs == (logprob,)


def test_metrics_and_results_without_a_generation(runtime: Any) -> None:
    kind = runtime.SpeculativeMode.DRAFT_MTP
    strategy = runtime.StrategyMetrics(kind, drafts=2, drafted_tokens=4, accepted_tokens=3)
    metrics = runtime.GenerationMetrics(
        llama_cpp_tag=runtime.LLAMA_CPP_TAG, mtp=True, prompt_tokens=3, generated_tokens=8,
        drafted_tokens=4, accepted_tokens=3, steps=5, prompt_seconds=0.1,
        generation_seconds=2.0, strategies=(strategy,),
    )  # fmt: skip
    assert metrics.acceptance_rate == 0.75 and metrics.tokens_per_second == 4.0
    assert metrics.as_dict()["strategies"] == [strategy.as_dict()]
    assert strategy.as_dict()["kind"] == kind.value
    idle = runtime.GenerationMetrics(runtime.LLAMA_CPP_TAG, False, 1, 0, 0, 0, 0, 0.0, 0.0)
    assert idle.acceptance_rate == 0.0 and idle.tokens_per_second == 0.0
    cancel = runtime.Cancellation()
    assert not cancel.cancelled
    cancel.cancel()
    assert cancel.cancelled
    assert runtime.FinishReason("eog") is runtime.FinishReason.END_OF_GENERATION


def test_the_default_draft_length_is_the_wrappers(runtime: Any) -> None:
    from llama_bindings import constants

    assert runtime.SpeculativeDecoding().draft_token_max == constants.LLAMA_MTP_DRAFT_DEFAULT
    assert mtp_spec(runtime).draft_token_max == constants.LLAMA_MTP_DRAFT_DEFAULT
    assert 1 <= constants.LLAMA_MTP_DRAFT_DEFAULT <= constants.LLAMA_MTP_DRAFT_MAX


class _RefusingWrapper:
    """A wrapper whose llama_mtp_create returns ``status`` (the sidecar's other calls succeed)."""

    def __init__(self, constants: Any, status: int) -> None:
        self.constants, self.status = constants, status

    def llama_mtp_default_params(self, params: Any) -> int:
        return int(self.constants.LLAMA_MTP_STATUS_OK)

    def llama_mtp_create(self, ctx: Any, params: Any, out: Any) -> int:
        return self.status

    def llama_mtp_last_error(self) -> Any:
        from llama_bindings._ffi import ffi

        return ffi.new("char[]", b"ngram-cache is not in this llama.cpp release")


def test_a_strategy_not_in_the_release_is_unsupported_not_a_failure(runtime: Any) -> None:
    """LLAMA_MTP_STATUS_NOT_IN_RELEASE from llama_mtp_create is LlamaUnsupportedError (with the
    wrapper's message), as every "cannot run here" status; another failure stays a runtime
    error."""
    from llama_bindings import constants
    from llama_bindings._ffi import ffi
    from llama_bindings.runtime import speculative

    refused = speculative.refused_statuses()
    assert constants.LLAMA_MTP_STATUS_NOT_IN_RELEASE in refused
    assert constants.LLAMA_MTP_STATUS_OK not in refused

    class _Target:
        pointer = ffi.NULL

    for status, error in (
        (constants.LLAMA_MTP_STATUS_NOT_IN_RELEASE, runtime.LlamaUnsupportedError),
        (constants.LLAMA_MTP_STATUS_INTERNAL_ERROR, runtime.LlamaRuntimeError),
    ):
        wrapper = _RefusingWrapper(constants, status)
        with pytest.raises(error, match="not in this llama"):
            speculative.Sidecar(wrapper, ffi, _Target(), mtp_spec(runtime))
