"""What the machine's NVIDIA GPU and CUDA toolkit are: nvidia-smi's answer, nvcc's version."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# nvidia-smi --query-gpu fields, in the order of QUERY's columns.
QUERY_FIELDS = ("name", "compute_cap", "driver_version", "memory.total")
QUERY = ["--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader"]
_COMPUTE_CAP = re.compile(r"^([1-9][0-9]?)\.([0-9])$")
TIMEOUT_S = 60


@dataclass(frozen=True)
class Gpu:
    name: str
    compute_cap: str  # "9.0"
    driver_version: str
    memory: str

    @property
    def cuda_arch(self) -> str:
        """CMake's CUDA architecture for this GPU (``--cuda-arch``)."""
        return cuda_arch(self.compute_cap)


def cuda_arch(compute_cap: str) -> str:
    """``9.0`` -> ``90``, ``12.0`` -> ``120``, ``8.6`` -> ``86``; ValueError for anything else."""
    found = _COMPUTE_CAP.match(compute_cap.strip())
    if found is None:
        raise ValueError(f"not a compute capability: {compute_cap!r}")
    return found.group(1) + found.group(2)


def parse_gpus(text: str) -> list[Gpu]:
    """The GPUs in nvidia-smi's CSV answer to ``QUERY`` (one line each); ValueError for a line
    that is not one."""
    gpus = []
    for line in text.strip().splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(QUERY_FIELDS):
            raise ValueError(f"nvidia-smi printed {line!r}, not {', '.join(QUERY_FIELDS)}")
        gpu = Gpu(*cells)
        gpu.cuda_arch  # noqa: B018 (refuses a line whose compute capability is not one)
        gpus.append(gpu)
    return gpus


def query_gpus() -> tuple[list[Gpu], str]:
    """The GPUs nvidia-smi lists, and "" ; or no GPUs and why there are none here."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return [], "no nvidia-smi on PATH: no NVIDIA driver on this machine"
    try:
        proc = subprocess.run(
            [smi, *QUERY], capture_output=True, text=True, check=False, timeout=TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"nvidia-smi did not answer ({exc})"
    if proc.returncode != 0:
        said = (proc.stdout + proc.stderr).strip().splitlines()[:1] or ["no output"]
        return [], f"nvidia-smi failed (exit {proc.returncode}): {said[0]}"
    try:
        gpus = parse_gpus(proc.stdout)
    except ValueError as exc:
        return [], str(exc)
    return gpus, "" if gpus else "nvidia-smi lists no GPU"


def tool_version(path: Path | None) -> str:
    """The line of ``path --version`` that names the release (nvcc's ``Cuda compilation tools,
    release 13.0, V13.0.88``), else its last line; "" when there is no such program."""
    if path is None:
        return ""
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, check=False, timeout=TIMEOUT_S
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = [line.strip() for line in out.strip().splitlines() if line.strip()]
    release = [line for line in lines if "release" in line]
    return (release or lines or [""])[-1]
