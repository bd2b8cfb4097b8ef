"""The MTP smoke test: greedy generation with and without MTP, on the platform's own machine.

:func:`run_smoke` writes the tiny test models (``agree``, ``partial``, ``plain``; or takes a real
MTP GGUF) and runs one of two drivers where the platform registry says the platform's programs
run here (natively, under qemu-aarch64, under wine):

* ``driver.py``, through the generated runtime, under the platform's own Python (this machine's,
  or Debian's arm64 Python under qemu);
* ``mtp_smoke.c``, compiled for the platform by the toolchain that built it, where no Python for
  the platform can be had (Windows under wine): the same generation loops in C over libllama and
  libllama_mtp, printing the same results.

The checks run on the host over either driver's results:

* MTP output equals plain greedy output token for token, and was streamed in order,
* drafted > 0 and accepted > 0 with MTP,
* on ``partial``: 0 < acceptance < 1,
* on ``plain`` with MTP asked for: the typed refusal (``LlamaUnsupportedError`` from the runtime,
  ``LLAMA_MTP_STATUS_NO_NEXTN_LAYERS`` from the wrapper),
* with the test models, the other strategies: draft-simple (with the ``draft`` test model),
  draft-eagle3, draft-dflash and draft-dspark (with their test drafts, :mod:`generator.testdrafts`,
  which disagree with the target for some tokens), each n-gram strategy and an n-gram + draft-mtp
  mix, on a prompt that repeats itself: output
  identical to plain greedy output, and every strategy of a run drafted and had drafts accepted
  (both drivers),
* on CPU builds, the RPC part (both drivers; :mod:`generator.smoke.rpc_part`): the target split
  over two loopback workers of the build equals the local run, a dead port and another protocol
  version are refused, a worker lost mid-generation ends the client.

A platform whose programs cannot run here is ``not-run`` with the reason, never passed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generator.emit.wrapper_contract import (
    STRATEGY_PREFIX,
    header_macro,
    status_name,
    strategy_name,
)
from generator.errors import UsageError
from generator.native.host import execution_here
from generator.platforms import CannotRunError, Execution, Platform, get_platform
from generator.progress import ticking
from generator.smoke.devices import (
    ALL_LAYERS,
    DEVICE_PREFIX,
    absent_device_reason,
    device_environment,
    driver_missing_reason,
)
from generator.smoke.rpc_part import rpc_plan

DRIVER = Path(__file__).resolve().with_name("driver.py")
C_DRIVER = Path(__file__).resolve().with_name("mtp_smoke.c")
PYTHON_REFUSAL = "LlamaUnsupportedError"
# The C driver reports a refusal by llama_mtp_status_name.
C_REFUSAL = status_name("LLAMA_MTP_STATUS_NO_NEXTN_LAYERS")
PASSED = "passed"
FAILED = "failed"
NOT_RUN = "not-run"
TEST_PROMPT = tuple(range(10, 20))
# The strategies part: a prompt whose continuation repeats it (the test models predict t + 1),
# so n-gram strategies find their drafts; llama.cpp's default n-gram sizes (12, 48) fit in it.
REPEATING_PROMPT = (*range(10, 30), *range(10, 30), *range(10, 30), *range(10, 14))
STRATEGY_DRAFT_MAX = 8
# Past the prompt's repeats (the first 16 tokens), so that a mix's draft-mtp drafts too.
STRATEGY_MIN_TOKENS = 32
# The mode the MTP runs report (draft-mtp's name, by the header's rule).
MTP_MODE = strategy_name(STRATEGY_PREFIX + "DRAFT_MTP")
# Each run: its strategies, by their enumerators in llama_mtp.h (names by the header's rule), and
# the test model it drafts with (a TEST_MODELS name), if any. The drafts disagree with the target
# for some tokens: acceptance above zero and below one.
_RUNS = (
    (("DRAFT_SIMPLE",), "draft"),
    (("DRAFT_EAGLE3",), "eagle3-partial"),
    (("DRAFT_DFLASH",), "dflash-partial"),
    (("DRAFT_DSPARK",), "dspark-partial"),
    (("NGRAM_SIMPLE",), None),
    (("NGRAM_MAP_K",), None),
    (("NGRAM_MAP_K4V",), None),
    (("NGRAM_MOD",), None),
    (("NGRAM_CACHE",), None),
    (("NGRAM_MOD", "DRAFT_MTP"), None),
)
STRATEGY_RUNS = tuple(
    (" + ".join(names), names, draft)
    for names, draft in (
        (tuple(strategy_name(STRATEGY_PREFIX + m) for m in members), draft)
        for members, draft in _RUNS
    )
)
REAL_MODEL_PROMPT = "The capital of France is Paris. The capital of Germany is"
# The media part: a prompt holding libmtmd's default marker, room for the image's rows.
MEDIA_PROMPT = "Describe <__media__> in a few words:"
MEDIA_MAX_TOKENS = 24
MEDIA_N_CTX = 1024
MEDIA_COLOUR = (200, 120, 40)
DEFAULT_MAX_TOKENS = 48
DRIVER_TIMEOUT_S = 1800


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class MetricsRow:
    model: str
    mode: str
    generated: int
    drafted: int
    accepted: int
    acceptance: float
    steps: int
    tokens_per_second: float


@dataclass
class SmokeReport:
    platform: str
    status: str  # passed, failed or not-run
    reason: str = ""
    runner: str = ""
    checks: list[Check] = field(default_factory=list)
    rows: list[MetricsRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # recorded, not checked (backend sampling)

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def table(self) -> str:
        """Metrics and checks as plain-text tables."""
        lines = [
            f"smoke {self.platform}: {self.status}" + (f" ({self.reason})" if self.reason else "")
        ]
        if self.runner:
            lines.append(f"  ran {self.runner}")
        if self.rows:
            head = ("model", "mtp", "tokens", "drafted", "accepted", "acceptance", "steps", "tok/s")
            body = [
                (r.model, r.mode, str(r.generated), str(r.drafted), str(r.accepted),
                 f"{r.acceptance:.3f}", str(r.steps), f"{r.tokens_per_second:.1f}")
                for r in self.rows
            ]  # fmt: skip
            widths = [max(len(row[i]) for row in (head, *body)) for i in range(len(head))]
            for row in (head, *body):
                cells = "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
                lines.append(("  " + cells).rstrip())
        for check in self.checks:
            mark = "ok  " if check.ok else "FAIL"
            lines.append(f"  {mark} {check.name}" + (f": {check.detail}" if check.detail else ""))
        lines += [f"  note {note}" for note in self.notes]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "status": self.status,
            "reason": self.reason,
            "runner": self.runner,
            "checks": [vars(c) for c in self.checks],
            "rows": [vars(r) for r in self.rows],
            "notes": list(self.notes),
        }


def _progress(platform: str, message: str) -> None:
    print(f"smoke {platform}: {message}", file=sys.stderr, flush=True)


def not_run_reason(platform: str) -> str | None:
    """Why the smoke test cannot run on ``platform`` here (None: it can)."""
    try:
        execution_here(get_platform(platform))
    except CannotRunError as exc:
        return str(exc)
    return None


def _python_command(
    plat: Platform, run: Execution, python: list[str] | None = None
) -> tuple[list[str], str]:
    """The platform's Python here (``python`` when given), and words for the report."""
    if python:
        return python, f"{run.how} ({python[0]})"
    if not run.prefix:
        return [sys.executable], run.how
    from generator.smoke.aarch64_python import ensure_aarch64_python

    if plat.processor != "aarch64" or plat.system != "Linux":
        raise CannotRunError(f"no {plat.name} Python can be set up {run.how}")
    return ensure_aarch64_python().command(), f"{run.how} (Debian arm64 python3.11)"


