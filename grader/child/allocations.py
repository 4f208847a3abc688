"""Every tensor a graded call allocates comes back poisoned and guarded (see grader/judging/poison.py).

A torch dispatch mode sees each allocation the student's code makes on the calling thread: an
`empty*` tensor is handed back filled with the poison pattern, so elements the kernel never
writes show as such; a `zeros`, `ones` or `full` tensor (or a clone) keeps the values it asked
for. Either way it sits inside a larger buffer of guard cells, so a store past its end lands in
a guard, is counted, and never corrupts an input or crashes the process.

The mode also notes, for each op, the student's line that first called it (the innermost frame
of the submission's own code), so a report can point at `float(scale)` rather than name
`aten::_local_scalar_dense` alone. It also tells the interpreter's own torch ops from the student's: under TRITON_INTERPRET=1
a launch copies each argument's storage to the host and back with torch ops. An op is the
interpreter's when, walking up the Python stack, its copy functions come before any student
code: a frame check, which no flag that student code could set can fake.
"""

from __future__ import annotations

import linecache
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from grader.judging.poison import Guarded, guarded_empty

EMPTY = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted"}
# Allocations with values: the value each one fills in (an index into the op's arguments, or a constant).
FILLED = {"zeros": 0.0, "zeros_like": 0.0, "new_zeros": 0.0, "ones": 1.0, "ones_like": 1.0, "new_ones": 1.0,
          "full": ("args", 1), "full_like": ("args", 1), "new_full": ("args", 2)}  # fmt: skip
COPIED = {"clone", "_to_copy"}  # fresh tensors holding a copy of their source


def _interpreter_copies() -> set:
    try:
        from triton.runtime.interpreter import GridExecutor
    except ImportError:
        return set()
    return {GridExecutor._init_args_hst.__code__, GridExecutor._restore_args_dev.__code__}


@dataclass
class Allocations:
    """What the mode saw on its thread during one call."""

    guarded: list[Guarded] = field(default_factory=list)
    excluded: Counter = field(default_factory=Counter)  # "aten::x" -> ops the interpreter ran for itself
    where: dict[str, str] = field(default_factory=dict)  # "aten::x" -> the student's line that first ran it


class GuardedAllocations(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """torch wraps a mode's __torch_dispatch__ in torch._disable_dynamo, whose first call imports
        torch._dynamo: 2.6 to 5 s of every child's start, for a compiler the child never runs. The
        grading call is never compiled, so the wrapper guards nothing here (main.py)."""
        return False

    def __init__(self, is_library, record: Allocations):
        super().__init__()
        self.is_library, self.record = is_library, record  # is_library(filename): the guard's own test
        self.interpreter = _interpreter_copies()

    def _interpreters(self) -> bool:
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code in self.interpreter:
                return True
            if not self.is_library(frame.f_code.co_filename):
                return False  # student code came first
            frame = frame.f_back
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if self.interpreter and self._interpreters():
            self.record.excluded[f"aten::{name}"] += 1
            return func(*args, **kwargs)
        if f"aten::{name}" not in self.record.where:
            self.record.where[f"aten::{name}"] = self._student_line()
        result = func(*args, **kwargs)
        if not isinstance(result, torch.Tensor) or result.numel() == 0 or result.device.type == "meta":
            return result
        if name in EMPTY:
            return self._guard(result, None)
        if name in FILLED:
            fill = FILLED[name]
            return self._guard(result, args[fill[1]] if isinstance(fill, tuple) else fill)
        if name in COPIED:
            return self._guard(result, result)
        return result

    def _student_line(self) -> str:
        """`file, line N: source` of the innermost frame of the submission's own code, or ""."""
        frame = sys._getframe(2)
        while frame is not None and self.is_library(frame.f_code.co_filename):
            frame = frame.f_back
        if frame is None:
            return ""
        code = frame.f_code
        source = linecache.getline(code.co_filename, frame.f_lineno).strip()
        return f"{Path(code.co_filename).name}, line {frame.f_lineno}: {source}"[:300]

    def _guard(self, result: torch.Tensor, value) -> torch.Tensor:
        """The same layout inside a poisoned, guarded buffer, holding `value` (None: poison only)."""
        device = result.device
        layout = torch.empty_strided(result.shape, result.stride(), dtype=result.dtype, device="meta")
        if not isinstance(value, torch.Tensor):
            del result  # given back first, so the call's measured peak is what it asked for
        guarded = guarded_empty(layout, device)
        if isinstance(value, torch.Tensor):
            guarded.tensor.copy_(value)
        elif value is not None:
            guarded.tensor.fill_(value)
        self.record.guarded.append(guarded)
        return guarded.tensor

    def overrun_of(self, tensor: torch.Tensor) -> int:
        """Guard cells written around the allocation that `tensor` lives in (0 if not ours)."""
        pointer = tensor.untyped_storage().data_ptr()
        for guarded in self.record.guarded:
            if guarded.buffer.untyped_storage().data_ptr() == pointer:
                return guarded.overrun()
        return 0
