"""generator.testmodel: deterministic qwen35 test models with a known MTP behaviour."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import numpy as np
import numpy.typing as npt
import pytest

from generator.errors import UsageError
from generator.testmodel import BYTES_VOCAB_MIN, KINDS, SPLIT_TEXT, ModelSizes, write_test_model
from tests.model.conftest import ReadModel, read_model

# Non-default sizes, so that a value the writer ignores or mixes up shows in the checks below.
ODD_SIZES: dict[str, Any] = {
    "embd": 48,
    "ff": 80,
    "layers": 4,
    "vocab": 100,
    "heads": 4,
    "kv_heads": 2,
    "head_dim": 16,
    "ssm_state": 8,
    "ssm_groups": 2,
    "ssm_v_heads": 4,
    "ssm_conv": 3,
    "full_attention_interval": 2,
    "context": 512,
    "disagree_every": 7,
}


def _write(tmp_path: Path, kind: str, seed: int = 0, name: str = "", **sizes: Any) -> Path:
    return write_test_model(tmp_path / f"{name or kind}-{seed}.gguf", kind, seed, **sizes)


def _expected_shapes(kind: str, s: ModelSizes) -> dict[str, tuple[int, ...]]:
    """Every tensor and its ggml shape (ne0 first) as the qwen35 loader of b11312 asks for them."""
    e, f, v = s.embd, s.ff, s.vocab
    q_dim, kv_dim = s.head_dim * s.heads, s.head_dim * s.kv_heads
    key_dim, value_dim = s.ssm_state * s.ssm_groups, s.ssm_state * s.ssm_v_heads
    shapes: dict[str, tuple[int, ...]] = {
        "token_embd.weight": (e, v),
        "output_norm.weight": (e,),
        "output.weight": (e, v),
    }

    def block(il: int, recurrent: bool) -> None:
        b = f"blk.{il}"
        shapes[f"{b}.attn_norm.weight"] = (e,)
        shapes[f"{b}.post_attention_norm.weight"] = (e,)
        shapes[f"{b}.ffn_gate.weight"] = (e, f)
        shapes[f"{b}.ffn_up.weight"] = (e, f)
        shapes[f"{b}.ffn_down.weight"] = (f, e)
        if recurrent:
            shapes[f"{b}.attn_qkv.weight"] = (e, 2 * key_dim + value_dim)
            shapes[f"{b}.attn_gate.weight"] = (e, value_dim)
            shapes[f"{b}.ssm_conv1d.weight"] = (s.ssm_conv, 2 * key_dim + value_dim)
            shapes[f"{b}.ssm_dt.bias"] = (s.ssm_v_heads,)
            shapes[f"{b}.ssm_a"] = (s.ssm_v_heads,)
            shapes[f"{b}.ssm_beta.weight"] = (e, s.ssm_v_heads)
            shapes[f"{b}.ssm_alpha.weight"] = (e, s.ssm_v_heads)
            shapes[f"{b}.ssm_norm.weight"] = (s.ssm_state,)
            shapes[f"{b}.ssm_out.weight"] = (value_dim, e)
        else:
            shapes[f"{b}.attn_q.weight"] = (e, 2 * q_dim)
            shapes[f"{b}.attn_k.weight"] = (e, kv_dim)
            shapes[f"{b}.attn_v.weight"] = (e, kv_dim)
            shapes[f"{b}.attn_output.weight"] = (q_dim, e)
            shapes[f"{b}.attn_q_norm.weight"] = (s.head_dim,)
            shapes[f"{b}.attn_k_norm.weight"] = (s.head_dim,)

    for il in range(s.layers):
        block(il, recurrent=(il + 1) % s.full_attention_interval != 0)
    if kind in ("agree", "partial"):
        il = s.layers
        block(il, recurrent=False)
        shapes[f"blk.{il}.nextn.eh_proj.weight"] = (2 * e, e)
        shapes[f"blk.{il}.nextn.enorm.weight"] = (e,)
        shapes[f"blk.{il}.nextn.hnorm.weight"] = (e,)
        if kind == "partial":
            shapes[f"blk.{il}.nextn.embed_tokens.weight"] = (e, v)
    return shapes


def _rms_normalized(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    rms = np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)
    normalized: npt.NDArray[np.float32] = (x / rms).astype(np.float32)
    return normalized


def _predictions(head: npt.NDArray[np.float32], hidden: npt.NDArray[np.float32]) -> list[int]:
    """Argmax token of ``head`` (numpy shape (vocab, embd)) for each row of ``hidden``."""
    return [int(i) for i in np.argmax(_rms_normalized(hidden) @ head.T, axis=1)]


@pytest.mark.parametrize("kind", KINDS)
def test_same_arguments_give_identical_bytes(tmp_path: Path, kind: str) -> None:
    first = _write(tmp_path, kind, seed=3, name="first")
    second = _write(tmp_path, kind, seed=3, name="second")
    assert first.read_bytes() == second.read_bytes()


@pytest.mark.parametrize("kind", KINDS)
def test_other_seed_gives_other_bytes(tmp_path: Path, kind: str) -> None:
    assert (
        _write(tmp_path, kind, seed=0).read_bytes() != _write(tmp_path, kind, seed=1).read_bytes()
    )


def test_default_model_is_tiny(tmp_path: Path) -> None:
    size = _write(tmp_path, "agree").stat().st_size
    assert size < 1_000_000, size


@pytest.mark.parametrize("kind", KINDS)
def test_metadata_reads_back(tmp_path: Path, kind: str) -> None:
    sizes = ModelSizes(**ODD_SIZES)
    model = read_model(_write(tmp_path, kind, **ODD_SIZES))
    f = model.fields
    has_mtp = kind in ("agree", "partial")
    assert f["general.architecture"] == "qwen35"
    assert f["qwen35.block_count"] == sizes.layers + (1 if has_mtp else 0)
    assert f.get("qwen35.nextn_predict_layers", 0) == (1 if has_mtp else 0)
    assert f["qwen35.embedding_length"] == sizes.embd
    assert f["qwen35.feed_forward_length"] == sizes.ff
    assert f["qwen35.context_length"] == sizes.context
    assert f["qwen35.attention.head_count"] == sizes.heads
    assert f["qwen35.attention.head_count_kv"] == sizes.kv_heads
    assert f["qwen35.attention.key_length"] == sizes.head_dim
    assert f["qwen35.attention.value_length"] == sizes.head_dim
    assert f["qwen35.rope.dimension_count"] == sizes.head_dim
    sections = f["qwen35.rope.dimension_sections"]
    assert len(sections) == 4 and sum(sections) == sizes.head_dim // 2
    assert f["qwen35.full_attention_interval"] == sizes.full_attention_interval
    assert f["qwen35.ssm.conv_kernel"] == sizes.ssm_conv
    assert f["qwen35.ssm.state_size"] == sizes.ssm_state
    assert f["qwen35.ssm.group_count"] == sizes.ssm_groups
    assert f["qwen35.ssm.time_step_rank"] == sizes.ssm_v_heads
    assert f["qwen35.ssm.inner_size"] == sizes.ssm_state * sizes.ssm_v_heads
    assert "qwen35.attention.layer_norm_rms_epsilon" in f
    assert "qwen35.rope.freq_base" in f
    assert f["tokenizer.ggml.model"] == "test"
    tokens = f["tokenizer.ggml.tokens"]
    assert len(tokens) == sizes.vocab and len(set(tokens)) == sizes.vocab


@pytest.mark.parametrize("kind", KINDS)
def test_tensor_shapes_follow_the_sizes(tmp_path: Path, kind: str) -> None:
    model = read_model(_write(tmp_path, kind, **ODD_SIZES))
    assert model.shapes == _expected_shapes(kind, ModelSizes(**ODD_SIZES))


def test_default_sizes_have_the_recipe_layout(tmp_path: Path) -> None:
    model = read_model(_write(tmp_path, "agree"))
    assert model.shapes == _expected_shapes("agree", ModelSizes())
    # two trunk layers: 0 recurrent, 1 full attention, then the NextN block 2
    assert "blk.0.ssm_a" in model.shapes and "blk.1.attn_q.weight" in model.shapes
    assert "blk.2.nextn.eh_proj.weight" in model.shapes


def test_trunk_is_shared_by_all_kinds_of_one_seed(tmp_path: Path) -> None:
    models = {kind: read_model(_write(tmp_path, kind, seed=5)) for kind in KINDS}
    trunk = models["plain"].arrays
    for kind in ("agree", "partial"):
        for name, values in trunk.items():
            np.testing.assert_array_equal(models[kind].arrays[name], values, err_msg=name)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_trunk_head_predicts_the_next_token_id(tmp_path: Path, seed: int) -> None:
    model = read_model(_write(tmp_path, "plain", seed=seed, **ODD_SIZES))
    embd = model.arrays["token_embd.weight"]
    vocab = embd.shape[0]
    predicted = _predictions(model.arrays["output.weight"], embd)
    assert predicted == [(t + 1) % vocab for t in range(vocab)]


def test_draft_model_disagrees_with_the_trunk_for_some_tokens(tmp_path: Path) -> None:
    sizes = ModelSizes(**ODD_SIZES)
    draft = read_model(_write(tmp_path, "draft", seed=2, **ODD_SIZES))
    plain = read_model(_write(tmp_path, "plain", seed=2, **ODD_SIZES))
    assert draft.arrays["output.weight"].tobytes() == plain.arrays["output.weight"].tobytes()
    predicted = _predictions(draft.arrays["output.weight"], draft.arrays["token_embd.weight"])
    vocab = sizes.vocab
    step = [2 if t % sizes.disagree_every == 0 else 1 for t in range(vocab)]
    assert predicted == [(t + step[t]) % vocab for t in range(vocab)]
    assert 1 < step.count(2) < vocab


def _mtp_predictions(model: ReadModel, nextn_block: int) -> list[int]:
    """What the NextN head predicts from each token, with the block's small layers left out.

    The block embeds the token (its own embed_tokens when present, else the trunk's), RMS-norms
    it, projects it with the embedding half of eh_proj and reads it out with its own head when
    present, else the trunk's.
    """
    b = f"blk.{nextn_block}.nextn"
    embd = model.arrays.get(f"{b}.embed_tokens.weight", model.arrays["token_embd.weight"])
    e = embd.shape[1]
    eh_proj = model.arrays[f"{b}.eh_proj.weight"]  # numpy (embd, 2 * embd)
    np.testing.assert_array_equal(eh_proj[:, :e], np.eye(e, dtype=np.float32))
    hidden = _rms_normalized(embd) @ eh_proj[:, :e].T
    head = model.arrays.get(f"{b}.shared_head_head.weight", model.arrays["output.weight"])
    return _predictions(head, hidden)


def test_agree_mtp_head_predicts_what_the_trunk_predicts(tmp_path: Path) -> None:
    sizes = ModelSizes(**ODD_SIZES)
    model = read_model(_write(tmp_path, "agree", **ODD_SIZES))
    assert _mtp_predictions(model, sizes.layers) == [
        (t + 1) % sizes.vocab for t in range(sizes.vocab)
    ]


@pytest.mark.parametrize("every", [2, 5, 7, 33])
def test_partial_mtp_head_disagrees_on_every_nth_token(tmp_path: Path, every: int) -> None:
    sizes = ModelSizes(**{**ODD_SIZES, "disagree_every": every})
    model = read_model(_write(tmp_path, "partial", **{**ODD_SIZES, "disagree_every": every}))
    predicted = _mtp_predictions(model, sizes.layers)
    trunk = [(t + 1) % sizes.vocab for t in range(sizes.vocab)]
    disagree = [t for t in range(sizes.vocab) if predicted[t] != trunk[t]]
    assert disagree == [t for t in range(sizes.vocab) if t % every == 0]
    assert all(predicted[t] == (t + 2) % sizes.vocab for t in disagree)


def test_f16_weights_keep_vectors_and_conv_kernels_f32(tmp_path: Path) -> None:
    model = read_model(_write(tmp_path, "partial", weight_type="f16"))
    for name, shape in model.shapes.items():
        f16 = len(shape) >= 2 and not name.endswith(".ssm_conv1d.weight")
        expected = gguf.GGMLQuantizationType.F16 if f16 else gguf.GGMLQuantizationType.F32
        assert model.types[name] == expected, name
    assert model.fields["general.file_type"] == gguf.LlamaFileType.MOSTLY_F16


@pytest.mark.parametrize(
    ("kind", "sizes", "message"),
    [
        ("nope", {}, "kind"),
        ("agree", {"depth": 3}, "depth"),
        ("agree", {"full_attention_interval": 1}, "full_attention_interval"),
        ("agree", {"heads": 3, "kv_heads": 2}, "kv_heads"),
        ("agree", {"embd": 0}, "embd"),
        ("agree", {"weight_type": "q8_0"}, "weight_type"),
    ],
)
def test_impossible_requests_are_usage_errors(
    tmp_path: Path, kind: str, sizes: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        write_test_model(tmp_path / "m.gguf", kind, **sizes)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"vocabulary": "words"}, "vocabulary"),
        ({"vocabulary": "bytes", "vocab": 258}, "vocab >= 259"),
    ],
)
def test_impossible_vocabularies_are_usage_errors(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        write_test_model(tmp_path / "m.gguf", "agree", **options)
    assert list(tmp_path.iterdir()) == []


def test_bytes_vocabulary_reads_back(tmp_path: Path) -> None:
    vocab = BYTES_VOCAB_MIN + 3
    f = read_model(_write(tmp_path, "agree", vocabulary="bytes", vocab=vocab)).fields
    assert f["tokenizer.ggml.model"] == "llama"
    tokens, types = f["tokenizer.ggml.tokens"], f["tokenizer.ggml.token_type"]
    assert len(tokens) == len(types) == len(f["tokenizer.ggml.scores"]) == vocab
    assert len(set(tokens)) == vocab
    assert tokens[:3] == ["<unk>", "<s>", "</s>"]
    assert (f["tokenizer.ggml.unknown_token_id"], f["tokenizer.ggml.bos_token_id"],
            f["tokenizer.ggml.eos_token_id"]) == (0, 1, 2)  # fmt: skip
    byte_ids = [i for i, t in enumerate(types) if t == gguf.TokenType.BYTE]
    assert byte_ids == list(range(3, 3 + 256))
    values = [int(tokens[i][3:5], 16) for i in byte_ids]
    assert sorted(values) == list(range(256))
    assert types[-3:] == [gguf.TokenType.UNUSED] * 3
    assert "tokenizer.chat_template" not in f
    # after the ASCII bytes come SPLIT_TEXT's bytes, one character after another
    split = SPLIT_TEXT.encode("utf-8")
    assert bytes(values[128 : 128 + len(split)]) == split
    assert len(split) > len(SPLIT_TEXT)


def test_chat_template_is_written(tmp_path: Path) -> None:
    text = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    f = read_model(_write(tmp_path, "plain", chat_template=text)).fields
    assert f["tokenizer.chat_template"] == text
    assert f["tokenizer.ggml.model"] == "test"


def test_default_vocabulary_is_unchanged_by_the_options(tmp_path: Path) -> None:
    plain = _write(tmp_path, "agree", name="default")
    same = _write(tmp_path, "agree", name="explicit", vocabulary="test", chat_template=None)
    assert plain.read_bytes() == same.read_bytes()
