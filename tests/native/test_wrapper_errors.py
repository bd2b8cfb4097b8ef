"""Drive libllama_mtp through every error case: each returns a status, none aborts.

The program tests/native/mtp_cases.c makes the calls; this test checks each case's status against
``enum llama_mtp_status`` as libclang reads it from llama_mtp.h. It runs on every platform built
here, the way the registry says this machine runs it: linux-x86_64 natively, linux-aarch64 under
qemu, windows-x86_64 under wine (those fail, never skip, when qemu or wine is missing).

The drafts that read the target's layers (draft-eagle3, -dflash, -dspark) are checked one test
draft (generator/testdrafts.py) a process, so that an abort fails its own case (LAYER_DRAFTS).
"""

from __future__ import annotations

import os
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from generator.emit.wrapper_contract import header_macro
from generator.native.build import BuildResult
from generator.native.host import execution_here, host_toolchain
from generator.platforms import CannotRunError, Execution
from generator.releases import UNKNOWN_COMMIT
from generator.smoke.c_driver import place_libraries_beside
from generator.sources.tree import Tree
from tests.conftest import BuildFactory
from tests.native.conftest import compile_cases, parse_cases
from tests.native.headers import read_declarations

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

DRAFT_DEFAULT = header_macro("LLAMA_MTP_DRAFT_DEFAULT")

PLATFORMS = ("linux-x86_64", "linux-aarch64", "windows-x86_64")

# the chat section on template texts (mtp_cases.c's chat_cases): llama.cpp's chat layer is in
# every tree the tests build (the pin)
CHAT_CASES = {
    "chat_supported": "OK",
    "chat_init_null_out": "INVALID_ARGUMENT",
    "chat_init_nothing": "INVALID_ARGUMENT",
    "chat_init_bad_jinja": "TEMPLATE_ERROR",
    "chat_init_raising": "OK",  # it raises when rendering
    "chat_apply_raising": "TEMPLATE_ERROR",
    "chat_init": "OK",
    "chat_info": "OK",
    "chat_apply_null_request": "INVALID_ARGUMENT",
    "chat_apply_not_json": "INVALID_ARGUMENT",
    "chat_apply_no_messages": "INVALID_ARGUMENT",
    "chat_apply_messages_not_array": "INVALID_ARGUMENT",
    "chat_apply_bad_tool_choice": "INVALID_ARGUMENT",
    "chat_apply_grammar_and_schema": "INVALID_ARGUMENT",
    "chat_apply_bad_schema": "SCHEMA_ERROR",
    "chat_apply": "OK",
    "chat_parse": "OK",
    "chat_parse_null_text": "INVALID_ARGUMENT",
    "chat_parse_freed": "INVALID_ARGUMENT",
    "chat_parse_foreign": "INVALID_ARGUMENT",
    "chat_info_freed": "INVALID_ARGUMENT",
    "chat_apply_freed": "INVALID_ARGUMENT",
    "schema_to_grammar": "OK",
    "schema_not_json": "SCHEMA_ERROR",
    "schema_unresolvable": "SCHEMA_ERROR",
    "schema_null": "INVALID_ARGUMENT",
}

