"""torch's dispatch state across a student call (grader/child/dispatch_state.py).

Whatever a call leaves on torch's mode stacks, among the thread's dispatch keys or the garbage
collector's callbacks would run inside the harness's own torch calls afterwards. Each way of
leaving something behind is put back as the call found it, named, and raised as LeftBehind; a
mode that got on a stack while the harness itself ran is found when the next call begins; a call
that leaves nothing passes untouched, its own `with` blocks included. One hostile submission shows why
(`tests/submissions/vector_add/leaves_a_function_mode`: every correctness case passed with an
empty output before).
"""

from __future__ import annotations

import gc

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from grader.child import dispatch_state
from grader.child.allocations import Allocations, GuardedAllocations
from grader.child.worker import call


class _Functions(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class _Dispatches(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _Harness() -> GuardedAllocations:  # noqa: N802 (named as the class it stands for)
    """The grader's own allocation mode, on the stack around a call (monitor.py)."""
    return GuardedAllocations(lambda filename: True, Allocations())


def _function_mode_left():
    _Functions().__enter__()


def _dispatch_mode_left():
    _Dispatches().__enter__()


def _harness_mode_taken_off():
    torch._C._pop_torch_dispatch_stack(None)


def _harness_mode_swapped():
    torch._C._pop_torch_dispatch_stack(None)
    _Dispatches().__enter__()


def _autocast_left_on():
    torch.autocast("cpu", dtype=torch.bfloat16).__enter__()


_kept = []


def _python_dispatcher_left_on():
    _kept.append(torch._C._EnablePythonDispatcher())


def _torch_function_switched_off():
    torch._C._set_torch_function_state(torch._C._TorchFunctionState.ALL_DISABLED)


def _default_device_set():
    torch.set_default_device("cpu")  # a DeviceContext: a torch function mode of torch's own


def _gc_callback_added():
    gc.callbacks.append(lambda phase, info: None)


LEFT = {
    _function_mode_left: "torch function mode stack changed: _Functions left on it",
    _dispatch_mode_left: "torch dispatch mode stack changed: _Dispatches left on it",
    _harness_mode_taken_off: "GuardedAllocations (the grader's) taken off it",
    _harness_mode_swapped: "_Dispatches left on it; GuardedAllocations (the grader's) taken off it",
    _autocast_left_on: "the thread's dispatch keys",
    _python_dispatcher_left_on: "the thread's dispatch keys",
    _torch_function_switched_off: "torch function handling switched off",
    _default_device_set: "DeviceContext left on it",
    _gc_callback_added: "a callback added to the garbage collector's",
}


@pytest.mark.parametrize("student", LEFT, ids=lambda f: f.__name__.strip("_"))
def test_what_a_call_leaves_behind_is_put_back_and_named(student):
    harness = _Harness()
    with harness:
        before = dispatch_state.take()
        with pytest.raises(dispatch_state.LeftBehind) as raised:
            call(student)
        assert LEFT[student] in str(raised.value), str(raised.value)
        assert raised.value.restored, "put back"
        after = dispatch_state.take()
        assert after.same(before), "the state the call found"
        assert torch._C._len_torch_function_stack() == 0 and not torch.is_autocast_enabled("cpu")
        assert torch.ones(2).add(1).tolist() == [2.0, 2.0], "torch still works on this thread"
    assert torch._C._len_torch_dispatch_stack() == 0, "the harness's own mode leaves as it came"
    torch.set_default_device(None)  # torch keeps its own reference to the context it made
    _kept.clear()


def test_a_call_that_leaves_nothing_passes_untouched():
    def tidy(x):
        with _Functions(), _Dispatches(), torch.autocast("cpu", dtype=torch.bfloat16):
            y = x * 2
        return y + 1

    with _Harness():
        before = dispatch_state.take()
        assert call(tidy, torch.ones(2)).tolist() == [3.0, 3.0]
        assert dispatch_state.take().same(before)


def test_a_student_exception_gives_way_to_what_the_call_left():
    def raises():
        _Functions().__enter__()
        raise ValueError("the student's own")

    with pytest.raises(dispatch_state.LeftBehind):
        call(raises)
    assert torch._C._len_torch_function_stack() == 0


def test_a_mode_that_got_on_while_the_harness_ran_is_found_at_the_next_call():
    """Student code can run inside the harness's own (a finalizer of an object the harness let go,
    a collector callback): a mode it put on a stack then is found when the next call begins, taken
    off, and the grader's own mode stays."""
    with _Harness() as harness:
        stray = _Functions()
        stray.__enter__()
        _Dispatches().__enter__()
        with pytest.raises(dispatch_state.LeftBehind) as raised:
            call(lambda: pytest.fail("the student's call ran with a stray mode on the stack"))
        assert "found while the grader's own code ran" in str(raised.value), str(raised.value)
        assert "_Functions left on it" in str(raised.value) and "_Dispatches left on it" in str(raised.value)
        assert torch._C._len_torch_function_stack() == 0
        assert [torch._C._get_dispatch_stack_at(i) for i in range(torch._C._len_torch_dispatch_stack())] == [harness]
