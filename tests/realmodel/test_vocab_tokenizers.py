"""llama.cpp's own tokenizer test vocabularies (``models/ggml-vocab-*.gguf`` of the pinned tree, no
weights), opened with ``Model(..., vocab_only=True)``: each one's tokens for its ``.inp`` texts
equal its ``.out`` ids, read and compared as upstream's ``tests/test-tokenizer-0.cpp`` does (tests
separated by a marker line, one line of space-separated ids per test, ``add_special`` and
``parse_special`` false)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

# Every vocabulary of the pinned tree's models/ with .inp/.out files (upstream's CMake runs
# test-tokenizer-0 on each of them); test_every_vocabulary_with_tests_is_listed keeps it whole.
VOCABS = (
    "bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4", "gpt-2",
    "llama-bpe", "llama-spm", "mpt", "phi-3", "qwen2", "qwen35", "refact", "starcoder",
)  # fmt: skip
SEPARATOR = b"\n__ggml_vocab_test__\n"


def read_tests(vocab: Path) -> dict[str, list[int]]:
    """``read_tests`` of test-tokenizer-0.cpp: the .inp split at the separator (the part after
    the last one, if any, is a test too), one stripped .out line per test; a text seen twice keeps
    its last ids, as upstream's std::map does."""
    raw = vocab.with_name(vocab.name + ".inp").read_bytes()
    lines = vocab.with_name(vocab.name + ".out").read_bytes().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # std::getline yields no line after the file's last newline
    texts: list[bytes] = []
    pos = 0
    while pos < len(raw):
        end = raw.find(SEPARATOR, pos)
        if end < 0:
            texts.append(raw[pos:])
            break
        texts.append(raw[pos:end])
        pos = end + len(SEPARATOR)
    assert len(texts) == len(lines), f"{vocab.name}: .inp and .out have different test counts"
    return {
        text.decode("utf-8"): [int(t) for t in line.strip().split(b" ") if t]
        for text, line in zip(texts, lines, strict=True)
    }


def test_every_vocabulary_with_tests_is_listed(tree_pin: Path) -> None:
    found = {
        path.name.removeprefix("ggml-vocab-").removesuffix(".gguf")
        for path in (tree_pin / "models").glob("ggml-vocab-*.gguf")
        if path.with_name(path.name + ".inp").is_file()
        and path.with_name(path.name + ".out").is_file()
    }
    assert found == set(VOCABS)


@pytest.mark.parametrize("name", VOCABS)
def test_vocab_only_tokenization_equals_llama_cpps_expected_tokens(
    runtime: Any, libs: Any, tree_pin: Path, name: str
) -> None:
    vocab = tree_pin / "models" / f"ggml-vocab-{name}.gguf"
    tests = read_tests(vocab)
    assert len(tests) > 20
    with runtime.Model(vocab, vocab_only=True, libs=libs) as model:
        assert model.vocab_only
        got = {text: model.tokenize(text, add_special=False) for text in tests}
    wrong = {text: (got[text], ids) for text, ids in tests.items() if got[text] != ids}
    assert not wrong, f"{len(wrong)} of {len(tests)} texts tokenized differently: {wrong}"
