"""The machine a grade was measured on: device, GPU, library versions.

The parent never imports Triton (only the child runs kernels), so its version is read from
the installed package's metadata.
"""

from __future__ import annotations

import platform
from importlib import metadata

import torch

import grader
from grader.running import sandbox, stack


class DeviceError(ValueError):
    """--device cuda was asked for on a machine without a usable GPU."""


def resolve_device(requested: str) -> str:
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise DeviceError("--device cuda: torch sees no CUDA GPU on this machine (use --device cpu or auto)")
    return requested


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def describe(device: str, salted: bool = False, sandboxed: bool = True, witness: bool = False) -> dict:
    info = {
        "device": device,
        "tier": "GPU" if device == "cuda" else "CPU (Triton interpreter)",
        "grader_version": grader.__version__,
        "torch_version": torch.__version__,
        "triton_version": _version("triton"),
        "python_version": platform.python_version(),
        "platform": platform.platform(terse=True),
        "seeds": "salted (secret)" if salted else "the assignments' published seeds",
        "sandbox": sandbox.walls(sandboxed),
        "stack": stack.line(device),
    }
    if device == "cuda":
        info["witness"] = witness_line(witness)
        info["gpu_lock"] = gpu_lock_line()
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    l2_cache_mib=round(getattr(props, "L2_cache_size", 0) / 2**20, 1),
                    cuda_version=torch.version.cuda)  # fmt: skip
    return info


def gpu_lock_line() -> str:
    """Where the GPU's lock lives, which keeps every other grading of the machine out of a timed phase."""
    from grader.running.gpu_lock import machine_folder

    folder, note = machine_folder()
    return note or f"{folder}: shared by every grading on this machine, a timed phase has the GPU alone"


def witness_line(enabled: bool) -> str:
    """What the grader's witness (grader/witness) records of each GPU child, in words."""
    from grader.witness import build

    if not enabled:
        return "off (GRADER_WITNESS=0): the GPU's kernels are known from the child's own profiler"
    found = build.library()
    if isinstance(found, build.Missing):
        return f"none ({found.why}): the GPU's kernels are known from the child's own profiler only"
    return ("CUPTI, loaded by CUDA into each child before any student code: every kernel, copy and launch of "
            "each graded call, read by the grader outside the child")
