"""What a precompile child (child/precompile.py) shows student code: the tier it predicts.

A precompile child runs on the CPU under TRITON_INTERPRET=1, as a CPU-tier child does, and its
launches are recorded, never run (hooks.py, `dry`). To record what the GPU tier's children will
launch, the student's code must take the path it takes on the GPU, and much of it asks:
kernels tuned for a GPU behind `os.environ.get("TRITON_INTERPRET")` (the course's own solutions
launch one fixed small tile under the interpreter, and every autotuned config on a GPU), a
pruner asking `torch.cuda.current_device()` for the GPU's shared memory, a tensor-descriptor path
taken only where `a.is_cuda` and the capability is 9.0. So for the GPU tier (`install("cuda")`)
the variable is gone from the environment (Triton still interprets: its knob is set in its own
right) and torch.cuda answers the few questions such code asks as the grading GPU would
(`target.TARGET`): the current device, its capability, name and properties, a synchronize that
waits for nothing, and every tensor says it is on the GPU (its memory stays on the CPU, where no
kernel reads it). Code that allocates on "cuda" itself, or asks what the GPU cannot answer here,
raises in the precompile child: those launches are missed, and compiled when the graded child
launches them, as they were before the pass.

Installed before any student code, before the harness's snapshot (main.py).
"""

from __future__ import annotations

import os
from types import SimpleNamespace

from grader.child.target import TARGET, Target


def install(tier: str, target: Target = TARGET) -> None:
    """Show student code the `tier` ("cpu": as a CPU-tier child does, nothing to change)."""
    if tier != "cuda":
        return
    _hide_the_interpreter()
    answer_as_the_gpu(target)


def _hide_the_interpreter() -> None:
    """Triton keeps interpreting (its knob set on the knob, not through the environment, which
    setting it would write), and TRITON_INTERPRET leaves the environment."""
    from triton import knobs

    knobs.runtime.__dict__["interpret"] = True
    os.environ.pop("TRITON_INTERPRET", None)


def answer_as_the_gpu(target: Target) -> None:
    import torch

    major, minor = divmod(target.arch, 10)
    properties = SimpleNamespace(name=target.name, major=major, minor=minor, multi_processor_count=target.num_sms,
                                 warp_size=target.warp_size, max_threads_per_multi_processor=2048,
                                 total_memory=141 * 2**30, L2_cache_size=60 * 2**20,
                                 shared_memory_per_block_optin=target.max_shared_mem)  # fmt: skip
    torch.cuda.current_device = lambda: 0
    torch.cuda.get_device_capability = lambda device=None: (major, minor)
    torch.cuda.get_device_name = lambda device=None: target.name
    torch.cuda.get_device_properties = lambda device=None: properties
    torch.cuda.synchronize = lambda device=None: None
    torch.Tensor.is_cuda = property(lambda self: True)
