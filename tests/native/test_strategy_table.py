"""The strategy table (``llama_mtp_strategies.cpp``) where the llama.cpp tree lacks a strategy.

Every tag the wrapper is built for here has every strategy it runs, so the refusal of one a tree
lacks cannot be reached through a build of the pinned tree. The table is tag-independent and
reaches the tree only through ``llama_mtp_upstream.h``; this test compiles it, with llama.h's and
ggml's include folders alone (the wrapper's include boundary: no common/ or src/), against a
stand-in for ``llama_mtp_upstream.cpp`` whose tree has no ngram-cache and every other strategy type,
but not the API the drafts reading the target's layers need, and checks the statuses:
``LLAMA_MTP_STATUS_NOT_IN_RELEASE`` for the strategy the tree lacks and for draft-eagle3, -dflash
and -dspark (saying what is missing), OK for the rest.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from generator.emit.wrapper_contract import STATUS_PREFIX, STRATEGY_PREFIX, strategy_name
from generator.paths import wrapper_dir

pytestmark = [pytest.mark.needs_tree]

STAND_IN = r"""
#include "llama_mtp_strategies.h"
#include "llama_mtp_upstream.h"

#include <cstdio>
#include <string>

static std::string g_message;

namespace llama_mtp_impl {
llama_mtp_status fail(llama_mtp_status status, const std::string & message) {
    g_message = message;
    return status;
}
llama_mtp_status ok() {
    g_message.clear();
    return LLAMA_MTP_STATUS_OK;
}
}  // namespace llama_mtp_impl

namespace llama_mtp_upstream {
// A tree without ngram-cache; every other type maps to itself.
int32_t upstream_strategy_type(int32_t type) {
    return type == LLAMA_MTP_STRATEGY_NGRAM_CACHE ? -1 : type;
}
speculative_defaults defaults() {
    return speculative_defaults{};
}
int32_t ngram_cache_key_length() {
    return 4;
}
// No llama_model_target_layer_ids / llama_set_embeddings_layer_inp / ctx_other in this tree.
bool has_layer_drafts() {
    return false;
}
}  // namespace llama_mtp_upstream

int main() {
    using namespace llama_mtp_impl;
    for (const strategy_info * s = strategies_begin(); s != strategies_end(); ++s) {
        g_message.clear();
        const llama_mtp_status st = strategy_support(s->type, "test");
        std::printf("%s\t%d\t%s\n", s->name.c_str(), (int) st, g_message.c_str());
    }
    return 0;
}
"""

_ENUMERATOR = re.compile(r"^\s*(LLAMA_MTP_(?:STATUS|STRATEGY)_\w+)\s*=\s*(\d+)", re.M)


def _header_values() -> dict[str, int]:
    text = (wrapper_dir() / "llama_mtp.h").read_text(encoding="utf-8")
    return {name: int(value) for name, value in _ENUMERATOR.findall(text)}


def test_a_strategy_the_tree_lacks_is_not_in_release(tree_pin: Path, tmp_path: Path) -> None:
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.fail("g++ is not installed")
    stand_in = tmp_path / "stand_in.cpp"
    stand_in.write_text(STAND_IN, encoding="utf-8")
    exe = tmp_path / "table"
    argv = [
        compiler, "-std=c++17", "-Wall", "-Werror", '-DLLAMA_MTP_LLAMA_TAG="b-test"',
        f"-I{wrapper_dir()}", f"-I{tree_pin / 'include'}",
        f"-I{tree_pin / 'ggml' / 'include'}",
        str(wrapper_dir() / "llama_mtp_strategies.cpp"), str(stand_in), "-o", str(exe),
    ]  # fmt: skip
    built = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    ran = subprocess.run([str(exe)], capture_output=True, text=True, check=True)
    rows = {
        name: (int(status), message)
        for name, status, message in (line.split("\t") for line in ran.stdout.splitlines())
    }
    values = _header_values()
    status = {
        n.removeprefix(STATUS_PREFIX): v for n, v in values.items() if n.startswith(STATUS_PREFIX)
    }
    names = {strategy_name(n) for n in values if n.startswith(STRATEGY_PREFIX)}
    assert set(rows) == names
    lacked = strategy_name(STRATEGY_PREFIX + "NGRAM_CACHE")
    code, message = rows[lacked]
    assert code == status["NOT_IN_RELEASE"], rows[lacked]
    assert "not in this llama.cpp release (b-test" in message
    layer_drafts = {
        strategy_name(STRATEGY_PREFIX + m) for m in ("DRAFT_EAGLE3", "DRAFT_DFLASH", "DRAFT_DSPARK")
    }
    for name, (code, message) in rows.items():
        if name in layer_drafts:
            assert code == status["NOT_IN_RELEASE"], name
            assert "llama_model_target_layer_ids" in message and "b-test" in message, message
        elif name != lacked:
            assert (code, message) == (status["OK"], ""), name
