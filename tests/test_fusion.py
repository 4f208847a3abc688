"""Ops are judged by an allow-list, and fusion is counted, not assumed.

The monitor sees the torch ops of every thread (torch's profiler), ops.py tells which of them
compute, a part allows only what it names beyond allocation, views and copies, and a fused part
that launches a second kernel or runs any op that touches data is `not_fused`.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest
import torch

from grader.judging import integrity, ops
from grader.child.monitor import CallMonitor
from grader.messages.reports import Activity, LaunchCount, OpCount
from grader.assignment.loading import load_assignment
from grader.assignment.spec import REPO_ROOT

pytestmark = pytest.mark.student

PART = load_assignment(REPO_ROOT / "assignments" / "vector_add").parts[0]


def _fused_part(max_kernels: int = 1):
    return dataclasses.replace(PART, max_kernels=max_kernels)


def _activity(*launches: str, ops_seen: tuple[str, ...] = ()) -> Activity:
    return Activity(ops=[OpCount(name, 1) for name in ops_seen],
                    launches=[LaunchCount(name, "mine.py", True, 1) for name in launches])  # fmt: skip


def _monitored(work) -> Activity:
    with CallMonitor(Path("."), "cpu", lambda filename: True) as monitor:
        work()
    return monitor.activity()


@pytest.mark.parametrize("op, kind", [("aten::empty_like", "allocation"), ("aten::zeros", "fill"),
                                      ("aten::view", "view"), ("aten::transpose", "view"), ("aten::slice", "view"),
                                      ("aten::copy_", "movement"), ("aten::add", "compute"), ("aten::cumsum", "compute"),
                                      ("aten::aminmax", "compute"), ("aten::conv1d", "compute"),
                                      ("aten::not_an_op_at_all", "compute")])  # fmt: skip
def test_ops_are_sorted_by_what_they_do_to_data(op, kind):
    assert ops.category(op) == kind


def test_views_and_allocations_are_allowed_and_arithmetic_is_not():
    x = torch.randn(8, 4)
    seen = _monitored(lambda: (torch.empty_like(x), x.view(4, 8).t(), x[:, 1:]))
    assert integrity.forbidden_ops(PART, seen) is None, seen.ops
    seen = _monitored(lambda: (x * 2 + 1).tanh())
    verdict = integrity.forbidden_ops(PART, seen)
    assert verdict.reason == "forbidden_op" and {"aten::mul", "aten::add", "aten::tanh"} <= set(verdict.metrics["ops"])


def test_ops_missing_from_any_deny_list_are_still_forbidden():
    """stack + sum for an add, aminmax, exp2, nansum for a softmax, a 1x1 conv1d for a matmul."""
    x = torch.randn(4, 16)
    seen = _monitored(lambda: (torch.stack([x, x]).sum(0), torch.aminmax(x), torch.exp2(x), torch.nansum(x),
                               torch.nn.functional.conv1d(x[None], torch.randn(16, 4, 1))))  # fmt: skip
    names = set(integrity.forbidden_ops(PART, seen).metrics["ops"])
    assert {"aten::stack", "aten::sum", "aten::aminmax", "aten::exp2", "aten::nansum", "aten::conv1d"} <= names


def test_an_op_in_a_thread_of_the_students_is_seen():
    x = torch.randn(1000)

    def in_a_thread():
        thread = threading.Thread(target=lambda: torch.add(x, x))
        thread.start()
        thread.join()

    verdict = integrity.forbidden_ops(PART, _monitored(in_a_thread))
    assert verdict is not None and "aten::add" in verdict.metrics["ops"]


def test_an_op_with_torchs_python_dispatch_disabled_is_seen():
    x = torch.randn(1000)

    def hidden():
        with torch._C._DisableTorchDispatch():
            torch.add(x, x)

    assert "aten::add" in integrity.forbidden_ops(PART, _monitored(hidden)).metrics["ops"]


def test_a_part_may_allow_an_op_by_name():
    allowing = dataclasses.replace(PART, allowed_ops=("add",))
    assert integrity.forbidden_ops(allowing, _activity(ops_seen=("aten::add",))) is None
    assert integrity.forbidden_ops(PART, _activity(ops_seen=("aten::add",))).reason == "forbidden_op"


def test_one_kernel_and_no_torch_compute_is_fused():
    assert integrity.fusion(_fused_part(), _activity("gelu_kernel"), calls=1) is None


def test_a_second_kernel_is_not_fused_and_named():
    verdict = integrity.fusion(_fused_part(), _activity("gelu_kernel", "bias_scale_kernel"), calls=1)
    assert verdict.reason == "not_fused"
    assert "2 kernel launches per call" in verdict.message and "bias_scale_kernel" in verdict.message


def test_torch_arithmetic_after_the_kernel_is_not_fused():
    verdict = integrity.fusion(_fused_part(), _activity("gelu_kernel", ops_seen=("aten::add", "aten::mul")), calls=1)
    assert verdict.reason == "not_fused"
    assert "aten::add" in verdict.message and "aten::mul" in verdict.message


def test_a_fill_counts_as_a_pass_over_memory_in_a_fused_part():
    verdict = integrity.fusion(_fused_part(), _activity("k", ops_seen=("aten::zeros",)), calls=1)
    assert verdict.reason == "not_fused"
    assert integrity.fusion(_fused_part(), _activity("k", ops_seen=("aten::empty_like",)), calls=1) is None


def test_repeated_runs_of_a_case_are_counted_per_call():
    three = Activity(launches=[LaunchCount("k", "mine.py", True, 3)])
    assert integrity.fusion(_fused_part(), three, calls=3) is None
    assert integrity.fusion(_fused_part(), three, calls=1).reason == "not_fused"


def test_a_part_without_the_limit_is_not_judged_for_fusion():
    unlimited = dataclasses.replace(_fused_part(), max_kernels=None)
    assert integrity.fusion(unlimited, _activity("a", "b", ops_seen=("aten::add",)), calls=1) is None


def test_a_copy_under_a_view_or_a_conversion_is_a_pass_over_memory_and_a_no_op_is_nothing():
    """`x.contiguous()`, `x.reshape(-1)` and `x.flatten()` of a strided tensor are views by their
    schemas, yet each runs aten::clone: judged by the op they ran, they are passes over memory. A
    conversion to the dtype the tensor has already (`x.to(x.dtype)`, `x.type_as(x)`) runs nothing."""
    strided = torch.randn(64, 32).t()
    for copying in (strided.contiguous, lambda: strided.reshape(-1), strided.flatten):
        seen = _monitored(copying)
        assert "aten::clone" in {op.name for op in seen.ops}, seen.ops  # (reshape adds its _unsafe_view)
        verdict = integrity.fusion(_fused_part(), dataclasses.replace(seen, launches=_activity("k").launches), calls=1)
        assert verdict is not None and verdict.reason == "not_fused" and "aten::clone" in verdict.message
    seen = _monitored(lambda: strided.to(torch.float64))
    assert {op.name for op in seen.ops} == {"aten::_to_copy"}, seen.ops
    contiguous = torch.randn(64, 32)
    seen = _monitored(lambda: (contiguous.to(torch.float32), contiguous.type_as(contiguous), contiguous.contiguous()))
    assert seen.ops == [], seen.ops
