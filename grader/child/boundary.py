"""What a submission hands Triton: each callable runs as the student's code, each argument is plain data.

The guard (guard.py) tells who asked for an event by the frames on the stack, and a sanctioned
entry (Triton's launch, which compiles and loads kernels) lets the library frames under it do what
student code may not. Triton calls, from inside its launch, what the submission gave it: heuristics,
a config's pre_hook, a grid, hooks of `triton.knobs`, a benchmarker, a pruner; and it calls the
methods of every argument (`data_ptr`, `__hash__`, `__repr__`, `__eq__`...). A callable of the
student's written in Python has frames of the student's file, but a C function
(`functools.partial(exec, SRC)`) has no frame, and a library function (`subprocess.run`) has only
library frames: either would act with the launch's leave. So:

- Each callable a submission can hand Triton is read through a property of the Triton class that
  holds it (STUDENT_CALLABLES), which returns it wrapped in `student_callable`, whose frame the
  guard counts as the edge of student code (its boundary): whatever it calls is the student's, on
  any thread, whenever it was stored. A grid is wrapped at the launch, and each hook of a
  `HookChain` (knobs' launch and load hooks) as the chain calls it.
- Every argument of a launch (and each default of the kernel's parameters, each value of an
  autotuner's configs, each constexpr global of the kernel's module) must be plain data, whose
  methods are the library's: a tensor of torch's own class, a number, a bool, None, a string, a
  dtype, a constexpr of those, a tuple of those, or a TensorDescriptor of a tensor. Anything else
  is refused before Triton touches it: a TypeError that says what a kernel takes.

A property returns the same wrapper for the same callable each time (an autotuner hashes its
configs, pre_hook included). Hooks added by `add_pre_run_hook` are kept with the kernel;
`kernel.pre_run_hooks` reads a fresh list (appending to it changes nothing).

Installed in the child before student code runs (main.py), after the launch log (hooks.py) and
the interpreter's seams (interpreter.py); `BOUNDARY` goes to the guard.
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable

import numpy as np
import torch

from grader.child.dotted import resolve

ONE, MAPPING, LIST = "one", "mapping", "list"
# Triton 3.6's attributes that hold a callable of the student's, by class, and how they hold it.
STUDENT_CALLABLES = {
    "triton.runtime.autotuner.Heuristics": {"values": MAPPING},
    "triton.runtime.autotuner.Autotuner": {"pre_hook": ONE, "post_hook": ONE, "early_config_prune": ONE,
                                           "perf_model": ONE, "_do_bench": ONE},
    "triton.runtime.autotuner.Config": {"pre_hook": ONE},
    "triton.runtime.jit.JITFunction": {"pre_run_hooks": LIST, "launch_metadata": ONE, "_repr": ONE},
    "triton.runtime.interpreter.InterpretedFunction": {"pre_run_hooks": LIST},
    "triton.knobs.runtime_knobs": {name: ONE for name in (
        "launch_enter_hook", "launch_exit_hook", "kernel_load_start_hook", "kernel_load_end_hook", "jit_cache_hook",
        "jit_post_compile_hook", "add_stages_inspection_hook")},
    "triton.knobs.compilation_knobs": {"listener": ONE},
    "triton.knobs.build_knobs": {"impl": ONE},
}  # fmt: skip
# The launches whose arguments are checked: every `run` a kernel, an autotuner or a heuristic has.
LAUNCHES = ("triton.runtime.jit.JITFunction", "triton.runtime.interpreter.InterpretedFunction",
            "triton.runtime.autotuner.Autotuner", "triton.runtime.autotuner.Heuristics")  # fmt: skip
_NUMBERS = (bool, int, float, str, type(None), torch.dtype, torch.device, torch.Size)
_wrappers: dict[int, tuple[object, Callable]] = {}  # id of a callable -> (it, its wrapper): held, so ids stay


def student_callable(fn: Callable) -> Callable:
    """`fn`, called through a frame the guard counts as student code (the same wrapper each time)."""
    if fn is None or is_wrapper(fn):
        return fn
    found = _wrappers.get(id(fn))
    if found is not None and found[0] is fn and is_wrapper(found[1]) and found[1].__closure__[0].cell_contents is fn:
        return found[1]  # (checked: the cache is a dict that student code can reach and write)

    def as_student(*args, **kwargs):
        return fn(*args, **kwargs)

    _wrappers[id(fn)] = (fn, as_student)
    return as_student


def is_wrapper(value) -> bool:
    return getattr(value, "__code__", None) is BOUNDARY


BOUNDARY = next(c for c in student_callable.__code__.co_consts if getattr(c, "co_name", "") == "as_student")


def install() -> None:
    """Put the properties in place and the argument checks on every launch; once per process."""
    from triton import knobs

    if getattr(knobs.HookChain.__call__, "_graded", False):
        return
    for path, attributes in STUDENT_CALLABLES.items():
        owner = resolve(path, strict=False)
        if owner is None:
            continue  # not in this Triton
        for name, kind in attributes.items():
            setattr(owner, name, _held(name, kind, vars(owner).get(name)))
    for path in ("triton.runtime.jit.JITFunction", "triton.runtime.interpreter.InterpretedFunction"):
        owner = resolve(path, strict=False)
        if owner is not None:
            owner.add_pre_run_hook = _add_pre_run_hook
    knobs.HookChain.__call__ = _call_each
    for path in LAUNCHES:
        owner = resolve(path, strict=False)
        if owner is not None:
            owner.run = _checked(owner.run)
    from triton.runtime.interpreter import InterpretedFunction

    InterpretedFunction.warmup = _checked(InterpretedFunction.warmup)


def watched() -> dict[str, tuple[str, ...]]:
    """What install() put in place, by owner: the harness's snapshot names any of it rebound."""
    found = {path: tuple(names) for path, names in STUDENT_CALLABLES.items()}
    for path in LAUNCHES:
        found[path] = found.get(path, ()) + ("run",)
    for path in ("triton.runtime.jit.JITFunction", "triton.runtime.interpreter.InterpretedFunction"):
        found[path] += ("add_pre_run_hook",)
    found["triton.runtime.interpreter.InterpretedFunction"] += ("warmup",)
    found["triton.knobs.HookChain"] = ("__call__",)
    return found