NO_MODEL_CASES = {
    "default_params": "OK",
    "default_params_old_struct": "UNSUPPORTED_VERSION",
    "default_params_null": "INVALID_ARGUMENT",
    "nextn_null_model": "INVALID_ARGUMENT",
    "create_null_context": "INVALID_ARGUMENT",
    "create_null_out": "INVALID_ARGUMENT",
    "process_null_handle": "INVALID_ARGUMENT",
    "process_embd_null_handle": "INVALID_ARGUMENT",
    "embd_supported": "OK",
    "embd_supported_null": "INVALID_ARGUMENT",
    "begin_null_handle": "INVALID_ARGUMENT",
    "draft_null_handle": "INVALID_ARGUMENT",
    "accept_null_handle": "INVALID_ARGUMENT",
    "seq_rm_null_handle": "INVALID_ARGUMENT",
    "step_null_handle": "INVALID_ARGUMENT",
    "get_stats_null_handle": "INVALID_ARGUMENT",
    "reset_stats_null_handle": "INVALID_ARGUMENT",
    "draft_foreign_handle": "INVALID_ARGUMENT",
    "get_stats_foreign_handle": "INVALID_ARGUMENT",
    "default_strategy": "OK",
    "default_strategy_bad_type": "INVALID_ARGUMENT",
    "default_strategy_old_struct": "UNSUPPORTED_VERSION",
    "strategy_supported_mtp": "OK",
    "strategy_supported_ngram_cache": "OK",
    "strategy_supported_eagle3": "OK",
    "strategy_supported_dflash": "OK",
    "strategy_supported_dspark": "OK",
    "strategy_supported_bogus": "INVALID_ARGUMENT",
}

# Strategy misuse (each a status) and runs; the runs' names are run_<strategy>_create/_steps.
RUNS = ("ngram_simple", "ngram_map_k", "ngram_map_k4v", "ngram_mod", "ngram_cache", "draft_simple")
STRATEGY_CASES = {
    "create_two_draft_contexts": "UNSUPPORTED_STRATEGY",
    "create_eagle3": "DRAFT_MISMATCH",  # a qwen35 model passed as the EAGLE-3 draft
    "create_unknown_strategy": "INVALID_ARGUMENT",
    "create_strategy_twice": "INVALID_ARGUMENT",
    "create_ngram_size_zero": "INVALID_ARGUMENT",
    "create_ngram_size_too_big": "INVALID_ARGUMENT",
    "create_ngram_simple_m_below_n": "INVALID_ARGUMENT",
    "create_mod_min_over_max": "INVALID_ARGUMENT",
    "create_cache_missing_file": "FILE_UNREADABLE",
    "create_cache_malformed_file": "FILE_UNREADABLE",
    "create_cache_valid_files": "OK",
    "create_simple_without_draft_model": "INVALID_ARGUMENT",
    "create_simple_vocab_mismatch": "VOCAB_MISMATCH",
    "create_draft_model_unused": "INVALID_ARGUMENT",
    "create_strategies_null_with_count": "INVALID_ARGUMENT",
    "create_strategy_old_struct": "UNSUPPORTED_VERSION",
    **{f"run_{run}_{step}": "OK" for run in (*RUNS, "mix") for step in ("create", "steps")},
    **{f"run_{run}_stats_bad_index": "INVALID_ARGUMENT" for run in (*RUNS, "mix")},
}

