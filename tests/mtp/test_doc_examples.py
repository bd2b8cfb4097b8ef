"""Every Python example in the README and the documentation (``docs/``) runs, on the synthetic
test models (a renamed argument or
a removed name fails here): each ```python block is run as it is written, with its file names
pointing at test files (``model.gguf``: the MTP model with a chat template, ``target.gguf`` and
``draft.gguf``: a target and its draft, ``target-dflash.gguf``: a DFlash draft of that
target, ``mmproj.gguf``: the test projector, ``photo.jpg``:
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
from generator.testdrafts import write_test_draft
from generator.testmodel import BYTES_VOCAB_MIN, sizes_from, write_test_model
from generator.testvision import write_test_projector
from tests.mtp.conftest import CHATML_JINJA
from tests.repo import REPO_ROOT

DOCUMENTS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
# (where, code): where is the file and the block's number in it, as the test id shows it
BLOCKS = [
    (f"{path.relative_to(REPO_ROOT)} python block {number}", code)
    for path in DOCUMENTS
    for number, code in enumerate(re.findall(r"```python\n(.*?)```", path.read_text(), re.S), 1)
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, tree_pin: Path) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("readme")
    common: dict[str, Any] = {"vocabulary": "bytes", "vocab": BYTES_VOCAB_MIN}
    model = write_test_model(folder / "m.gguf", "agree", chat_template=CHATML_JINJA, **common)
    sizes = sizes_from(vocab=BYTES_VOCAB_MIN)
    photo = tree_pin / "tools" / "mtmd" / "test-1.jpeg"
    return {
        "model.gguf": str(model),
        "target.gguf": str(write_test_model(folder / "t.gguf", "plain", **common)),
        "draft.gguf": str(write_test_model(folder / "d.gguf", "draft", **common)),
        "target-dflash.gguf": str(write_test_draft(folder / "df.gguf", "dflash", **common)),
        "mmproj.gguf": str(write_test_projector(folder / "p.gguf", text_sizes=sizes)),
        "/path/to/photo.jpg": str(photo),
        "photo.jpg": str(photo),
    }


def test_the_readme_and_the_docs_have_python_examples() -> None:
    assert sum(where.startswith("README.md") for where, _ in BLOCKS) >= 2
    assert len(BLOCKS) >= 8


@pytest.mark.parametrize("block", BLOCKS, ids=[where for where, _ in BLOCKS])
def test_an_example_runs(
    block: tuple[str, str],
    files: dict[str, str],
    host_build: BuildResult,
    runtime: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LLAMA_BINDGEN_LIB_DIR", str(host_build.lib_dir))  # as the README says
    # the package importable in the processes an example starts, as an installed one is
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT / "generated"))
    where, code = block
    for name, path in sorted(files.items(), key=lambda item: -len(item[0])):
        code = code.replace(f'"{name}"', repr(path)).replace(f"file://{name}", f"file://{path}")
    code = code.replace('"/path/to/lib"', repr(str(host_build.lib_dir)))
    names: dict[str, Any] = {"prompt": "abcdefghijklmnopabcdefghijklmnop"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, where, "exec"), names)
