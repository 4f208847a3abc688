"""Both tiers grade a shared case on the very same inputs (grader/assignment/cases.py, case_inputs).

Drawn on each device, a case's inputs differed between the tiers (CUDA's generator is not the
CPU's), and a kernel whose bug only some draws show got two verdicts (issue 45: a FlashAttention
that counts the zero-padded keys past N in its softmax passed the one-query case on an H100 and
failed it on the CPU tier, whose second call drew a query with a score of -10 instead of a loud one).
"""

from __future__ import annotations

import pytest
import torch

from conftest import requires_gpu
from grader.assignment import cases
from grader.assignment.loading import load_assignments


def _shared_cases() -> list:
    """Every correctness case both tiers grade, of the parts written in Python (a CUDA C part's
    cases run on the GPU tier only)."""
    return [pytest.param(a, p, i, c, id=f"{a.name}/{p.name}/{i}:{c.label}") for a in load_assignments()
            for p in a.parts if not p.is_cuda for i, c in enumerate(p.cases) if c.tier == "both"]  # fmt: skip


def _same_layout(moved: torch.Tensor, drawn: torch.Tensor) -> None:
    assert (moved.shape, moved.stride(), moved.storage_offset()) == (drawn.shape, drawn.stride(), drawn.storage_offset())
    # The whole storage moves: a strided case's gaps between rows hold what they held on the CPU.
    assert moved.untyped_storage().nbytes() == drawn.untyped_storage().nbytes()
    assert moved.dtype == drawn.dtype


@pytest.mark.parametrize("assignment, part, index, case", _shared_cases())
def test_a_shared_case_moves_to_another_device_layout_and_all(assignment, part, index, case):
    """Moved to a device that holds no values (meta), a shared case keeps each tensor's shape,
    strides, offset and storage: a kernel that ignores a row stride reads on the GPU what it
    read on the CPU tier."""
    seed = cases.seed_for(assignment, part, "case", index)
    drawn = cases.case_inputs(assignment, part, case, seed, "cpu")
    moved = cases.case_inputs(assignment, part, case, seed, "meta")
    assert drawn.keys() == moved.keys()
    for name, tensor in cases.tensors(drawn).items():
        assert moved[name].device.type == "meta"
        _same_layout(moved[name], tensor)
    assert {k: v for k, v in drawn.items() if not isinstance(v, torch.Tensor)} == \
        {k: v for k, v in moved.items() if not isinstance(v, torch.Tensor)}  # fmt: skip


@pytest.mark.gpu
@requires_gpu
@pytest.mark.parametrize("assignment, part, index, case", _shared_cases())
def test_the_gpu_tier_grades_a_shared_case_on_the_cpu_tiers_inputs(assignment, part, index, case):
    seed = cases.seed_for(assignment, part, "case", index)
    for drawn_seed in (seed, seed + 1):  # the case's first call, and its second (worker.FOLLOWUP_SEED_OFFSET)
        drawn = cases.case_inputs(assignment, part, case, drawn_seed, "cpu")
        on_gpu = cases.case_inputs(assignment, part, case, drawn_seed, "cuda")
        for name, tensor in cases.tensors(drawn).items():
            assert on_gpu[name].is_cuda
            _same_layout(on_gpu[name], tensor)
            assert torch.equal(on_gpu[name].cpu(), tensor), f"{name} differs between the tiers"
