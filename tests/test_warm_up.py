"""The judging process's start on the GPU, made while a correctness child runs (judging/warm_up.py):
begun only once the correctness phase holds the GPU, waited for before judging, and on a GPU it
leaves the context and autograd's lazily imported modules made."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types

import pytest

from conftest import requires_gpu
from grader.assignment import cases
from grader.assignment.loading import load_assignments
from grader.assignment.spec import REPO_ROOT
from grader.judging import warm_up


def _module(source: str) -> types.ModuleType:
    module = types.ModuleType("reference")
    exec(textwrap.dedent(source), module.__dict__)
    return module


def test_a_reference_that_takes_a_gradient_is_told_from_one_that_does_not():
    assert warm_up.takes_gradients(_module("""
        import torch
        def grad_reference(q, g):
            q = q.requires_grad_()
            return torch.autograd.grad(q.sum(), q, g)
    """))  # fmt: skip
    assert warm_up.takes_gradients(_module("""
        def outer(x):
            def inner(y):
                y.sum().backward()
            return inner
    """))  # fmt: skip
    assert not warm_up.takes_gradients(_module("""
        import torch
        def gelu_reference(x):
            return torch.nn.functional.gelu(x)
        GRADIENT = "autograd"
    """))  # fmt: skip
    takes = {a.name: warm_up.takes_gradients(cases.reference_module(a.reference_path)) for a in load_assignments()}
    assert takes["flash_attention"] and not takes["gelu"]


class _Recorded(warm_up.WarmUp):
    def __init__(self, device: str, order: list):
        super().__init__(device, None)
        self.order = order

    def _run(self) -> None:
        self.order.append("warm-up")


def test_it_starts_only_once_the_phase_holds_the_gpu_and_judging_waits_for_it():
    order: list[str] = []
    warm = _Recorded("cuda", order)
    gate = warm.after_hold(lambda stage: order.append(f"gate {stage}"))
    gate("cuda")  # the child starts CUDA beside others: the phase's own hold is not taken yet
    assert warm.thread is None
    gate("run")  # the phase's hold, taken by the gate before the warm-up begins
    warm.ready()
    assert order == ["gate cuda", "gate run", "warm-up"]
    gate("timed")  # any later stage starts nothing more
    warm.ready()
    assert order.count("warm-up") == 1


def test_without_a_shared_gpu_it_starts_at_once_and_on_the_cpu_tier_never():
    order: list[str] = []
    warm = _Recorded("cuda", order)
    assert warm.after_hold(None) is None
    warm.ready()
    assert order == ["warm-up"]
    cpu = _Recorded("cpu", order)
    assert cpu.after_hold(None) is None
    cpu.ready()
    assert order == ["warm-up"] and cpu.thread is None


@pytest.mark.gpu
@requires_gpu
def test_on_a_gpu_it_leaves_the_context_and_autograds_modules_made():
    """In a fresh process: nothing of CUDA before, and after it the context, cuBLAS and sympy."""
    script = textwrap.dedent("""
        import sys, torch
        from grader.assignment import cases
        from grader.assignment.loading import load_assignments
        from grader.judging import warm_up
        reference = cases.reference_module(load_assignments(["flash_attention"])[0].reference_path)
        before = torch.cuda.is_initialized(), "torch.fx.experimental.symbolic_shapes" in sys.modules
        warm = warm_up.WarmUp("cuda", reference)
        warm.start()
        warm.ready()
        after = torch.cuda.is_initialized(), "torch.fx.experimental.symbolic_shapes" in sys.modules
        print(before, after, warm.failed)
    """)  # fmt: skip
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.stdout.split("\n")[0] == "(False, False) (True, True) None", done.stdout + done.stderr
