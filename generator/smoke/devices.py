"""Which device a GPU backend's smoke runs on, and whether that device is here at all.

A GPU smoke passes only on the backend's own device (the checks in :mod:`generator.smoke` read
llama.cpp's load log for it). Where the machine has no such device (a CI runner without an NVIDIA
GPU, a Mac runner with only Apple's paravirtual GPU, no Vulkan driver) the smoke is ``not-run``
with the reason, never passed, and the platform is not released.
"""

from __future__ import annotations

import ctypes.util
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from generator.native.cuda_pypi import STUB_MARKER

ALL_LAYERS = 999  # n_gpu_layers: more than any test model has, so every layer is offloaded
LAVAPIPE_ICD = Path("/usr/share/vulkan/icd.d/lvp_icd.x86_64.json")
# ggml's device names: Vulkan0, CUDA0, MTL0
DEVICE_PREFIX: Mapping[str, str] = MappingProxyType(
    {"vulkan": "Vulkan", "cuda": "CUDA", "metal": "MTL"}
)
# Apple's virtual GPU lacks the SIMD-group operations most ggml Metal kernels need.
PARAVIRTUAL = "Paravirtual"


def device_environment(backend: str) -> tuple[dict[str, str], str]:
    """Environment for a GPU backend's driver, and words for the progress line. Vulkan: unless
    ``VK_ICD_FILENAMES`` names a driver already, Mesa's lavapipe (a Vulkan device on the CPU);
    ggml skips CPU-type Vulkan devices unless ``GGML_VK_VISIBLE_DEVICES`` names them."""
    if backend != "vulkan":
        return {}, ""
    if os.environ.get("VK_ICD_FILENAMES"):
        return {}, " (VK_ICD_FILENAMES as set)"
    return (
        {"VK_ICD_FILENAMES": str(LAVAPIPE_ICD), "GGML_VK_VISIBLE_DEVICES": "0"},
        " on Mesa's lavapipe",
    )


def driver_missing_reason(backend: str) -> str | None:
    """Why the backend's libraries cannot even load here (None: nothing known to be missing).
    A CUDA build links NVIDIA's driver library, which only a machine with its GPU driver has;
    the link-time stub a build here compiles (``native.cuda_pypi``) is not that driver."""
    if backend == "cuda":
        return _cuda_driver_missing()
    chosen_icd = os.environ.get("VK_ICD_FILENAMES")
    if backend == "vulkan" and not chosen_icd and not LAVAPIPE_ICD.is_file():
        return f"no Vulkan driver: Mesa's lavapipe ({LAVAPIPE_ICD}, mesa-vulkan-drivers) is missing"
    return None


def _cuda_driver_missing() -> str | None:
    found = ctypes.util.find_library("cuda")
    if found is None:
        return "no NVIDIA driver (libcuda) on this machine: the CUDA smoke needs an NVIDIA GPU"
    try:
        library = ctypes.CDLL(found)
    except OSError as exc:
        return f"NVIDIA's driver library {found} does not load here ({exc})"
    if hasattr(library, STUB_MARKER):
        return (
            f"the libcuda found ({found}) is llama-bindgen's link-time stub, not NVIDIA's "
            "driver: the CUDA smoke needs an NVIDIA GPU and its driver"
        )
    return None


def absent_device_reason(backend: str, devices: list[dict[str, Any]]) -> str | None:
    """Why the devices ggml lists (the driver's ``devices``) hold none the smoke can run on."""
    prefix = DEVICE_PREFIX[backend]
    own = [d for d in devices if str(d.get("name", "")).startswith(prefix)]
    listed = ", ".join(f"{d.get('name')} ({d.get('description')})" for d in devices) or "none"
    if not own:
        return f"no {prefix} device here (ggml lists: {listed})"
    if backend == "metal" and all(PARAVIRTUAL in str(d.get("description", "")) for d in own):
        return (
            f"only Apple's paravirtual GPU here ({listed}), without the SIMD-group operations "
            "most ggml Metal kernels need"
        )
    return None