MODEL_CASES = {
    "nextn_plain": "OK",
    "create_no_nextn": "NO_NEXTN_LAYERS",
    "create_not_loaded_with_mtp": "MTP_NOT_LOADED",
    "nextn_two": "OK",
    "create_too_many_nextn_layers": "INVALID_ARGUMENT",
    "nextn_agree": "OK",
    "create_n_max_zero": "INVALID_ARGUMENT",
    "create_n_max_negative": "INVALID_ARGUMENT",
    "create_old_struct": "UNSUPPORTED_VERSION",
    "create_rs_seq_too_small": "INVALID_ARGUMENT",
    "create_after_decode": "BAD_STATE",
    "create_few_outputs": "INVALID_ARGUMENT",
    "create_ok": "OK",
    "accept_nothing_drafted": "BAD_STATE",
    "accept_zero_nothing_drafted": "BAD_STATE",
    "draft_n_max_zero": "INVALID_ARGUMENT",
    "draft_bad_seq": "INVALID_ARGUMENT",
    "draft_small_buffer": "BUFFER_TOO_SMALL",
    "process_prompt": "OK",
    "process_no_pos": "INVALID_ARGUMENT",
    "process_not_decoded": "BAD_STATE",
    "process_over_n_batch": "INVALID_ARGUMENT",
    "process_embd_wrong_width": "INVALID_ARGUMENT",
    "process_embd_bad_n_pos": "INVALID_ARGUMENT",
    "process_embd_null_rows": "INVALID_ARGUMENT",
    "process_embd_bad_seq": "INVALID_ARGUMENT",
    "process_embd_not_decoded": "BAD_STATE",
    # the pinned tree's common_batch takes embedding rows (probe BATCH_EMBD)
    # rows at positions 3 and 4 after the draft context mirrored the prompt up to 6: b11549's
    # llama.cpp refuses a batch that starts behind the sequence's last position for this
    # (M-RoPE) architecture ("X <= Y"); b11312 took it. The media path never goes back (the
    # smoke's media part passes with draft-mtp), so this misuse now fails in the decode.
    "process_embd": "DECODE_FAILED",
    "process_embd_draft_pending": "BAD_STATE",
    "begin_token_out_of_vocab": "INVALID_ARGUMENT",
    "process_token_out_of_vocab": "INVALID_ARGUMENT",
    "begin": "OK",
    "draft_token_out_of_vocab": "INVALID_ARGUMENT",
    "draft_wrong_pos": "BAD_STATE",
    "draft": "OK",
    "draft_again_before_accept": "BAD_STATE",
    "accept_before_mirror": "BAD_STATE",
    "process_verify": "OK",
    "accept_too_many": "ACCEPT_TOO_MANY",
    "accept_negative": "INVALID_ARGUMENT",
    "accept": "OK",
    "accept_twice": "BAD_STATE",
    "seq_rm_bad_range": "INVALID_ARGUMENT",
    "seq_rm_refused": "INVALID_ARGUMENT",
    "seq_rm": "OK",
    "step_null_sampler": "INVALID_ARGUMENT",
    "step_zero_capacity": "BUFFER_TOO_SMALL",
    "step_token_out_of_vocab": "INVALID_ARGUMENT",
    "step_wrong_n_past": "BAD_STATE",
    "step_sampler_selects_none": "INVALID_ARGUMENT",
    "steps": "OK",
    "get_stats": "OK",
    "get_stats_old_struct": "UNSUPPORTED_VERSION",
    "get_stats_v1_struct": "OK",
    "reset_stats": "OK",
    "accept_freed_handle": "INVALID_ARGUMENT",
    "step_freed_handle": "INVALID_ARGUMENT",
}

# What each refusal's message must name, so that a case cannot pass for another reason.
MESSAGES = {
    "draft_foreign_handle": "not a live llama_mtp",
    "get_stats_foreign_handle": "not a live llama_mtp",
    "accept_freed_handle": "not a live llama_mtp",
    "step_freed_handle": "not a live llama_mtp",
    "create_too_many_nextn_layers": "NextN layers",
    "create_few_outputs": "n_outputs_max",
    "begin_token_out_of_vocab": "outside the vocabulary",
    "process_token_out_of_vocab": "outside the vocabulary",
    "process_embd_wrong_width": "input width",
    "process_embd_not_decoded": "not in the target context",
    "process_embd_draft_pending": "awaiting verification",
    "draft_token_out_of_vocab": "outside the vocabulary",
    "step_token_out_of_vocab": "outside the vocabulary",
    "draft_wrong_pos": "not the next position",
    "step_wrong_n_past": "not the next position",
    "step_sampler_selects_none": "selects no token",
    "seq_rm_refused": "refused",
    "create_two_draft_contexts": "both need a draft context",
    "create_eagle3": "general.architecture",
    "create_strategy_twice": "listed twice",
    "create_ngram_size_zero": "size_n",
    "create_ngram_size_too_big": "size_m",
    "create_ngram_simple_m_below_n": "would never draft",
    "create_mod_min_over_max": "mod_n_min",
    "create_cache_missing_file": "cannot open",
    "create_cache_malformed_file": "token count of 0",
    "create_simple_without_draft_model": "needs a draft model",
    "create_simple_vocab_mismatch": "vocabulary",
    "create_draft_model_unused": "no strategy listed uses a draft model",
}

