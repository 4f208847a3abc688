"""What happens during one student call, seen from inside the child process.

`CallMonitor` wraps the call: every aten op the student's code dispatches is recorded (so a
torch fallback is caught as `forbidden_op`), every tensor it allocates with `empty*` comes back
poisoned and guarded (see poison.py), and every Triton kernel launch is logged with the file its
kernel was defined in (so `no_kernel_launched` means "no kernel of the student's own").
"""

from __future__ import annotations

import importlib
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from grader.poison import Guarded, guarded_empty

ALLOCATORS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}


@dataclass
class Launch:
    kernel: str
    file: str
    own: bool


class _OpRecorder(TorchDispatchMode):
    """Records the name of every aten op, and poisons fresh allocations."""

    def __init__(self, monitor: CallMonitor):
        super().__init__()
        self.monitor = monitor

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if self.monitor.interpreting:
            # Inside an interpreted Triton launch: the interpreter copies each argument's storage
            # to the host and back with torch ops of its own, which are not the student's.
            return func(*args, **(kwargs or {}))
        self.monitor.ops.add(name)
        if not (func.is_view or name in ALLOCATORS):
            # Everything but views and fresh allocations touches data: on a GPU, a kernel of torch's.
            self.monitor.compute_ops.add(name)
        result = func(*args, **(kwargs or {}))
        if name in ALLOCATORS and isinstance(result, torch.Tensor) and result.numel() > 0:
            # The student's allocation is given back before the guarded one is made, so that the
            # two never hold memory at once and the call's measured peak is what it asked for.
            device = result.device
            layout = torch.empty_strided(result.shape, result.stride(), dtype=result.dtype, device="meta")
            del result
            guarded = guarded_empty(layout, device)
            self.monitor.allocations.append(guarded)
            result = guarded.tensor
        return result


@dataclass
class CallMonitor:
    own_root: Path  # kernels defined in files under this folder are the student's own
    ops: set[str] = field(default_factory=set)
    compute_ops: set[str] = field(default_factory=set)
    launches: list[Launch] = field(default_factory=list)
    allocations: list[Guarded] = field(default_factory=list)
    interpreting: bool = False  # an interpreted launch is under way (compiled launches dispatch no aten op)

    def __enter__(self) -> CallMonitor:
        _ACTIVE.append(self)
        self._mode = _OpRecorder(self)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)
        _ACTIVE.remove(self)

    def record_launch(self, kernel_fn) -> None:
        fn = getattr(kernel_fn, "fn", kernel_fn)
        code = getattr(fn, "__code__", None)
        file = code.co_filename if code else "<unknown>"
        own = Path(file).resolve().is_relative_to(self.own_root.resolve()) if code else False
        self.launches.append(Launch(getattr(fn, "__name__", repr(fn)), file, own))

    def launch_counts(self) -> list[dict]:
        """The launches, one entry per kernel with how often it ran: an autotuner times each of its
        configs dozens of times inside the first call, and a list of every launch would not fit in
        one message to the parent."""
        counts: dict[tuple, int] = {}
        for launch in self.launches:
            key = (launch.kernel, launch.file, launch.own)
            counts[key] = counts.get(key, 0) + 1
        return [{"kernel": k, "file": f, "own": own, "count": n} for (k, f, own), n in counts.items()]

    def overrun_of(self, tensor: torch.Tensor) -> int:
        """Guard cells written around the allocation that `tensor` lives in (0 if not ours)."""
        for guarded in self.allocations:
            if guarded.buffer.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr():
                return guarded.overrun()
        return 0


_ACTIVE: list[CallMonitor] = []


def install_triton_hooks() -> None:
    """Log every Triton launch, compiled or interpreted, to the active monitor.

    Both launch paths (`kernel[grid](...)` and autotuned or heuristic wrappers) end in the
    `run` method of a JITFunction, or of an InterpretedFunction under TRITON_INTERPRET=1.
    """
    import triton.runtime.jit as jit

    classes = {jit.JITFunction: False}
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes[InterpretedFunction] = True
    except ImportError:
        pass
    for cls, interpreted in classes.items():
        if getattr(cls.run, "_graded", False):
            continue
        cls.run = _logged(cls.run, interpreted)


