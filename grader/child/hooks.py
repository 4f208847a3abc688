"""Every Triton launch during a graded call, logged with the file its kernel was defined in.

Both launch paths (`kernel[grid](...)`, and autotuned or heuristic wrappers) end in the `run`
method of a JITFunction, or of an InterpretedFunction under TRITON_INTERPRET=1, so one wrapper
on each sees them; a kernel compiled ahead by `kernel.warmup(...)` and launched as
`compiled[grid](...)` is logged by a wrapper on CompiledKernel.__getitem__. "Own" means defined in the student's files: a kernel borrowed from a
library is not the student's work. On the GPU the profiler's kernel records are the proof that
a launch ran (judging.py compares the two); under the interpreter the log is all there is, and
each launch is also handed to `on_interpreted_launch` (the CPU tier compiles it for the GPU).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Callable

from grader.messages import LaunchCount

_LOGS: list[Counter] = []  # the calls being monitored, innermost last


class LaunchLog:
    """Launches counted while the block runs: (kernel, file, own) -> count."""

    def __init__(self, own_root: Path):
        self.own_root = own_root.resolve()
        self.counts: Counter = Counter()

    def __enter__(self) -> LaunchLog:
        _LOGS.append(self.counts)
        return self

    def __exit__(self, *exc) -> None:
        _LOGS.remove(self.counts)

    def entries(self) -> list[LaunchCount]:
        return [LaunchCount(k, Path(f).name, own, n) for (k, f, own), n in sorted(self.counts.items())]

    def record(self, kernel_fn) -> None:
        fn = getattr(kernel_fn, "fn", kernel_fn)
        code = getattr(fn, "__code__", None)
        file = code.co_filename if code else "<unknown>"
        own = bool(code) and Path(file).resolve().is_relative_to(self.own_root)
        for counts in _LOGS:
            counts[(getattr(fn, "__name__", repr(fn)), file, own)] += 1


def install(own_root: Path, on_interpreted_launch: Callable | None = None) -> set:
    """Wrap the launch paths; returns the code objects of the wrappers (the guard sanctions them)."""
    import triton.runtime.jit as jit

    recorder = LaunchLog(own_root)
    classes = {jit.JITFunction: None}
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes[InterpretedFunction] = on_interpreted_launch
    except ImportError:
        pass
    wrappers = set()
    for cls, hook in classes.items():
        if not getattr(cls.run, "_graded", False):
            cls.run = _logged(cls.run, recorder, hook)
        wrappers.add(cls.run.__code__)
    from triton.compiler.compiler import CompiledKernel

    if not getattr(CompiledKernel.__getitem__, "_graded", False):
        CompiledKernel.__getitem__ = _logged_compiled(CompiledKernel.__getitem__, recorder)
    wrappers |= {CompiledKernel.__getitem__.__code__, *_nested_codes(CompiledKernel.__getitem__.__code__)}
    return wrappers


def _nested_codes(code) -> set:
    return {c for c in code.co_consts if hasattr(c, "co_filename")}


def _logged(run, recorder: LaunchLog, hook: Callable | None):
    def run_and_log(self, *args, grid, warmup, **kwargs):
        if not warmup and _LOGS:
            recorder.record(self)
            if hook is not None:
                hook(self, args, kwargs, grid)
        return run(self, *args, grid=grid, warmup=warmup, **kwargs)

    run_and_log._graded = True
    return run_and_log


def _logged_compiled(getitem, recorder: LaunchLog):
    """The second launch path: `kernel.warmup(...)` returns a compiled kernel, and Triton's fused
    tutorial 02 launches it by `compiled[grid](...)`, which never passes through `run`."""

    def launch_logged(self, grid):
        runner = getitem(self, grid)

        def run_logged(*args, **kwargs):
            if _LOGS:
                recorder.record(getattr(self.src, "fn", None) or self)
            return runner(*args, **kwargs)

        return run_logged

    launch_logged._graded = True
    return launch_logged