# A Windows libllama exports llama.h alone, so the wrapper cannot read the target's
# n_outputs_max there (the header says so); the case is left out on PE builds, not passed.
UNCHECKED_ON_PE = {"create_few_outputs"}


@pytest.fixture(scope="module", params=PLATFORMS)
def build(
    request: pytest.FixtureRequest, native_build: BuildFactory, tree_pin: Path
) -> BuildResult:
    result = native_build(tree_pin, request.param)
    assert result.mtp.supported, result.mtp.describe()
    return result


@pytest.fixture(scope="module")
def statuses(build: BuildResult, tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    decls = read_declarations(
        build.include_dir / "llama_mtp.h", [build.include_dir], tmp_path_factory.mktemp("clang")
    )
    prefix = "LLAMA_MTP_STATUS_"
    return {k.removeprefix(prefix): v for k, v in decls.enums.items() if k.startswith(prefix)}


@pytest.fixture(scope="module")
def execution(build: BuildResult) -> Execution:
    try:
        return execution_here(build.platform)
    except CannotRunError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def cases_exe(build: BuildResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cases")
    extra = ["-D__USE_MINGW_ANSI_STDIO=1"] if build.platform.binary_format == "pe" else []
    exe = compile_cases(build, host_toolchain(build.platform).c_compiler, out, extra)
    place_libraries_beside(build.platform, build.lib_dir, out)
    return exe


def _run(run: Execution, exe: Path, *args: Path | str) -> subprocess.CompletedProcess[str]:
    """mtp_cases with these arguments (a Path as the program names it)."""
    named = (run.program_path(a) if isinstance(a, Path) else a for a in args)
    argv = [*run.prefix, str(exe), *named]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=600, env={**os.environ, **run.env}
    )


def _check(
    cases: dict[str, tuple[int, str]], expected: dict[str, str], statuses: dict[str, int]
) -> None:
    problems = []
    for name, want in expected.items():
        if name not in cases:
            problems.append(f"{name}: no result")
            continue
        code, message = cases[name]
        if code != statuses[want]:
            problems.append(
                f"{name}: status {code} ({message!r}), expected {want} ({statuses[want]})"
            )
        elif want != "OK" and not message.strip():
            problems.append(f"{name}: {want} without a message")
        elif name in MESSAGES and MESSAGES[name] not in message:
            problems.append(f"{name}: message {message!r} does not name {MESSAGES[name]!r}")
    assert not problems, "\n".join(problems)


def test_error_cases_without_model(
    execution: Execution, cases_exe: Path, statuses: dict[str, int], tree_pin: Path
) -> None:
    proc = _run(execution, cases_exe)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    cases, info = parse_cases(proc.stdout)
    _check(cases, NO_MODEL_CASES, statuses)
    assert int(info["default_n_max"]) == DRAFT_DEFAULT and info["default_n_min"] == "0"
    assert float(info["default_p_min"]) == 0.0
    assert info["create_null_context_handle_cleared"] == "1"
    assert info["get_context_null"] == "1"
    assert info["embd_supported"] == "1"  # the pinned tree mirrors embedding rows
    assert info["free_foreign_says"] == "1" and info["get_context_foreign_null"] == "1"
    # the commit the build was given: the tree's, or "unknown" for a tree whose source states
    # none (a PyPI sdist)
    assert info["llama_commit"] == (Tree.read(tree_pin).commit or UNKNOWN_COMMIT)


def test_chat_cases_without_model(
    execution: Execution, cases_exe: Path, statuses: dict[str, int]
) -> None:
    """The chat section on template texts: each misuse its status with llama.cpp's own message
    (not a sliced "std::exception"), and a plain request rendered and parsed."""
    import json

    proc = _run(execution, cases_exe)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    cases, info = parse_cases(proc.stdout)
    _check(cases, CHAT_CASES, statuses)
    for name in ("chat_init_bad_jinja", "chat_apply_bad_schema", "schema_unresolvable"):
        assert "std::exception" not in cases[name][1], cases[name]
    assert info["chat_apply_raising_says_why"] == "1"
    assert info["chat_init_refused_cleared"] == "1" and info["chat_apply_refused_cleared"] == "1"
    result = json.loads(info["chat_result"])
    assert result["prompt"] == "<|system|>Be brief.\n<|user|>Hi\n<|assistant|>"
    assert result["grammar"] == "" and result["grammar_triggers"] == []
    message = json.loads(info["chat_message"])
    assert message == {
        "role": "assistant", "content": "Hello there", "reasoning_content": "", "tool_calls": []
    }  # fmt: skip
    assert info["schema_grammar_has_root"] == "1"


def test_error_cases_with_models(
    execution: Execution,
    cases_exe: Path,
    statuses: dict[str, int],
    build: BuildResult,
    test_models: tuple[Path, Path],
    two_nextn_model: Path,
) -> None:
    agree, plain = test_models
    proc = _run(execution, cases_exe, agree, plain, two_nextn_model)
    assert proc.returncode == 0 and "DONE" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    cases, info = parse_cases(proc.stdout)
    expected = dict(MODEL_CASES)
    if build.platform.binary_format == "pe":
        for name in UNCHECKED_ON_PE:
            del expected[name]
            assert name not in cases
        assert info["create_few_outputs_unchecked"] == "1"
    _check(cases, expected, statuses)
    assert info["nextn_plain"] == "0"
    assert info["nextn_two"] == "2"
    assert info["nextn_agree"] == "1"
    # refused calls left the target's cells alone
    assert info["seq_rm_refused_kept"] == "1"
    assert info["step_wrong_n_past_kept"] == "1"
    assert info["step_sampler_selects_none_kept"] == "1"
    assert info["free_twice_says"] == "1" and info["get_context_freed_null"] == "1"
    assert int(info["drafted"]) == DRAFT_DEFAULT  # the default n_max; the head always agrees
    n_drafts, n_drafted, n_accepted, n_steps = (int(x) for x in info["stats"].split())
    assert n_steps > 0 and n_drafts > 0 and 0 < n_accepted <= n_drafted
    assert info["stats_after_reset"].split() == ["0", "0", "0", "0"]
    # the CPU backend takes the draft's top-k sampler: every draft was sampled there
    assert int(info["backend_sampled"]) == n_drafts
    assert info["v1_stats_tail_untouched"] == "1"
    assert info["greedy_identical"] == "1", "speculative steps changed greedy output"


@pytest.fixture(scope="module")
def strategy_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, Path]:
    """(other, cache_ok, cache_bad, missing): a model with another vocabulary size (more than
    llama.cpp's 128 tokens of slack), an n-gram cache file of one record as llama.cpp writes
    them (4 token n-gram, count, (token, count) pairs), one whose record has no tokens, and a
    path that does not exist."""
    from generator.testmodel import write_test_model

    folder = tmp_path_factory.mktemp("strategies")
    other = write_test_model(folder / "other.gguf", "plain", seed=0, vocab=512)
    ok = folder / "ok.lookup"
    ok.write_bytes(struct.pack("<4i", 10, 11, 12, -1) + struct.pack("<iii", 1, 13, 2))
    bad = folder / "bad.lookup"
    bad.write_bytes(struct.pack("<4i", 10, 11, 12, -1) + struct.pack("<i", 0))
    return other, ok, bad, folder / "missing.lookup"