def vocabulary_for_tree(tree_root: Path | None) -> str:
    """The test models' vocabulary a tree's model loader takes: llama.cpp's dummy ``test``
    tokenizer where ``src/llama-vocab.cpp`` knows it (later trees), else ``bytes`` (a
    SentencePiece vocabulary every tree loads). Without a tree: ``test``."""
    if tree_root is None:
        return "test"
    loader = tree_root / "src" / "llama-vocab.cpp"
    text = loader.read_text(encoding="utf-8", errors="replace") if loader.is_file() else ""
    return "test" if 'tokenizer_model == "test"' in text else "bytes"


def tree_image(tree_root: Path | None) -> Path | None:
    """The tree's own test image (``tools/mtmd/test-1.jpeg``), where it has one."""
    if tree_root is None:
        return None
    image = tree_root / "tools" / "mtmd" / "test-1.jpeg"
    return image if image.is_file() else None


def _model_options(vocabulary: str) -> dict[str, Any]:
    """write_test_model arguments for ``vocabulary`` (bytes needs room for its 259 tokens)."""
    from generator.testmodel import BYTES_VOCAB_MIN

    if vocabulary == "test":
        return {}
    return {"vocabulary": vocabulary, "vocab": max(BYTES_VOCAB_MIN, 320)}