def _held(name: str, kind: str, default):
    """A property over the instance's own `name` (the class's `default` until one is set) that
    reads it as the student's: wrapped, each callable of a mapping or a list wrapped."""

    def read(self):
        value = vars(self).get(name, default)
        if kind == MAPPING:
            return {key: student_callable(held) for key, held in value.items()} if value is not None else None
        if kind == LIST:
            return [student_callable(held) for held in value] if value is not None else None
        if type(value).__name__ == "HookChain" and type(value).__module__ == "triton.knobs":
            return value  # calls each of its hooks as the student's (_call_each)
        return student_callable(value)

    def write(self, value) -> None:
        vars(self)[name] = value

    def forget(self) -> None:
        vars(self).pop(name, None)

    return property(read, write, forget, f"{name}, read as the student's (grader/child/boundary.py)")


def _add_pre_run_hook(self, hook) -> None:
    """Triton's add_pre_run_hook, appending to the hooks the kernel keeps (not to a read copy)."""
    assert callable(hook)
    vars(self).setdefault("pre_run_hooks", []).append(hook)


def _call_each(self, *args, **kwargs) -> None:
    """HookChain.__call__, each hook called as the student's, over a copy of the chain."""
    hooks = list(vars(self).get("calls", ()))
    for hook in reversed(hooks) if self.reversed else hooks:
        student_callable(hook)(*args, **kwargs)


_call_each._graded = True


def _checked(run: Callable) -> Callable:
    if getattr(run, "_checked", False):
        return run

    @functools.wraps(run)
    def checked_run(self, *args, **kwargs):
        check_launch(self, args, kwargs)
        if callable(kwargs.get("grid")):
            kwargs["grid"] = student_callable(kwargs["grid"])
        return run(self, *args, **kwargs)

    checked_run._checked = True
    return checked_run


WRAPPER_CODES = frozenset({_checked(print).__code__, BOUNDARY})  # what a sanctioned entry may never be


