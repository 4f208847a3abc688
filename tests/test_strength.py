"""Every correctness case is strong: zeros, the unchanged input and a bfloat16 downcast all fail it.

A case that a lazy or lossy answer passes grades nothing; this runs the fakes through the very
judge the grader uses, with each case's own inputs and tolerance. Each case is checked where it
is graded: the CPU tier's cases on the CPU, the GPU tier's large ones on the GPU (`make test-gpu`),
where their references take milliseconds instead of the minutes a CPU spends on them.
"""

from __future__ import annotations

import pytest
import torch

from conftest import requires_gpu
from grader.assignment import cases
from grader.judging.numerics import judge
from grader.assignment.loading import load_assignments

pytestmark = pytest.mark.student


def _all_cases() -> list:
    return list(_each_case())


def _each_case():
    for assignment in load_assignments():
        for part in assignment.parts:
            for index, case in enumerate(part.cases):
                on_gpu = case.tier == "gpu"
                yield pytest.param(assignment, part, case, "cuda" if on_gpu else "cpu",
                                   marks=[pytest.mark.gpu, requires_gpu] if on_gpu else [],
                                   id=f"{assignment.name}/{part.name}/{index}:{case.label}")  # fmt: skip


def _fakes(inputs: dict, reference: torch.Tensor, dtype: torch.dtype) -> dict:
    fakes = {"zeros": torch.zeros(reference.shape, dtype=dtype, device=reference.device)}
    tensors = list(cases.tensors(inputs).values())
    same_shape = [t for t in tensors if t.shape == reference.shape]
    if same_shape:
        fakes["unchanged input"] = same_shape[0].clone()
    # An output that stacks several results of an input's shape (attention's dq, dk, dv): the
    # inputs themselves, stacked.
    stacked = [t for t in tensors if tuple(t.shape) == tuple(reference.shape[1:])]
    if not same_shape and len(stacked) >= reference.shape[0]:
        fakes["unchanged input"] = torch.stack(stacked[: reference.shape[0]])
    # An output that holds an input's elements in another shape (a transpose's): the input's
    # elements in their own order, read in the output's shape, as a kernel that copies them leaves them.
    rearranged = [t for t in tensors if t.numel() == reference.numel()]
    if "unchanged input" not in fakes and rearranged:
        fakes["unchanged input"] = rearranged[0].reshape(reference.shape).clone()
    if dtype != torch.bfloat16:
        fakes["bfloat16 downcast"] = reference.to(torch.bfloat16).to(dtype)
    return fakes


@pytest.mark.parametrize("assignment, part, case, device", _all_cases())
def test_case_rejects_lazy_and_lossy_answers(assignment, part, case, device):
    seed = cases.seed_for(assignment, part, "case", 0)
    inputs = cases.case_inputs(assignment, part, case, seed, device)
    reference = cases.reference_output(assignment, part, inputs)
    dtype = cases.DTYPES[case.dtype]
    tolerance = part.tolerance_for(case.dtype)
    assert judge(reference.to(dtype), reference, dtype, tolerance).ok, "the rounded reference itself must pass"
    fakes = _fakes(inputs, reference, dtype)
    assert "unchanged input" in fakes, "every case here has an input of the output's shape"
    for name, fake in fakes.items():
        verdict = judge(fake, reference, dtype, tolerance)
        assert not verdict.ok, f"{name} passes {case.label}: the case (or its tolerance) is too weak"