# The test models' files, by the name the plan gives each (``run_smoke``'s ``models_dir``): the
# qwen35 models (testmodel.py), the drafts that read the target's layers (testdrafts.py), the
# projector (testvision.py).
_QWEN35_MODELS = ("agree", "partial", "plain", "draft")
_LAYER_DRAFTS = ("eagle3-partial", "dflash-partial", "dspark-partial")
TEST_MODELS = (*_QWEN35_MODELS, *_LAYER_DRAFTS, "projector")


def write_test_models(folder: Path, vocabulary: str) -> dict[str, Path]:
    """Write every test model the smoke reads (``TEST_MODELS``: the qwen35 models, the draft
    models, the projector matched to them) into ``folder``, ``<name>.gguf`` each."""
    from generator.testdrafts import write_test_draft
    from generator.testmodel import sizes_from, write_test_model
    from generator.testvision import write_test_projector

    options = _model_options(vocabulary)
    paths = {
        kind: write_test_model(folder / f"{kind}.gguf", kind, seed=0, **options)
        for kind in _QWEN35_MODELS
    }
    for kind in _LAYER_DRAFTS:
        paths[kind] = write_test_draft(folder / f"{kind}.gguf", kind, seed=0, **options)
    sizes = sizes_from(**({"vocab": options["vocab"]} if "vocab" in options else {}))
    paths["projector"] = write_test_projector(folder / "projector.gguf", text_sizes=sizes)
    return paths


def _test_models(folder: Path, vocabulary: str, models_dir: Path | None) -> dict[str, Path]:
    """The test models: written into ``folder``, or those ``models_dir`` holds already (written
    by :func:`write_test_models` on another machine: this one may lack gguf and numpy)."""
    if models_dir is None:
        return write_test_models(folder, vocabulary)
    paths = {kind: (models_dir / f"{kind}.gguf").resolve() for kind in TEST_MODELS}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise UsageError(f"test models missing: {', '.join(missing)}")
    return paths


def _models(model: Path | None, test_models: dict[str, Path]) -> list[dict[str, Any]]:
    if model is not None:
        return [
            {"name": model.name, "path": str(model.resolve()), "prompt": REAL_MODEL_PROMPT,
             "expect_unsupported": False}
        ]  # fmt: skip
    return [
        {"name": kind, "path": str(test_models[kind]), "prompt": list(TEST_PROMPT),
         "expect_unsupported": kind == "plain"}
        for kind in ("agree", "partial", "plain")
    ]  # fmt: skip


def _strategy_plan(target: str, models: dict[str, Path], max_tokens: int) -> dict[str, Any]:
    """The strategies part on ``target`` (the ``partial`` test model), each run with its draft
    model from ``models`` (the test models by name)."""
    runs = [
        {"name": name, "strategies": list(kinds), "draft": str(models[draft]) if draft else None}
        for name, kinds, draft in STRATEGY_RUNS
    ]
    return {
        "path": target,
        "prompt": list(REPEATING_PROMPT),
        "max_tokens": max(max_tokens, STRATEGY_MIN_TOKENS),
        "draft_token_max": STRATEGY_DRAFT_MAX,
        "runs": runs,
    }


def _media_plan(work: Path, target: str, projector: Path, image: Path | None) -> dict[str, Any]:
    """The media part on ``target`` (the ``agree`` test model): the test projector matched to
    it, and ``image`` (default: a small PNG written here)."""
    from generator.testimage import write_solid_png

    if image is None:
        image = write_solid_png(work / "models" / "image.png", 96, 64, MEDIA_COLOUR)
    return {
        "path": target,
        "projector": str(projector),
        "image": str(image.resolve()),
        "prompt": MEDIA_PROMPT,
        "max_tokens": MEDIA_MAX_TOKENS,
        "n_ctx": MEDIA_N_CTX,
    }