def test_strategy_cases(
    execution: Execution,
    cases_exe: Path,
    statuses: dict[str, int],
    test_models: tuple[Path, Path],
    two_nextn_model: Path,
    strategy_files: tuple[Path, Path, Path, Path],
) -> None:
    agree, plain = test_models
    proc = _run(execution, cases_exe, agree, plain, two_nextn_model, *strategy_files)
    assert proc.returncode == 0 and "DONE" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    cases, info = parse_cases(proc.stdout)
    _check(cases, STRATEGY_CASES, statuses)
    assert info["name_ngram_mod"] == "ngram-mod" and info["name_bogus_null"] == "1"
    names = dict(entry.split("=") for entry in info["status_names"].split())
    assert {int(v): n for v, n in names.items() if n != "-"} == {
        value: name.lower() for name, value in statuses.items()
    }, "llama_mtp_status_name is not the header's enumerators, lower case"
    assert names["-1"] == "-" and names[str(max(statuses.values()) + 1)] == "-"
    assert names[str(statuses["NOT_IN_RELEASE"])] == "not_in_release"
    assert info["n_strategies_null"] == "-1"
    # llama.cpp's own defaults for an n-gram map (common_params_speculative_ngram_map) and ngram-mod
    assert info["default_ngram"].split() == ["12", "48", "1", "24", "48", "64"]
    for run in (*RUNS, "mix"):
        assert info[f"run_{run}_identical"] == "1", f"{run} changed greedy output"
        drafted, accepted = (int(x) for x in info[f"run_{run}_totals"].split())
        assert 0 < accepted <= drafted, run
        assert info[f"run_{run}_sums"] == "1", run
    # the mix: both strategies drafted, and some of each was accepted
    per = [tuple(int(x) for x in entry.split(":")) for entry in info["run_mix_per"].split()]
    assert sorted(t for t, *_ in per) == [3, 6]  # draft-mtp and ngram-simple
    assert all(drafts > 0 and 0 < acc <= drafted for _, drafts, drafted, acc in per), per


