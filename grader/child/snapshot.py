"""The identity of every object the harness relies on, taken before any student code runs.

`changed()` names each one that is no longer the same object: a submission that rebinds
`torch.cuda.Event.elapsed_time` to report tiny times, or `time.perf_counter` to hide host time,
a method of the profiler's `record_function` to learn the harness's secret range name, or any
function of the grader's own modules, is caught by name. The harness also keeps its own
references to its clocks (timing.py), so such a patch changes no measurement either.
"""

from __future__ import annotations

import inspect
import sys
from types import ModuleType

from grader.child import boundary
from grader.child.dotted import resolve

# What the harness relies on while student code runs in its process: clocks, CUDA events and
# synchronization, allocation, and the tensor methods that carry results out. (torch.cuda.Event's
# base class on a CUDA build is a C type, which cannot be patched.)
WATCHED = {
    "time": ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "sleep"),
    "torch": ("empty", "empty_like", "empty_strided", "equal", "no_grad", "Generator"),
    "torch.cuda": ("Event", "Stream", "synchronize", "current_stream", "set_stream", "stream", "_sleep",
                   "get_device_properties", "empty_cache", "memory_allocated", "max_memory_allocated",
                   "max_memory_reserved", "reset_peak_memory_stats"),
    "torch.cuda.Event": ("__new__", "elapsed_time", "record", "synchronize", "query", "wait"),
    "torch.Tensor": ("copy_", "clone", "to", "cpu", "detach", "contiguous", "data_ptr", "untyped_storage",
                     "as_strided", "view", "fill_", "sum", "numpy"),
    "torch.UntypedStorage": ("data_ptr",),
    "torch.autograd.profiler": ("profile", "record_function", "_prepare_profiler", "_enable_profiler",
                                "_disable_profiler"),
    # What dispatch_state.py reads the pre-dispatch modes through (the rest it reads in torch._C).
    "torch._ops": ("mode_stack_state_for_pre_dispatch", "unset_mode_pre_dispatch"),
    "json": ("dumps",),
    "hmac": ("new", "compare_digest"),
    "os": ("write", "urandom"),
    "secrets": ("token_hex", "token_bytes"),
}  # fmt: skip
# The profiler's own classes, every attribute: a method of theirs rebound by student code would be
# handed the secret name the harness gives its ranges (activity.py), and ops inside a range of that
# name count as the harness's. The name comes from `secrets` (watched above).
WATCHED_CLASSES = ("torch.autograd.profiler.record_function", "torch.autograd.profiler.profile")
_MISSING = object()


class HarnessSnapshot:
    def __init__(self, watched: dict[str, tuple[object, str, object]]):
        self.watched = watched  # dotted name -> (owner, attribute, the object it held)

    @classmethod
    def take(cls) -> HarnessSnapshot:
        watched: dict[str, tuple[object, str, object]] = {}
        # What the boundary put on Triton's classes (properties that read the student's callables
        # wrapped, the launches' argument checks): a class attribute rebound would undo it.
        extra = boundary.watched()
        for path, names in {**WATCHED, **extra}.items():
            owner = resolve(path, strict=path not in extra)
            if owner is None:
                continue
            for name in names:
                watched[f"{path}.{name}"] = (owner, name, inspect.getattr_static(owner, name, _MISSING))
        for path in WATCHED_CLASSES:
            owner = resolve(path)
            for name in set(vars(owner)) - {"__annotations__"}:
                watched[f"{path}.{name}"] = (owner, name, inspect.getattr_static(owner, name))
        for module_name, module in list(sys.modules.items()):
            if module_name == "grader" or module_name.startswith("grader."):
                _watch_module(module, module_name, watched)
        return cls(watched)

    def changed(self) -> list[str]:
        # A static lookup runs no descriptor and no __getattr__: checking runs no student code.
        return sorted(name for name, (owner, attr, held) in self.watched.items()
                      if inspect.getattr_static(owner, attr, _MISSING) is not held)  # fmt: skip


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