def media_checks(part: dict[str, Any]) -> tuple[list[Check], list[MetricsRow], list[str]]:
    """The media part's checks: the image became rows of the model's input, plain greedy
    generation after it ran, and draft-mtp's output equals it with drafts accepted (or, where
    the release's speculative decoding takes no media rows, is refused as such). Bindings
    without libmtmd, or with one older than the helper API the drivers use, leave the part out,
    in a note; bindings with libmtmd whose library is missing fail."""
    if "absent" in part:
        if part.get("expected"):
            return [Check("media: libmtmd present", False, part["absent"])], [], []
        return [], [], [f"media: not run ({part['absent']})"]
    plain, mtp = part["plain"], part["mtp"]
    if "refused" in plain:
        return (
            [Check("media: plain generation after an image runs", False, plain["refused"])],
            [],
            [],
        )
    rows = [_row("agree + image", "off", plain)]
    checks = [
        Check(
            "media: the image became rows of the model's input",
            plain["image_rows"] > 0 and plain["image_positions"] > 0,
            f"{plain['image_rows']} rows on {plain['image_positions']} positions",
        ),
        Check("media: plain generation after an image produced tokens", len(plain["tokens"]) > 0),
    ]
    if "refused" in mtp:
        expected = not part.get("embd_supported")
        checks.append(Check("media: MTP refused as not in this release", expected, mtp["refused"]))
        return checks, rows, []
    rows.append(_row("agree + image", MTP_MODE, mtp))
    same = mtp["tokens"] == plain["tokens"]
    detail = "" if same else f"plain {plain['tokens'][:16]} vs mtp {mtp['tokens'][:16]}"
    checks.append(Check("media: MTP output identical to plain greedy", same, detail))
    metrics = mtp["metrics"]
    drafted, accepted = int(metrics["drafted_tokens"]), int(metrics["accepted_tokens"])
    checks.append(
        Check(
            "media: MTP drafted and accepted", drafted > 0 and accepted > 0, f"{accepted}/{drafted}"
        )
    )
    return checks, rows, []


def strategy_checks(part: dict[str, Any]) -> tuple[list[Check], list[MetricsRow]]:
    """The strategies part's checks: identical output, and each strategy drafted and was
    accepted at least once."""
    checks: list[Check] = []
    reference = part["reference"]
    rows = [_row("partial (repeating prompt)", "off", reference)]
    for run in part["runs"]:
        name = run["name"]
        if "absent" in run:
            # Only a strategy this llama.cpp release lacks may be left out: the driver says
            # whether the wrapper refused it with LLAMA_MTP_STATUS_NOT_IN_RELEASE.
            lacked = run.get("lacked_by_release") is True
            checks.append(Check(f"{name}: refused as not in this release", lacked, run["absent"]))
            continue
        if "unexpected_error" in run:
            checks.append(Check(f"{name}: runs", False, run["unexpected_error"]))
            continue
        rows.append(_row("partial (repeating prompt)", name, run))
        same = run["tokens"] == reference["tokens"]
        detail = "" if same else f"plain {reference['tokens'][:16]} vs {run['tokens'][:16]}"
        checks.append(Check(f"{name}: output identical to plain greedy", same, detail))
        per = run["metrics"].get("strategies", [])
        shown = ", ".join(f"{s['kind']} {s['accepted_tokens']}/{s['drafted_tokens']}" for s in per)
        every = bool(per) and all(s["drafted_tokens"] > 0 and s["accepted_tokens"] > 0 for s in per)
        checks.append(Check(f"{name}: every strategy drafted and was accepted", every, shown))
    return checks, rows


