"""Fusion is counted, not assumed: the monitor sees which torch ops touch data, and a fused part
that launches a second kernel or runs any of them is `not_fused`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from grader import judging
from grader.monitor import CallMonitor
from grader.spec import REPO_ROOT, load_assignment


def _fused_part(max_kernels: int = 1):
    part = load_assignment(REPO_ROOT / "assignments" / "vector_add").parts[0]
    return dataclasses.replace(part, max_kernels=max_kernels)


def _launches(*names: str) -> list[dict]:
    return [{"kernel": name, "file": "mine.py", "own": True} for name in names]


def test_views_and_allocations_are_not_compute_but_arithmetic_is():
    x = torch.randn(8, 4)
    with CallMonitor(Path(".")) as monitor:
        y = torch.empty_like(x)
        x.view(4, 8).t()
        x[:, 1:]
    assert y.shape == x.shape
    assert monitor.compute_ops == set(), monitor.ops
    with CallMonitor(Path(".")) as monitor:
        (x * 2 + 1).tanh()
    assert {"mul", "add", "tanh"} <= monitor.compute_ops


def test_one_kernel_and_no_torch_compute_is_fused():
    assert judging.fusion(_fused_part(), {"launches": _launches("gelu_kernel"), "compute_ops": []}) is None


def test_a_second_kernel_is_not_fused_and_named():
    verdict = judging.fusion(_fused_part(), {"launches": _launches("gelu_kernel", "bias_scale_kernel")})
    assert verdict.reason == "not_fused"
    assert "2 kernel launches per call" in verdict.message and "bias_scale_kernel" in verdict.message


def test_torch_arithmetic_after_the_kernel_is_not_fused():
    verdict = judging.fusion(_fused_part(), {"launches": _launches("gelu_kernel"), "compute_ops": ["add", "mul"]})
    assert verdict.reason == "not_fused"
    assert "aten::add" in verdict.message and "aten::mul" in verdict.message


def test_repeated_runs_of_a_case_are_counted_per_call():
    outcome = {"launches": _launches("k", "k", "k"), "compute_ops": [], "calls": 3}
    assert judging.fusion(_fused_part(), outcome) is None
    assert judging.fusion(_fused_part(), {**outcome, "calls": 1}).reason == "not_fused"


def test_a_part_without_the_limit_is_not_judged_for_fusion():
    part = _fused_part()
    unlimited = dataclasses.replace(part, max_kernels=None)
    assert judging.fusion(unlimited, {"launches": _launches("a", "b"), "compute_ops": ["add"]}) is None