def _logged(run, interpreted: bool):
    def run_and_log(self, *args, grid, warmup, **kwargs):
        if warmup or not _ACTIVE:
            return run(self, *args, grid=grid, warmup=warmup, **kwargs)
        monitor = _ACTIVE[-1]
        monitor.record_launch(self)
        # Only the interpreter's own copies are left out: on a GPU anything dispatched during a
        # launch (a launch hook of the student's, say) still counts as the student's.
        outer, monitor.interpreting = monitor.interpreting, interpreted or monitor.interpreting
        try:
            return run(self, *args, grid=grid, warmup=warmup, **kwargs)
        finally:
            monitor.interpreting = outer

    run_and_log._graded = True
    return run_and_log


# What the harness relies on while student code runs in its process: clocks, CUDA events and
# synchronization, allocation, and the tensor methods that carry results out. (torch.cuda.Event's
# base class on a CUDA build is a C type, which cannot be patched.)
WATCHED = {
    "time": ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "sleep"),
    "torch": ("empty", "empty_like", "empty_strided", "equal", "save", "load", "no_grad", "Generator"),
    "torch.cuda": ("Event", "Stream", "synchronize", "current_stream", "set_stream", "stream", "_sleep",
                   "get_device_properties", "empty_cache", "memory_allocated", "max_memory_allocated",
                   "reset_peak_memory_stats"),
    "torch.cuda.Event": ("__new__", "elapsed_time", "record", "synchronize", "query", "wait"),
    "torch.Tensor": ("copy_", "clone", "to", "cpu", "detach", "contiguous", "data_ptr", "untyped_storage",
                     "as_strided", "view", "fill_", "sum"),
    "torch.UntypedStorage": ("data_ptr",),
    "json": ("dumps",),
}  # fmt: skip
_MISSING = object()


class HarnessSnapshot:
    """The identity of every object the harness relies on, taken before any student code runs.

    `changed()` names each one that is no longer the same object: a submission that rebinds
    `torch.cuda.Event.elapsed_time` to report tiny times, or `time.perf_counter` to hide host
    time, or any function of the grader's own modules, is caught by name. The harness also keeps
    its own references to its clocks (timing.py), so such a patch changes no measurement either.
    """

    def __init__(self, watched: dict[str, tuple[object, str, object]]):
        self.watched = watched  # dotted name -> (owner, attribute, the object it held)

    @classmethod
    def take(cls) -> HarnessSnapshot:
        watched: dict[str, tuple[object, str, object]] = {}
        for path, names in WATCHED.items():
            owner = _resolve(path)
            for name in names:
                watched[f"{path}.{name}"] = (owner, name, inspect.getattr_static(owner, name, _MISSING))
        for module_name, module in list(sys.modules.items()):
            if module_name == "grader" or module_name.startswith("grader."):
                _watch_module(module, module_name, watched)
        return cls(watched)

    def changed(self) -> list[str]:
        # A static lookup runs no descriptor and no __getattr__: checking runs no student code.
        return sorted(name for name, (owner, attr, held) in self.watched.items()
                      if inspect.getattr_static(owner, attr, _MISSING) is not held)  # fmt: skip


def _resolve(path: str) -> object:
    first, *rest = path.split(".")
    found = sys.modules.get(first) or importlib.import_module(first)
    for name in rest:
        found = getattr(found, name)
    return found


def _watch_module(module: ModuleType, name: str, watched: dict) -> None:
    """Every global of a grader module, and every attribute of the classes it defines. Python
    creates `__annotations__` on first access, so it and the module's own dunders are left out."""
    for attr, value in list(vars(module).items()):
        if attr.startswith("__"):
            continue
        watched[f"{name}.{attr}"] = (module, attr, value)
        if isinstance(value, type) and value.__module__ == name:
            for member in set(vars(value)) - {"__annotations__"}:
                watched[f"{name}.{value.__qualname__}.{member}"] = (value, member, inspect.getattr_static(value, member))
