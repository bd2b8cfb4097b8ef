"""The line a failed wrapper build leads with: the first compiler error in the wrapper's own
sources, with the upstream declaration the compiler pointed at (no native build needed)."""

from __future__ import annotations

from pathlib import Path

from generator.native.build import first_wrapper_error

GCC_LOG = """\
[12/200] Building CXX object CMakeFiles/llama_mtp.dir/llama_mtp_upstream.cpp.o
FAILED: CMakeFiles/llama_mtp.dir/llama_mtp_upstream.cpp.o
/opt/ccache/c++ -DLLAMA_MTP_BUILD ... -c /w/llama_mtp_upstream.cpp
/w/llama_mtp_upstream.cpp: In function 'void draft(...)':
/w/llama_mtp_upstream.cpp:231:8: error: 'struct common_speculative_draft_params' \
has no member named 'pos0'
  231 |     dp.pos0 = pos0;
      |        ^~~~
/t/common/speculative.h:31:8: note: 'struct common_speculative_draft_params' \
declared here
   31 | struct common_speculative_draft_params {
/w/llama_mtp_upstream.cpp:240:5: error: second error
ninja: build stopped: subcommand failed.
"""

UPSTREAM_ONLY_LOG = """\
FAILED: llama.cpp/src/CMakeFiles/llama.dir/llama-model.cpp.o
/t/src/llama-model.cpp:10:1: error: something upstream
"""


def test_the_first_wrapper_error_names_the_upstream_declaration() -> None:
    line = first_wrapper_error(GCC_LOG)
    assert line.startswith(
        "llama_mtp_upstream.cpp:231: 'struct common_speculative_draft_params' has no member "
        "named 'pos0'"
    )
    assert line.endswith(
        "(upstream: common/speculative.h:31: 'struct common_speculative_draft_params' "
        "declared here)"
    )


def test_an_error_outside_the_wrapper_is_not_blamed_on_it() -> None:
    assert first_wrapper_error(UPSTREAM_ONLY_LOG) == ""


def test_an_error_without_a_note_is_given_alone() -> None:
    log = "/w/llama_mtp_sidecar.cpp:5:3: error: 'llama_foo' was not declared in this scope\n"
    assert first_wrapper_error(log) == (
        "llama_mtp_sidecar.cpp:5: 'llama_foo' was not declared in this scope"
    )


def test_an_upstream_note_from_the_stable_source_folder_is_named_from_the_tree_top() -> None:
    """Trees are compiled from ``<cache>/stage/<key>/llama.cpp`` (``native.shared_source``); the
    compiler's paths into it, relative to the build folder, lead to the tree's own folders."""
    from generator.native.shared_source import stage_dir

    top = "../../.." / stage_dir(Path(""), "linux-x86_64")
    log = GCC_LOG.replace("/t/common/speculative.h", f"{top}/include/llama.h")
    assert first_wrapper_error(log).endswith(
        "(upstream: include/llama.h:31: 'struct common_speculative_draft_params' declared here)"
    )