@dataclass(frozen=True)
class LayerDraft:
    """A draft of generator.testdrafts passed to a strategy that reads the target's layers.

    ``status`` None: llama.cpp's own loader refuses the file (the wrapper never sees it); ``run``:
    after an OK create, a speculative run that must give the greedy output."""

    kind: str
    strategy: str
    status: str | None
    message: str  # what the refusal must name
    options: dict[str, Any]  # write_test_draft's
    p_min: float
    run: bool


def _draft(
    kind: str,
    status: str | None,
    message: str = "",
    *,
    strategy: str = "",
    p_min: float = 0.0,
    run: bool = False,
    **options: Any,
) -> LayerDraft:
    """A case; the strategy is the kind's own (draft-<kind>) unless named."""
    return LayerDraft(kind, strategy or f"draft-{kind}", status, message, options, p_min, run)


MISMATCH = "DRAFT_MISMATCH"

# Against the plain test target (qwen35, 2 layers, width 64, 256 tokens); each refusal is a check
# of llama_mtp_layer_drafts.cpp.
LAYER_DRAFTS = {
    "eagle3_ok": _draft("eagle3", "OK", run=True),
    "dflash_ok": _draft("dflash", "OK", run=True),
    "dspark_ok": _draft("dspark", "OK", run=True),
    "eagle3_as_dflash": _draft("eagle3", MISMATCH, "not a 'dflash'", strategy="draft-dflash"),
    "dflash_as_eagle3": _draft("dflash", MISMATCH, "not a 'eagle3'", strategy="draft-eagle3"),
    "dspark_as_dflash": _draft(
        "dspark", MISMATCH, "run it with draft-dspark", strategy="draft-dflash"
    ),
    "dflash_as_dspark": _draft(
        "dflash", MISMATCH, "run it with draft-dflash", strategy="draft-dspark"
    ),
    "eagle3_layer_out_of_range": _draft(
        "eagle3", MISMATCH, "target layer 7 is outside [0, 2]", target_layers=[0, 1, 7]
    ),
    "eagle3_layer_negative": _draft(
        "eagle3", MISMATCH, "target layer -1 is outside [0, 2]", target_layers=[-1, 0, 1]
    ),
    "dflash_layer_out_of_range": _draft(
        "dflash", MISMATCH, "target layer 5 is outside [0, 2]", target_layers=[0, 5]
    ),
    # 2 == the target's layer count: EAGLE-3 reads the final hidden state there; DFlash would read
    # the input after the last layer, which qwen35 does not export
    "dflash_past_the_last_layer": _draft(
        "dflash", MISMATCH, "target layer 2 (past the last layer)", target_layers=[0, 2]
    ),
    # llama.cpp's loader refuses these itself (EAGLE-3: exactly 3 layers; DFlash: at least one)
    "eagle3_two_layers": _draft("eagle3", None, target_layers=[0, 1]),
    "dflash_no_layers": _draft("dflash", None, target_layers=[]),
    "eagle3_narrower_draft": _draft(
        "eagle3", MISMATCH, "token_embd.weight is 64 wide, the draft is 32", draft_embd=32
    ),
    "eagle3_for_a_narrower_target": _draft(
        "eagle3", MISMATCH, "eagle3.target_hidden_size is 32, the target's width is 64", embd=32
    ),
    "dflash_narrower_draft": _draft(
        "dflash", MISMATCH, "its width is 32, the target's 64", draft_embd=32
    ),
    # 300 tokens: within draft-simple's slack of 128, but these drafts read the target's ids
    "dflash_other_vocab_size": _draft(
        "dflash", "VOCAB_MISMATCH", "it has 300 tokens, the target 256", vocab=300
    ),
    "dflash_no_mask_token": _draft("dflash", MISMATCH, "no mask token", mask_token=None),
    "dspark_p_min_no_confidence_head": _draft(
        "dspark", "INVALID_ARGUMENT", "no confidence head", p_min=0.5
    ),
}