def driver_env(bindings_parent: Path, extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """The driver's environment: the bindings' folder on PYTHONPATH, no library folder set."""
    env = {k: v for k, v in os.environ.items() if k not in ("LLAMA_BINDGEN_LIB_DIR", "PYTHONHOME")}
    env.update(extra_env or {})
    env["PYTHONPATH"] = str(bindings_parent.resolve())
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run_with_rpc(
    command: list[str],
    plan: dict[str, Any],
    lib_dir: Path | None,
    bindings_parent: Path,
    work: Path,
    env: dict[str, str],
) -> tuple[dict[str, Any] | None, str, list[Check]]:
    """The driver's run with the RPC part: two workers of this build and a stand-in of another
    protocol version while it runs, then the run that loses a worker mid-generation; the RPC
    checks (:mod:`generator.smoke.rpc_part`)."""
    from generator.smoke import rpc_part

    with (
        rpc_part.workers(
            *rpc_part.python_worker(command, lib_dir, bindings_parent), work
        ) as started,
        rpc_part.other_version_server() as other,
    ):
        servers = [w.endpoint for w in started]
        nowhere = f"127.0.0.1:{rpc_part.free_port()}"
        plan["rpc"]["servers"] = servers
        plan["rpc"]["refuse"] = {"nothing_listens": nowhere, "other_version": other}
        data, diagnostic = run_driver(command, plan, bindings_parent, work, env)
        stderr = (work / "driver-stderr.log").read_text(encoding="utf-8", errors="replace")
        lost_plan = {**plan, "only": "rpc-lost"}
        lost_plan["rpc"] = {**plan["rpc"], "kill_pid": started[-1].process.pid}
        lost_path = work / "plan-rpc-lost.json"
        lost_path.write_text(json.dumps(lost_plan, indent=2, sort_keys=True), encoding="utf-8")
        lost = rpc_part.run_lost_worker(
            command, DRIVER, lost_path, driver_env(bindings_parent, env)
        )
    if lost is not None:
        (work / "driver-rpc-lost-stderr.log").write_text(lost.stderr, encoding="utf-8")
    checks = [rpc_part.lost_worker_check(lost)]
    if data is not None and "rpc" in data:
        refusals = rpc_part.PYTHON_REFUSALS
        checks = rpc_part.rpc_checks(data["rpc"], stderr, servers, refusals) + checks
    return data, diagnostic, checks


def _c_driver_rpc_checks(part: dict[str, Any], work: Path) -> list[Check]:
    """The C driver's RPC part judged as the Python driver's is, but for the refusals: where
    the runtime cannot run, llama.cpp's own end of the process is the record. The split runs'
    log and the lost worker's are kept in ``work``; ``part`` keeps only what is JSON."""
    from generator.smoke import rpc_part

    if "absent" in part:
        return rpc_part.rpc_checks(part, "", [], rpc_part.C_REFUSALS)
    stderr, lost, servers = part.pop("stderr"), part.pop("lost"), part["servers"]
    (work / "driver-stderr.log").write_text(stderr, encoding="utf-8")
    if lost is not None:
        (work / "driver-rpc-lost-stderr.log").write_text(lost.stderr, encoding="utf-8")
    checks = rpc_part.rpc_checks(part, stderr, servers, rpc_part.C_REFUSALS)
    return [*checks, rpc_part.lost_worker_check(lost)]


def run_driver(
    command: list[str],
    plan: dict[str, Any],
    bindings_parent: Path,
    work: Path,
    extra_env: dict[str, str] | None = None,
) -> tuple[dict[str, Any] | None, str]:
    """Run driver.py with ``plan``; (parsed last stdout line or None, diagnostic text)."""
    plan_path = work / "plan.json"
    plan_path.write_text(json.dumps(plan, indent=2, sort_keys=True), encoding="utf-8")
    env = driver_env(bindings_parent, extra_env)
    with ticking(f"smoke: the driver runs ({' '.join(Path(c).name for c in command[:2])})"):
        proc = subprocess.run(
            [*command, str(DRIVER), str(plan_path)],
            capture_output=True, text=True, env=env, timeout=DRIVER_TIMEOUT_S, check=False,
        )  # fmt: skip
    (work / "driver-stderr.log").write_text(proc.stderr, encoding="utf-8")
    return driver_result(proc)


def driver_result(
    proc: subprocess.CompletedProcess[str], what: str = ""
) -> tuple[dict[str, Any] | None, str]:
    """A driver's result, the JSON object on its last stdout line (None when there is none), and
    a diagnostic (``what`` first) with its exit status and stderr tail."""
    lead = f"{what}: " if what else ""
    diagnostic = f"{lead}exit {proc.returncode}; stderr tail:\n{proc.stderr[-2000:]}"
    lines = proc.stdout.strip().splitlines()
    if not lines:
        return None, diagnostic
    try:
        data: dict[str, Any] = json.loads(lines[-1])
    except json.JSONDecodeError:
        return None, diagnostic + f"\nstdout tail:\n{proc.stdout[-1000:]}"
    return data, diagnostic


def _row(name: str, mode: str, run: dict[str, Any]) -> MetricsRow:
    m = run["metrics"]
    return MetricsRow(
        name, mode, int(m["generated_tokens"]), int(m["drafted_tokens"]),
        int(m["accepted_tokens"]), float(m["acceptance_rate"]), int(m["steps"]),
        float(m["tokens_per_second"]),
    )  # fmt: skip


def check_results(
    data: dict[str, Any], *, strict_partial: bool, refusal: str = PYTHON_REFUSAL
) -> tuple[list[Check], list[MetricsRow]]:
    """The smoke checks over the driver's results (``strict_partial``: the test models;
    ``refusal``: the typed error the driver reports for MTP on a model without NextN layers)."""
    checks: list[Check] = []
    rows: list[MetricsRow] = []
    checks.append(Check("MTP wrapper loaded", bool(data.get("wrapper"))))
    for entry in data.get("models", []):
        name = entry["name"]
        plain = entry["plain"]
        rows.append(_row(name, "off", plain))
        checks.append(Check(f"{name}: plain generation produced tokens", len(plain["tokens"]) > 0))
        if "mtp_error" in entry:
            err = entry["mtp_error"]
            checks.append(
                Check(
                    f"{name}: MTP asked for is refused with {refusal}",
                    err["error_type"] == refusal,
                    err["reason"]
                    if err["error_type"] == refusal
                    else f"got {err['error_type']}: {err['reason']}",
                )
            )
            continue
        if "mtp_unexpected_error" in entry:
            checks.append(Check(f"{name}: MTP runs", False, entry["mtp_unexpected_error"]))
            continue
        mtp = entry["mtp"]
        rows.append(_row(name, MTP_MODE, mtp))
        same = mtp["tokens"] == plain["tokens"]
        detail = "" if same else f"plain {plain['tokens'][:16]} vs mtp {mtp['tokens'][:16]}"
        checks.append(Check(f"{name}: MTP output identical to plain greedy", same, detail))
        checks.append(
            Check(
                f"{name}: tokens streamed in order",
                bool(mtp["streamed_in_order"] and plain["streamed_in_order"]),
            )
        )
        metrics = mtp["metrics"]
        checks.append(
            Check(
                f"{name}: drafted > 0",
                metrics["drafted_tokens"] > 0,
                str(metrics["drafted_tokens"]),
            )
        )
        checks.append(
            Check(
                f"{name}: accepted > 0",
                metrics["accepted_tokens"] > 0,
                str(metrics["accepted_tokens"]),
            )
        )
        if strict_partial and name == "partial":
            rate = float(metrics["acceptance_rate"])
            checks.append(Check(f"{name}: 0 < acceptance < 1", 0.0 < rate < 1.0, f"{rate:.3f}"))
    return checks, rows


_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
_MODEL_BUFFER = re.compile(r"\b(Vulkan\d+|CUDA\d+|MTL\d+\w*) model buffer size")


def offload_checks(backend: str, data: dict[str, Any], stderr: str) -> tuple[list[Check], str]:
    """Did the models run on the backend's device? llama.cpp's own load log must say every
    layer was offloaded and the weights sit in that device's buffer (so a silent CPU fallback
    fails), and ggml must list the device. Returns the checks and the device's description."""
    prefix = DEVICE_PREFIX[backend]
    devices = [d for d in data.get("devices", []) if str(d.get("name", "")).startswith(prefix)]
    described = "; ".join(f"{d['name']}: {d['description']}" for d in devices) or "no device"
    checks = [Check(f"a {prefix} device is present", bool(devices), described)]
    offloads = _OFFLOADED.findall(stderr)
    complete = bool(offloads) and all(done == total for done, total in offloads)
    shown = ", ".join(f"{d}/{t}" for d, t in offloads) or "no offload reported"
    checks.append(Check("every model loaded with all layers offloaded", complete, shown))
    buffers = {m for m in _MODEL_BUFFER.findall(stderr) if m.startswith(prefix)}
    checks.append(
        Check(f"model weights in a {prefix} buffer", bool(buffers), ", ".join(sorted(buffers)))
    )
    return checks, described


def _device_absent(
    backend: str,
    command: list[str],
    plan: dict[str, Any],
    bindings_parent: Path,
    work: Path,
    env: dict[str, str],
) -> str | None:
    """Why a GPU backend's device is not here (None: it is, or the backend is cpu): its driver
    library is missing, or the driver run without models lists no device of the backend."""
    if backend == "cpu":
        return None
    why = driver_missing_reason(backend)
    if why is not None:
        return why
    data, _diagnostic = run_driver(command, plan, bindings_parent, work, env)
    if data is None or not data.get("ok"):
        return None  # the real run fails with the diagnostic
    return absent_device_reason(backend, list(data.get("devices", [])))


_CANNOT_OFFLOAD = re.compile(r"(cannot be offloaded to the backend|backend offload failed[^\n]*)")


def backend_sampling_note(data: dict[str, Any], stderr: str) -> str:
    """Whether llama.cpp sampled the MTP drafts on the backend (the wrapper's
    ``backend_sampling``, on by default): per model, drafts sampled there of drafts made, and, when
    it did not, the reason llama.cpp logged."""
    counts: list[tuple[str, int, int]] = []
    for entry in data.get("models", []):
        metrics = entry.get("mtp", {}).get("metrics", {})
        if "backend_sampled_drafts" in metrics:
            counts.append(
                (entry["name"], int(metrics["backend_sampled_drafts"]), int(metrics["drafts"]))
            )
    if not counts:
        return "backend sampling: no MTP generation ran"
    shown = ", ".join(f"{name} {on}/{made}" for name, on, made in counts)
    if all(0 < on == made for _name, on, made in counts):
        return f"backend sampling on: drafts sampled on the backend {shown}"
    why = "; ".join(sorted(set(_CANNOT_OFFLOAD.findall(stderr)))) or "llama.cpp logged no reason"
    return f"backend sampling off or partly off ({why}): drafts sampled on the backend {shown}"


def _part_checks(
    plan: dict[str, Any], data: dict[str, Any]
) -> tuple[list[Check], list[MetricsRow], list[str]]:
    """The checks, rows and notes of the plan's optional parts (strategies, media); a part the
    plan has and the driver's result lacks fails."""
    checks: list[Check] = []
    rows: list[MetricsRow] = []
    notes: list[str] = []
    if "strategies" in plan:
        if "strategies" in data:
            more_checks, more_rows = strategy_checks(data["strategies"])
        else:
            more_checks, more_rows = [Check("strategies ran", False, "no result")], []
        checks += more_checks
        rows += more_rows
    if "media" in plan:
        if "media" in data:
            media_found, media_rows, notes = media_checks(data["media"])
        else:
            media_found, media_rows = [Check("media ran", False, "no result")], []
        checks += media_found
        rows += media_rows
    return checks, rows, notes


def _test_model_parts(
    plan: dict[str, Any],
    test_models: dict[str, Path],
    work: Path,
    image: Path | None,
    max_tokens: int,
    rpc: bool,
) -> None:
    """The plan's parts on the test models: strategies, media and (``rpc``) RPC."""
    partial, agree = str(test_models["partial"]), str(test_models["agree"])
    plan["strategies"] = _strategy_plan(partial, test_models, max_tokens)
    plan["media"] = _media_plan(work, agree, test_models["projector"], image)
    if rpc:
        draft, draft_max = str(test_models["draft"]), plan["draft_token_max"]
        plan["rpc"] = rpc_plan(agree, draft, list(TEST_PROMPT), max_tokens, draft_max)


def run_smoke(
    platform: str,
    lib_dir: Path | None,
    bindings_parent: Path,
    work: Path,
    *,
    model: Path | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    draft_token_max: int | None = None,
    backend: str = "cpu",
    vocabulary: str = "test",
    python: list[str] | None = None,
    image: Path | None = None,
    models_dir: Path | None = None,
) -> SmokeReport:
    """Smoke-test the libraries in ``lib_dir`` on ``platform`` (with the bindings in
    ``bindings_parent/llama_bindings`` where the platform's Python runs); ``model``: a real MTP
    GGUF instead of the test models, ``vocabulary`` the test models' (:func:`vocabulary_for_tree`).
    ``python``: a Python with the bindings installed (``lib_dir`` None: ``load()`` finds them),
    ``draft_token_max`` None: the wrapper's default. With the test models, the media part
    generates after ``image`` (default: a PNG written here) through the test projector, on the
    test models in ``models_dir`` when given (:func:`write_test_models`). Not-run: cannot run."""
    plat = get_platform(platform)
    try:
        run = execution_here(plat)
        if run.python:
            command, runner = _python_command(plat, run, python)
    except CannotRunError as exc:
        return SmokeReport(platform, NOT_RUN, str(exc))
    work.mkdir(parents=True, exist_ok=True)
    plan: dict[str, Any] = {
        "lib_dir": str(lib_dir.resolve()) if lib_dir else None,
        "max_tokens": max_tokens,
        "n_ctx": 512,
        "draft_token_max": draft_token_max or header_macro("LLAMA_MTP_DRAFT_DEFAULT"),
        "n_gpu_layers": 0 if backend == "cpu" else ALL_LAYERS,
        "models": [],
    }
    if backend != "cpu" and not run.python:
        return SmokeReport(platform, NOT_RUN, f"the {backend} smoke runs the Python driver only")
    env, device_note = device_environment(backend)
    if run.python:
        absent = _device_absent(backend, command, plan, bindings_parent, work, env)
        if absent:
            return SmokeReport(platform, NOT_RUN, absent, runner)
    test_models = {} if model is not None else _test_models(work / "models", vocabulary, models_dir)
    plan["models"] = _models(model, test_models)
    if model is None:
        # the RPC part: on CPU builds (not GPUs yet), by either driver
        rpc = backend == "cpu"
        _test_model_parts(plan, test_models, work, image, max_tokens, rpc)
    rpc_checks: list[Check] = []
    if run.python:
        how = ", with two RPC workers" if "rpc" in plan else device_note
        _progress(platform, f"running the Python driver {runner}{how}")
        if "rpc" in plan:
            run_rpc = _run_with_rpc(command, plan, lib_dir, bindings_parent, work, env)
            data, diagnostic, rpc_checks = run_rpc
        else:
            data, diagnostic = run_driver(command, plan, bindings_parent, work, env)
        refusal = PYTHON_REFUSAL
    else:
        from generator.smoke.c_driver import run_c_driver

        runner = f"{run.how} (the C driver {C_DRIVER.name}: no {platform} Python here)"
        _progress(platform, f"running the C driver {run.how}")
        data, diagnostic = run_c_driver(plat, run, plan, work)
        refusal = C_REFUSAL
        if data is not None and "rpc" in data:
            rpc_checks = _c_driver_rpc_checks(data["rpc"], work)
    if data is None:
        return SmokeReport(platform, FAILED, f"the driver printed no result ({diagnostic})", runner)
    if not data.get("ok"):
        return SmokeReport(platform, FAILED, f"the driver failed:\n{data.get('error', '')}", runner)
    checks, rows = check_results(data, strict_partial=model is None, refusal=refusal)
    return _report(platform, backend, runner, plan, data, work, checks + rpc_checks, rows)


def _report(
    platform: str,
    backend: str,
    runner: str,
    plan: dict[str, Any],
    data: dict[str, Any],
    work: Path,
    checks: list[Check],
    rows: list[MetricsRow],
) -> SmokeReport:
    """The report: ``checks`` and ``rows`` with the plan's parts' and (GPU backends) the
    device's."""
    more_checks, more_rows, notes = _part_checks(plan, data)
    checks = [*checks, *more_checks]
    rows = [*rows, *more_rows]
    if backend != "cpu":
        stderr = (work / "driver-stderr.log").read_text(encoding="utf-8", errors="replace")
        device_checks, device = offload_checks(backend, data, stderr)
        checks += device_checks
        runner = f"{runner}, on {device}"
        notes.append(backend_sampling_note(data, stderr))
    status = PASSED if all(c.ok for c in checks) else FAILED
    ran_on = data.get("machine")
    where = f"{runner} on {ran_on}" if ran_on else runner
    return SmokeReport(platform, status, "", where, checks, rows, notes)