def check_launch(kernel, args: tuple, kwargs: dict) -> None:
    """Refuse, before Triton reads them, launch arguments whose methods could be the student's."""
    name = getattr(getattr(kernel, "fn", None), "__name__", None) or type(kernel).__name__
    for index, value in enumerate(args):
        _check(value, f"{name}: argument {index}")
    for key, value in kwargs.items():
        if key not in ("grid", "warmup"):
            _check(value, f"{name}: argument {key}")
    for config in getattr(kernel, "configs", None) or ():
        for key, value in vars(config).get("kwargs", {}).items():
            _check(value, f"{name}: the autotuner's config value {key}")
    signature = getattr(kernel, "signature", None)
    for parameter in getattr(signature, "parameters", {}).values():
        if parameter.default is not parameter.empty:
            _check(parameter.default, f"{name}: the default of {parameter.name}")
    scope = getattr(getattr(kernel, "fn", None), "__globals__", None)
    if type(scope) is dict:
        from triton.language import constexpr

        for key, value in list(scope.items()):
            if isinstance(value, constexpr):
                _check(value, f"{name}: the global {key}")


def _check(value, where: str, depth: int = 0) -> None:
    if depth > 8 or not _plain(value, depth):
        raise TypeError(f"{where} is {_described(value)}: a Triton kernel of a graded submission takes tensors, "
                        "numbers, bools, None, strings, dtypes, constexprs and tuples of these, and tensor "
                        "descriptors; Triton would run the methods of anything else as its own")  # fmt: skip


def _plain(value, depth: int) -> bool:
    kind = type(value)
    if kind in _NUMBERS or kind in (torch.Tensor, torch.nn.Parameter):
        return True
    if issubclass(kind, (np.number, np.bool_)) and kind.__module__ == "numpy":
        return True  # a numpy scalar (np.prod of a shape, say)
    found = (kind.__module__, kind.__name__)
    if kind is tuple or found == ("triton.language.core", "tuple"):
        return all(_plain(item, depth + 1) for item in value)
    if found == ("triton.language.core", "constexpr"):
        return _plain(vars(value).get("value"), depth + 1)
    if kind.__module__ == "triton.language.core" and _is_triton_dtype(kind):
        return True
    if found in _HOLDERS:
        return _fields_plain(value, depth)
    return found in _TRITON_CALLABLES  # a kernel or helper passed as a constexpr: Triton's own class


# Triton's classes that hold a tensor and plain fields, and the kernels one may pass as constexprs.
_HOLDERS = {("triton.tools.tensor_descriptor", "TensorDescriptor"), ("triton.runtime.jit", "MockTensor"),
            ("triton.runtime.jit", "TensorWrapper")}  # fmt: skip
_TRITON_CALLABLES = {("triton.runtime.jit", "JITFunction"), ("triton.runtime.interpreter", "InterpretedFunction"),
                     ("triton.runtime.jit", "ConstexprFunction")}  # fmt: skip


def _is_triton_dtype(kind: type) -> bool:
    from triton.language import dtype

    return issubclass(kind, dtype)


def _fields_plain(value, depth: int) -> bool:
    """A TensorDescriptor's base is a tensor and its shapes, strides and padding plain; a
    MockTensor (what `kernel.warmup(...)` passes for a tensor) holds a dtype and a shape."""
    for field in vars(value).values():
        items = field if type(field) is list else [field]
        if not all(_plain(item, depth + 1) for item in items):
            return False
    return True


def _described(value) -> str:
    kind = type(value)
    return f"a {kind.__module__}.{kind.__qualname__}"


def sanctioned_entries() -> set:
    """The library functions student code may call even though they do what the hook refuses, as
    narrowly as Triton allows: a launch (compiling the kernel with ptxas into Triton's cache,
    building and loading its launcher), an autotuner (which keeps its timings in that cache), and
    the loading of a kernel compiled by `kernel.warmup(...)` (Triton's second tutorial). Their own
    code, not the grader's wrappers around them (hooks.py, interpreter.py): those run nothing the
    hook refuses. A heuristic (Heuristics.run), a grid and the interpreter's run (which runs the
    student's kernel as Python) need nothing refused, and are not entries."""
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime import autotuner, jit

    entries = (jit.JITFunction.run, autotuner.Autotuner.run, CompiledKernel._init_handles)
    return {inspect.unwrap(entry).__code__ for entry in entries}
