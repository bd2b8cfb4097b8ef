"""LoRA adapters and control vectors on the synthetic qwen35 models (issue 39 item 6).

The adapters are written here with the ``gguf`` package as llama.cpp's
``convert_lora_to_gguf.py`` lays them out (``general.type`` adapter, ``adapter.type`` lora,
``adapter.lora.alpha``, ``<weight>.lora_a`` of shape [rank, n_in] and ``<weight>.lora_b`` of
[n_out, rank] in numpy's order) for the trunk's ``output.weight``, whose row ``j`` is ``e[j - 1]``
(the trunk predicts ``tok + 1``). ``lora_a`` is the identity (rank = n_embd = alpha, so
llama.cpp's scale is the scale given) and ``lora_b`` the difference of two heads: the
adapter ``shift(k)`` at scale 1 turns the head that predicts ``tok + k - 1`` into the one that
predicts ``tok + k``. Expected outputs are therefore known exactly.
"""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from generator.native.build import BuildResult
from tests.bindings_process import run_json
from tests.mtp.conftest import BINDINGS_PARENT
from tests.mtp.test_lifetimes import PREAMBLE as LIFETIME_PREAMBLE

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

PROMPT = [10, 11, 12]
INVOCATION = [7, 8, 9]  # the test aLoRAs' invocation tokens
ALORA_PROMPT = [10, 11, 12, 7, 8, 9, 20, 21]  # they start at 3: the aLoRA applies from 2
BASE = (13, 14, 15, 16, 17, 18)  # the trunk's tok -> tok + 1


def _tensors(model: Path) -> dict[str, Any]:
    return {t.name: np.array(t.data) for t in gguf.GGUFReader(str(model)).tensors}


