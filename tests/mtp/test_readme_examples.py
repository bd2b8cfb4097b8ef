"""Every Python example in the README runs, on the synthetic test models (a renamed argument or
a removed name fails here): each ```python block is run as it is written, with its file names
pointing at test files (``model.gguf``: the MTP model with a chat template, ``target.gguf`` and
``draft.gguf``: a target and its draft, ``mmproj.gguf``: the test projector, ``photo.jpg``:
llama.cpp's test image, ``/path/to/lib`` and ``$LLAMA_BINDGEN_LIB_DIR``: the host build) and
``prompt`` given."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

from generator.native.build import BuildResult
from generator.testmodel import BYTES_VOCAB_MIN, sizes_from, write_test_model
from generator.testvision import write_test_projector
from tests.mtp.conftest import CHATML_JINJA
from tests.repo import REPO_ROOT

BLOCKS = re.findall(r"```python\n(.*?)```", (REPO_ROOT / "README.md").read_text(), re.S)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, tree_b11312: Path) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("readme")
    common: dict[str, Any] = {"vocabulary": "bytes", "vocab": BYTES_VOCAB_MIN}
    model = write_test_model(folder / "m.gguf", "agree", chat_template=CHATML_JINJA, **common)
    sizes = sizes_from(vocab=BYTES_VOCAB_MIN)
    photo = tree_b11312 / "tools" / "mtmd" / "test-1.jpeg"
    return {
        "model.gguf": str(model),
        "target.gguf": str(write_test_model(folder / "t.gguf", "plain", **common)),
        "draft.gguf": str(write_test_model(folder / "d.gguf", "draft", **common)),
        "mmproj.gguf": str(write_test_projector(folder / "p.gguf", text_sizes=sizes)),
        "/path/to/photo.jpg": str(photo),
        "photo.jpg": str(photo),
    }


def test_the_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_a_readme_example_runs(
    index: int,
    files: dict[str, str],
    host_build: BuildResult,
    runtime: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LLAMA_BINDGEN_LIB_DIR", str(host_build.lib_dir))  # as the README says
    code = BLOCKS[index]
    for name, path in sorted(files.items(), key=lambda item: -len(item[0])):
        code = code.replace(f'"{name}"', repr(path)).replace(f"file://{name}", f"file://{path}")
    code = code.replace('"/path/to/lib"', repr(str(host_build.lib_dir)))
    names: dict[str, Any] = {"prompt": "abcdefghijklmnopabcdefghijklmnop"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, f"README.md python block {index + 1}", "exec"), names)