@pytest.fixture(scope="module")
def layer_draft_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The plain target ("target") and each case's draft."""
    from generator.testdrafts import write_test_draft
    from generator.testmodel import write_test_model

    folder = tmp_path_factory.mktemp("layer-drafts")
    files = {"target": write_test_model(folder / "target.gguf", "plain", seed=0)}
    for name, case in LAYER_DRAFTS.items():
        files[name] = write_test_draft(folder / f"{name}.gguf", case.kind, 0, **case.options)
    return files


@pytest.mark.parametrize("name", LAYER_DRAFTS)
def test_layer_draft_cases(
    execution: Execution,
    cases_exe: Path,
    statuses: dict[str, int],
    layer_draft_files: dict[str, Path],
    name: str,
) -> None:
    """Each draft in a process of its own: the status, and an exit of its own (no abort)."""
    case = LAYER_DRAFTS[name]
    target, draft = layer_draft_files["target"], layer_draft_files[name]
    run: list[Path | str] = ["run"] if case.run else []
    args = ("--layer-draft", name, target, draft, case.strategy, repr(case.p_min), *run)
    proc = _run(execution, cases_exe, *args)
    output = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode >= 0, f"killed by signal {-proc.returncode}:\n{output}"
    assert proc.returncode == 0 and "DONE" in proc.stdout, output
    cases, info = parse_cases(proc.stdout)
    assert "setup_failed" not in info, output
    if case.status is None:
        assert info["draft_load_failed"] == "1" and name not in cases, output
        return
    assert info["draft_load_failed"] == "0", output
    _check(cases, {name: case.status}, statuses)
    assert case.message in cases[name][1], cases[name]
    if case.run:
        _check(cases, {f"{name}_create": "OK", f"{name}_steps": "OK"}, statuses)
        assert info[f"{name}_identical"] == "1", f"{name} changed greedy output"
        drafted, accepted = (int(x) for x in info[f"{name}_totals"].split())
        assert 0 < accepted <= drafted, info[f"{name}_totals"]