def write_lora(
    path: Path,
    tensors: dict[str, tuple[Any, Any]],
    *,
    arch: str = "qwen35",
    alpha: float | None = None,
    invocation: list[int] | None = None,
) -> Path:
    """A LoRA GGUF as convert_lora_to_gguf.py writes one: ``{weight: (lora_a, lora_b)}``."""
    writer = gguf.GGUFWriter(path, arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    if alpha is not None:
        writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
    if invocation is not None:
        writer.add_key_value(
            gguf.Keys.Adapter.ALORA_INVOCATION_TOKENS, invocation, gguf.GGUFValueType.ARRAY,
            sub_type=gguf.GGUFValueType.UINT32,
        )  # fmt: skip
    for name, (a, b) in tensors.items():
        writer.add_tensor(f"{name}.lora_a", np.asarray(a, dtype=np.float32))
        writer.add_tensor(f"{name}.lora_b", np.asarray(b, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def head_shift(model: Path, k: int) -> Any:
    """``lora_b`` that turns the head predicting ``tok + k - 1`` into the one for ``tok + k``."""
    head = _tensors(model)["output.weight"]  # (vocab, embd), row j = e[j - 1]
    return np.roll(head, k - 1, axis=0) - np.roll(head, k - 2, axis=0)


def shift_lora(path: Path, model: Path, k: int, **options: Any) -> Path:
    embd = _tensors(model)["output.weight"].shape[1]
    eye = np.eye(embd, dtype=np.float32)
    return write_lora(path, {"output.weight": (eye, head_shift(model, k))}, alpha=embd, **options)


@pytest.fixture(scope="module")
def loras(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("loras")
    plain = models["plain"]
    embd = _tensors(plain)["output.weight"].shape[1]
    eye = np.eye(embd, dtype=np.float32)
    shift2 = head_shift(plain, 2)
    lora = {
        "wrong_shape": {"output.weight": (eye[:, :32], shift2[:32])},
        "no_such_tensor": {"blk.9.ffn_up.weight": (eye, shift2)},
        "not_transposed": {"output.weight": (eye[:16], shift2[:, :8])},
    }
    written = {name: write_lora(folder / f"{name}.gguf", t) for name, t in lora.items()}
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((4, embd)) * 0.3, rng.standard_normal((32, 4)) * 0.3
    kv = {"blk.1.attn_v.weight": (a, b)}  # changes the cache, not only the head
    return {
        "shift2": shift_lora(folder / "shift2.gguf", plain, 2),
        "alora2": shift_lora(folder / "alora2.gguf", plain, 2, invocation=INVOCATION),
        "alora2_agree": shift_lora(
            folder / "alora2_agree.gguf", models["agree"], 2, invocation=INVOCATION
        ),
        "kv_alora": write_lora(folder / "kv_alora.gguf", kv, invocation=INVOCATION),
        "kv_lora": write_lora(folder / "kv_lora.gguf", kv),
        "shift3": shift_lora(folder / "shift3.gguf", plain, 3),
        "other_arch": shift_lora(folder / "other_arch.gguf", plain, 2, arch="llama"),
        **written,
    }


def test_output_follows_the_scale_and_clearing(
    runtime: Any, libs: Any, models: dict[str, Path], loras: dict[str, Path]
) -> None:
    with runtime.Model(models["plain"], libs=libs) as model, runtime.Context(model) as ctx:
        adapter = model.load_lora(loras["shift2"])
        assert ctx.generate(PROMPT, max_tokens=6).tokens == BASE
        ctx.set_loras({adapter: 1.0})
        assert ctx.loras == {adapter: 1.0}
        assert ctx.generate(PROMPT, max_tokens=6).tokens == (14, 16, 18, 20, 22, 24)
        ctx.set_loras({adapter: 0.0})
        assert ctx.generate(PROMPT, max_tokens=6).tokens == BASE
        ctx.set_loras({adapter: 2})
        assert ctx.generate(PROMPT, max_tokens=6).tokens == (14, 16, 18, 20, 22, 24)
        ctx.set_loras({})
        assert ctx.loras == {}
        assert ctx.generate(PROMPT, max_tokens=6).tokens == BASE


def test_two_adapters_combine(
    runtime: Any, libs: Any, models: dict[str, Path], loras: dict[str, Path]
) -> None:
    with runtime.Model(models["plain"], libs=libs) as model, runtime.Context(model) as ctx:
        two, three = model.load_lora(loras["shift2"]), model.load_lora(loras["shift3"])
        ctx.set_loras({two: 1.0, three: 1.0})  # +1 -> +2 -> +3
        assert ctx.generate(PROMPT, max_tokens=4).tokens == (15, 18, 21, 24)
        ctx.set_loras({two: 1.0})
        assert ctx.generate(PROMPT, max_tokens=4).tokens == (14, 16, 18, 20)


def test_metadata_and_alora_invocation_tokens(
    runtime: Any, libs: Any, models: dict[str, Path], loras: dict[str, Path]
) -> None:
    with runtime.Model(models["plain"], libs=libs) as model:
        adapter = model.load_lora(loras["alora2"])
        assert adapter.metadata["general.type"] == "adapter"
        assert adapter.metadata["adapter.type"] == "lora"
        assert adapter.metadata_value("general.architecture") == "qwen35"
        assert adapter.metadata_value("no.such.key") is None
        assert adapter.alpha == 64.0
        assert adapter.invocation_tokens == [7, 8, 9]
        assert model.load_lora(loras["shift3"]).invocation_tokens == []


def test_an_alora_applies_only_from_its_invocation_tokens(
    runtime: Any, libs: Any, models: dict[str, Path], loras: dict[str, Path]
) -> None:
    with runtime.Model(models["plain"], libs=libs) as model, runtime.Context(model) as ctx:
        ctx.set_loras({model.load_lora(loras["alora2"]): 1.0})
        assert ctx.generate(PROMPT, max_tokens=6).tokens == BASE  # no invocation: off
        assert ctx.generate(ALORA_PROMPT, max_tokens=4).tokens == (23, 25, 27, 29)  # on: +2
        assert ctx.generate(PROMPT, max_tokens=3).tokens == BASE[:3]  # off again


def _log_softmax(values: list[float]) -> list[float]:
    peak = max(values)
    total = peak + math.log(math.fsum(math.exp(x - peak) for x in values))
    return [x - total for x in values]


def _split_reference(runtime: Any, model: Any, adapter: Any, boundary: int) -> list[float]:
    """Log-probabilities after ALORA_PROMPT computed by hand: the tokens before ``boundary``
    decoded without the adapter, the rest with it (llama_set_adapters_lora between)."""
    llama, ffi = model.llama, model.ffi
    with runtime.Context(model, n_ctx=128) as ctx:
        for begin, end, on in ((0, boundary, False), (boundary, len(ALORA_PROMPT), True)):
            adapters = ffi.new("struct llama_adapter_lora *[1]", [adapter.handle])
            scales = ffi.new("float[1]", [1.0])
            assert llama.llama_set_adapters_lora(ctx.handle, adapters, 1 if on else 0, scales) == 0
            batch = llama.llama_batch_init(end - begin, 0, 1)
            fill = importlib.import_module("llama_bindings.runtime.session").fill_batch
            fill(batch, ALORA_PROMPT[begin:end], begin)
            assert llama.llama_decode(ctx.handle, batch) == 0
            llama.llama_batch_free(batch)
        logits = ffi.unpack(llama.llama_get_logits_ith(ctx.handle, -1), model.n_vocab)
    return _log_softmax(logits)


def test_an_alora_leaves_the_tokens_before_its_boundary_to_the_base_model(
    runtime: Any, libs: Any, models: dict[str, Path], loras: dict[str, Path]
) -> None:
    """With an aLoRA that changes the cache (on attn_v), the first token's log-probabilities
    equal a decode by hand with the adapter off before the boundary and on after, and differ
    from the same LoRA applied everywhere."""
    boundary = ALORA_PROMPT.index(INVOCATION[0]) - 1
    with runtime.Model(models["plain"], libs=libs) as model:
        alora, everywhere = model.load_lora(loras["kv_alora"]), model.load_lora(loras["kv_lora"])
        expected = _split_reference(runtime, model, alora, boundary)
        with runtime.Context(model, n_ctx=128) as ctx:
            ctx.set_loras({alora: 1.0})
            got = ctx.generate(ALORA_PROMPT, max_tokens=1, logprobs=4).logprobs[0]
            ctx.set_loras({everywhere: 1.0})
            plain = ctx.generate(ALORA_PROMPT, max_tokens=1, logprobs=4).logprobs[0]
    assert got.token == max(range(len(expected)), key=expected.__getitem__)
    for token, logprob in got.top:
        assert logprob == pytest.approx(expected[token], abs=1e-3)
    assert max(abs(a[1] - b[1]) for a, b in zip(got.top, plain.top, strict=True)) > 1e-3


def test_a_saved_state_loads_only_under_the_same_adapters(
    runtime: Any, libs: Any, models: dict[str, Path], loras: dict[str, Path]
) -> None:
    with runtime.Model(models["plain"], libs=libs) as model:
        two, three = model.load_lora(loras["shift2"]), model.load_lora(loras["shift3"])
        with runtime.Context(model) as ctx:
            ctx.set_loras({two: 1.0})
            first = ctx.generate(PROMPT, max_tokens=3)
            state = ctx.save_state()
        for loras_set, fits in (({two: 1.0}, True), ({three: 1.0}, False),
                                ({two: 0.5}, False), ({}, False)):  # fmt: skip
            with runtime.Context(model) as other:
                other.set_loras(loras_set)
                if fits:
                    other.load_state(state)
                    follow = other.generate([*PROMPT, *first.tokens], max_tokens=2)
                    assert follow.metrics.prompt_reuse.value == "kept"
                else:
                    with pytest.raises(runtime.LlamaStateError, match="LoRA adapters"):
                        other.load_state(state)
        with runtime.Context(model) as plain:
            bare = plain.save_state()
        with runtime.Context(model) as vector:
            vector.set_control_vector([0.5] * 64)
            with pytest.raises(runtime.LlamaStateError, match="control vector"):
                vector.load_state(bare)


def test_alora_misuse_is_refused(
    runtime: Any, libs: Any, models: dict[str, Path], loras: dict[str, Path]
) -> None:
    with runtime.Model(models["plain"], libs=libs) as model:
        with runtime.Context(model, n_seq_max=2) as ctx:
            ctx.set_loras({model.load_lora(loras["alora2"]): 1.0})
            with pytest.raises(runtime.LlamaUnsupportedError, match="does not run aLoRAs"):
                ctx.generate_batch([PROMPT, ALORA_PROMPT], max_tokens=2)
            ctx.set_loras({model.load_lora(loras["alora2"]): 1.0,
                           model.load_lora(loras["kv_alora"]): 1.0})  # fmt: skip
            with pytest.raises(runtime.LlamaUnsupportedError, match="more than one aLoRA"):
                ctx.generate(ALORA_PROMPT, max_tokens=2)


def test_the_cache_kept_across_an_alora_boundary_is_only_what_was_computed_alike(
    runtime: Any,
) -> None:
    memory = importlib.import_module("llama_bindings.runtime.session").SequenceMemory
    never = importlib.import_module("llama_bindings.runtime.adapters").ALORA_NEVER
    held = memory(tokens=list(range(10)), lora_from=4)
    assert held.reusable(9, 4) == 9  # the same boundary: all of it
    assert held.reusable(9, never) == 4  # the adapter off now: the part before its boundary
    assert held.reusable(9, 0) == 0  # an adapter everywhere now
    assert memory(tokens=[1, 2], lora_from=never).reusable(2, never) == 2


def test_speculation_with_an_alora_equals_plain_greedy(
    runtime: Any, libs: Any, models: dict[str, Path], loras: dict[str, Path]
) -> None:
    results = []
    for mode in (runtime.SpeculativeMode.NONE, runtime.SpeculativeMode.DRAFT_MTP):
        spec = runtime.SpeculativeDecoding(mode)
        load_mtp = mode != runtime.SpeculativeMode.NONE
        with runtime.Model(models["agree"], libs=libs, load_mtp=load_mtp) as model:
            with runtime.Context(model, speculative=spec) as ctx:
                ctx.set_loras({model.load_lora(loras["alora2_agree"]): 1.0})
                results.append([ctx.generate(p, max_tokens=8) for p in (ALORA_PROMPT, PROMPT)])
    (on, off), (fast_on, fast_off) = results
    assert fast_on.tokens == on.tokens and fast_off.tokens == off.tokens
    assert on.tokens != off.tokens[: len(on.tokens)]
    assert fast_on.metrics.accepted_tokens > 0


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("wrong_shape", "incorrect shape"),
        ("other_arch", "arch mismatch"),
        ("no_such_tensor", "does not exist in base model"),
        ("not_transposed", "incorrect shape|not transposed"),
    ],
)
def test_a_mismatched_adapter_is_refused(
    runtime: Any, libs: Any, models: dict[str, Path], loras: dict[str, Path], name: str, reason: str
) -> None:
    with runtime.Model(models["plain"], libs=libs) as model:
        with pytest.raises(runtime.LlamaLoadError, match=reason):
            model.load_lora(loras[name])
        assert model.n_vocab == 256  # the model is still usable


def test_adapters_are_checked_before_anything_native(
    runtime: Any, libs: Any, models: dict[str, Path], loras: dict[str, Path], tmp_path: Path
) -> None:
    with runtime.Model(models["plain"], libs=libs) as model, runtime.Context(model) as ctx:
        other = runtime.Model(models["plain"], libs=libs)
        foreign = other.load_lora(loras["shift2"])
        with pytest.raises(ValueError, match="another model"):
            ctx.set_loras({foreign: 1.0})
        adapter = model.load_lora(loras["shift2"])
        with pytest.raises(TypeError, match="LoraAdapter"):
            ctx.set_loras({"x.gguf": 1.0})
        with pytest.raises(TypeError, match="mapping"):
            ctx.set_loras([adapter])
        with pytest.raises(TypeError, match="number"):
            ctx.set_loras({adapter: "1"})
        with pytest.raises(ValueError, match="finite"):
            ctx.set_loras({adapter: float("nan")})
        with pytest.raises(FileNotFoundError):
            model.load_lora(tmp_path / "missing.gguf")
        with pytest.raises(runtime.LlamaLoadError):
            model.load_lora(models["agree"])  # a model, not an adapter
        other.close()
        with pytest.raises(runtime.LlamaClosedError):
            ctx.set_loras({foreign: 1.0})
        assert ctx.loras == {}
        assert ctx.generate(PROMPT, max_tokens=3).tokens == BASE[:3]


def test_a_change_forgets_the_prefix(
    runtime: Any, libs: Any, models: dict[str, Path], loras: dict[str, Path]
) -> None:
    with runtime.Model(models["plain"], libs=libs) as model, runtime.Context(model) as ctx:
        adapter = model.load_lora(loras["shift2"])
        first = ctx.generate(PROMPT, max_tokens=4)
        follow = PROMPT + list(first.tokens) + [40]
        ctx.set_loras({adapter: 1.0})
        changed = ctx.generate(follow, max_tokens=3)
        assert changed.metrics.prompt_reuse == runtime.PromptReuse.NONE
        assert changed.metrics.reused_prompt_tokens == 0
        assert changed.tokens == (42, 44, 46)
        ctx.set_loras({adapter: 1.0})  # the same: nothing is forgotten
        kept = ctx.generate(follow + list(changed.tokens) + [50], max_tokens=2)
        assert kept.metrics.reused_prompt_tokens > 0
        assert kept.tokens == (52, 54)
        ctx.set_control_vector([0.0] * 64)
        after_vector = ctx.generate(follow, max_tokens=2)
        assert after_vector.metrics.reused_prompt_tokens == 0
        assert after_vector.tokens == (42, 44)


@pytest.mark.parametrize("strategy", ["draft-mtp", "ngram-simple"])
def test_speculation_with_an_adapter_equals_plain_greedy(
    runtime: Any, libs: Any, models: dict[str, Path], loras: dict[str, Path], strategy: str
) -> None:
    prompt = [*range(20, 60, 2), 10, 12, 14]  # what the adapter continues: n-grams to find
    found = {}
    chosen = runtime.Strategy(strategy, size_n=2, size_m=8) if "ngram" in strategy else strategy
    for spec in (runtime.SpeculativeDecoding(), runtime.SpeculativeDecoding(strategies=(chosen,))):
        mtp = spec.enabled and strategy == "draft-mtp"
        with runtime.Model(models["agree"], libs=libs, load_mtp=mtp) as model:
            with runtime.Context(model, n_ctx=256, speculative=spec) as ctx:
                ctx.set_loras({model.load_lora(loras["shift2"]): 1.0})
                found[spec.enabled] = ctx.generate(prompt, max_tokens=24)
    plain, speculative = found[False], found[True]
    assert plain.tokens[:3] == (16, 18, 20)
    assert speculative.tokens == plain.tokens
    assert speculative.metrics.drafted_tokens > 0
    if strategy == "draft-mtp":  # the MTP context carries the adapter: its drafts agree
        assert speculative.metrics.acceptance_rate > 0.9


def test_control_vector_changes_output_and_clears(
    runtime: Any, libs: Any, models: dict[str, Path], tmp_path: Path
) -> None:
    embeddings = _tensors(models["plain"])["token_embd.weight"]
    toward = [float(x) for x in 10 * embeddings[50]]  # the last layer's output becomes e[50]
    with runtime.Model(models["plain"], libs=libs) as model, runtime.Context(model) as ctx:
        ctx.set_control_vector(toward)
        assert ctx.generate(PROMPT, max_tokens=3).tokens == (51, 51, 51)
        ctx.set_control_vector({1: [0.0] * 64})
        assert ctx.generate(PROMPT, max_tokens=3).tokens == BASE[:3]
        ctx.set_control_vector(np.asarray([toward]), scale=0)
        assert ctx.generate(PROMPT, max_tokens=3).tokens == BASE[:3]
        path = tmp_path / "cvec.gguf"
        writer = gguf.GGUFWriter(path, "controlvector")
        writer.add_tensor("direction.1", np.asarray(toward, dtype=np.float32) / 2)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        ctx.set_control_vector(path, scale=2.0)
        assert ctx.generate(PROMPT, max_tokens=3).tokens == (51, 51, 51)
        ctx.clear_control_vector()
        assert ctx.generate(PROMPT, max_tokens=3).tokens == BASE[:3]


def test_control_vector_is_checked(
    runtime: Any, libs: Any, models: dict[str, Path], tmp_path: Path
) -> None:
    with runtime.Model(models["plain"], libs=libs) as model, runtime.Context(model) as ctx:
        for bad, error, match in [
            ([0.0] * 63, ValueError, "n_embd 64"),
            ([0.0] * 128, ValueError, r"outside 1\.\.1"),
            ({0: [0.0] * 64}, ValueError, "outside"),
            ({1: [0.0] * 32}, ValueError, "n_embd is 64"),
            ({1: [float("inf")] + [0.0] * 63}, ValueError, "finite"),
            (3.0, TypeError, "control vector"),
            (tmp_path / "missing.gguf", FileNotFoundError, "does not exist"),
        ]:
            with pytest.raises(error, match=match):
                ctx.set_control_vector(bad)
        with pytest.raises(ValueError, match="layer_start"):
            ctx.set_control_vector([0.0] * 64, layer_start=0)
        with pytest.raises(ValueError, match="layer_start"):
            ctx.set_control_vector([0.0] * 64, layer_end=2)
        wrong = tmp_path / "wrong.gguf"
        writer = gguf.GGUFWriter(wrong, "controlvector")
        writer.add_tensor("direction.x", np.zeros(64, dtype=np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        with pytest.raises(ValueError, match=r"direction\.<layer>"):
            ctx.set_control_vector(wrong)
        assert ctx.generate(PROMPT, max_tokens=3).tokens == BASE[:3]


# ---- lifetimes: each case in a process of its own (a crash fails the test) ------------------

PREAMBLE = (
    LIFETIME_PREAMBLE
    + """
LORA = sys.argv[4]
def gen(c):
    return list(c.generate([10, 11, 12], max_tokens=3).tokens)
"""
)

LIFETIME_CASES = {
    "model closed with an adapter set on a live context": """
m = rt.Model(MODEL, libs=libs)
c = rt.Context(m, n_ctx=128)
a = m.load_lora(LORA)
c.set_loras({a: 1.0})
gen(c)
m.close()
seen["adapter"] = [outcome(lambda: a.handle), outcome(lambda: a.metadata), a.closed]
seen["context"] = [outcome(lambda: gen(c)), outcome(lambda: c.set_loras({}))]
a.close()
c.close()
""",
    "adapter closed while set": """
m = rt.Model(MODEL, libs=libs)
c = rt.Context(m, n_ctx=128)
a = m.load_lora(LORA)
c.set_loras({a: 1.0})
seen["with"] = gen(c)
a.close()
seen["loras"] = len(c.loras)
seen["without"] = gen(c)
seen["set_closed"] = outcome(lambda: c.set_loras({a: 1.0}))
m.close()
""",
    "context closed first, adapter and model after": """
m = rt.Model(MODEL, libs=libs)
a = m.load_lora(LORA)
c = rt.Context(m, n_ctx=128)
c.set_loras({a: 1.0})
gen(c)
c.close()
seen["adapter_after"] = outcome(lambda: a.metadata)
a.close()
m.close()
seen["done"] = True
""",
    "MTP context with an adapter, model closed": """
m = rt.Model(MTP_MODEL, libs=libs, load_mtp=True)
c = rt.Context(m, n_ctx=128, speculative=rt.SpeculativeDecoding("draft-mtp"))
a = m.load_lora(LORA)
c.set_loras({a: 1.0})
seen["tokens"] = gen(c)
m.close()
seen["after"] = outcome(lambda: gen(c))
""",
    "adapter closed from another thread during a step is refused": """
m = rt.Model(MODEL, libs=libs)
c = rt.Context(m, n_ctx=128)
a = m.load_lora(LORA)
c.set_loras({a: 1.0})
refused = []
def on_token(token, piece):
    t = threading.Thread(target=lambda: refused.append(outcome(a.close)))
    t.start()
    t.join()
seen["tokens"] = list(c.generate([10, 11, 12], max_tokens=3, on_token=on_token).tokens)
seen["refused"] = sorted(set(refused))
a.close()
seen["after"] = gen(c)
""",
    "objects left to the collector and to the exit": """
m = rt.Model(MODEL, libs=libs)
c = rt.Context(m, n_ctx=128)
c.set_loras({m.load_lora(LORA): 1.0})
gen(c)
del c
gc.collect()
kept_model = rt.Model(MTP_MODEL, libs=libs, load_mtp=True)
kept = rt.Context(kept_model, n_ctx=128, speculative=rt.SpeculativeDecoding("draft-mtp"))
kept.set_loras({kept_model.load_lora(LORA): 1.0})
gen(kept)
seen["left_open"] = True  # freed at exit
""",
}

LIFETIME_EXPECTED: dict[str, dict[str, Any]] = {
    "model closed with an adapter set on a live context": {
        "adapter": ["LlamaClosedError", "LlamaClosedError", True],
        "context": ["LlamaClosedError", "LlamaClosedError"],
    },
    "adapter closed while set": {
        "with": [14, 16, 18], "loras": 0, "without": [13, 14, 15],
        "set_closed": "LlamaClosedError",
    },
    "context closed first, adapter and model after": {"adapter_after": "ok", "done": True},
    "MTP context with an adapter, model closed": {
        "tokens": [14, 16, 18], "after": "LlamaClosedError",
    },
    "adapter closed from another thread during a step is refused": {
        "tokens": [14, 16, 18], "refused": ["LlamaRuntimeError"], "after": [13, 14, 15],
    },
    "objects left to the collector and to the exit": {"left_open": True},
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(LIFETIME_CASES))
def test_adapter_lifetimes(
    case: str, host_build: BuildResult, models: dict[str, Path], loras: dict[str, Path]
) -> None:
    code = PREAMBLE + LIFETIME_CASES[case] + "\nprint(json.dumps(seen))\n"
    seen = run_json(
        code, BINDINGS_PARENT, str(host_build.lib_dir), str(models["plain"]),
        str(models["agree"]), str(loras["shift2"]),
    )  # fmt: skip
    assert seen == LIFETIME_EXPECTED[case]
