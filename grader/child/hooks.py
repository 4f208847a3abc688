"""Every Triton launch during a graded call, logged with the file its kernel was defined in.

Both launch paths (`kernel[grid](...)`, and autotuned or heuristic wrappers) end in the `run`
method of a JITFunction, or of an InterpretedFunction under TRITON_INTERPRET=1, so one wrapper
on each sees them; a kernel compiled ahead by `kernel.warmup(...)` and launched as
`compiled[grid](...)` is logged by a wrapper on CompiledKernel.__getitem__. "Own" means defined
in the student's files: a kernel borrowed from a library is not the student's work.

A launch counts only if its grid has programs. Triton's launcher skips a grid with none, so a
kernel "launched" on `(0,)` runs nothing; counted, it would vouch for a kernel of the same name
that something else ran (torch's jiterator names its kernels `<name>_vectorized8_kernel`). The
grid a `run` ends up with (a callable grid is evaluated inside it) is read where Triton hands it
on: CompiledKernel.launch_metadata on the GPU, the interpreter's set_grid_dim on the CPU.

On the GPU the profiler's kernel records are the proof that a launch ran (judging/verdicts.py compares
the two); under the interpreter the log is all there is, and each launch is also handed to
`on_interpreted_launch` (the CPU tier compiles it for the GPU). On the GPU the log also keeps the
compiled kernel each launch ran (what `run` returns, or the kernel `compiled[grid]` launches), so
that its loads can be read from its TTIR (loads.py) when the call's activity is summed up.
"""
from __future__ import annotations

import math
import threading
from collections import Counter
from pathlib import Path
from typing import Callable

from grader.child import loads
from grader.messages.reports import KernelLoads, LaunchCount

_LOGS: list[LaunchLog] = []  # the calls being monitored, innermost last
# The harness's own kernels, launched between a benchmark's timed calls (the gate in front of each
# timed stretch): never the student's launches, and no kernel of a submission is defined there.
HARNESS_FILES = frozenset({str(Path(__file__).with_name("gate.py").resolve())})
_RUNS = threading.local()  # .open: the runs under way on this thread, innermost last


class _Run:
    """One `run` under way: the programs its grid turned out to have (None until Triton says)."""

    programs: int | None = None


class LaunchLog:
    """Launches counted while the block runs: (kernel, file, own) -> count."""

    def __init__(self, own_root: Path):
        self.own_root = own_root.resolve()
        self.counts: Counter = Counter()
        self.compiled: dict[int, tuple[object, str, str]] = {}  # GPU tier: id -> (compiled kernel, name, file)

    def __enter__(self) -> LaunchLog:
        _LOGS.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _LOGS.remove(self)

    def entries(self) -> list[LaunchCount]:
        return [LaunchCount(k, Path(f).name, own, n) for (k, f, own), n in sorted(self.counts.items())]

    def loads(self) -> list[KernelLoads]:
        """How each compiled kernel launched in the block loads its tiles (GPU tier; read once per kernel)."""
        return [loads.of_compiled(compiled, name, file) for compiled, name, file in self.compiled.values()]

    def record(self, kernel_fn, compiled=None) -> None:
        fn = getattr(kernel_fn, "fn", kernel_fn)
        code = getattr(fn, "__code__", None)
        file = code.co_filename if code else "<unknown>"
        if code and str(Path(file).resolve()) in HARNESS_FILES:
            return
        own = bool(code) and Path(file).resolve().is_relative_to(self.own_root)
        name = getattr(fn, "__name__", repr(fn))
        for log in _LOGS:
            log.counts[(name, file, own)] += 1
            if isinstance(getattr(compiled, "asm", None), dict):  # a CompiledKernel: the GPU tier
                log.compiled.pop(id(compiled), None)  # kept in the order of their last launch (monitor.py)
                log.compiled[id(compiled)] = (compiled, name, file)


def install(own_root: Path, on_interpreted_launch: Callable | None = None, dry: bool = False) -> None:
    """Wrap the launch paths. The wrappers run nothing the guard refuses, and are no sanctioned
    entries: the guard finds the functions they wrap through their `__wrapped__`. `dry` (a
    precompile child, dry_run.py): every interpreted launch goes to `on_interpreted_launch`, and
    none runs."""
    import triton.runtime.jit as jit

    recorder = LaunchLog(own_root)
    classes = {jit.JITFunction: None}
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes[InterpretedFunction] = on_interpreted_launch
    except ImportError:
        InterpretedFunction = None
    for cls, hook in classes.items():
        if not getattr(cls.run, "_graded", False):
            cls.run = _logged(cls.run, recorder, hook, dry and hook is not None)
    from triton.compiler.compiler import CompiledKernel

    if not getattr(CompiledKernel.__getitem__, "_graded", False):
        CompiledKernel.__getitem__ = _logged_compiled(CompiledKernel.__getitem__, recorder)
    if not getattr(CompiledKernel.launch_metadata, "_graded", False):
        CompiledKernel.launch_metadata = _grid_reader(CompiledKernel.launch_metadata, lambda grid, *_: grid)
    if InterpretedFunction is not None:
        from triton.runtime.interpreter import InterpreterBuilder

        if not getattr(InterpreterBuilder.set_grid_dim, "_graded", False):
            InterpreterBuilder.set_grid_dim = _grid_reader(InterpreterBuilder.set_grid_dim, lambda *grid: grid)


def _open_runs() -> list[_Run]:
    if not hasattr(_RUNS, "open"):
        _RUNS.open = []
    return _RUNS.open


def _grid_reader(method, grid_of: Callable):
    """Wrap the method Triton calls with a launch's final grid: note its programs for the run
    under way. Called outside a run (by student code, say), it notes nothing."""

    def read_grid(self, *args):
        runs = _open_runs()
        if runs and runs[-1].programs is None:
            runs[-1].programs = math.prod(grid_of(*args))
        return method(self, *args)

    read_grid._graded = True
    return read_grid


def _logged(run, recorder: LaunchLog, hook: Callable | None, dry: bool = False):
    def run_and_log(self, *args, grid, warmup, **kwargs):
        if dry:  # recorded, not run: whatever it would compute, no one reads
            hook(self, args, kwargs, grid)
            return None
        if warmup or not _LOGS:
            return run(self, *args, grid=grid, warmup=warmup, **kwargs)
        if hook is not None:
            hook(self, args, kwargs, grid)
        runs, current = _open_runs(), _Run()
        runs.append(current)
        compiled = None  # what JITFunction.run returns: the kernel it launched
        try:
            compiled = run(self, *args, grid=grid, warmup=warmup, **kwargs)
            return compiled
        finally:
            runs.remove(current)
            if current.programs:  # None: the run stopped before launching (a compile error, a grid that raised)
                recorder.record(self, compiled)

    run_and_log._graded = True
    run_and_log.__wrapped__ = run
    return run_and_log


def _logged_compiled(getitem, recorder: LaunchLog):
    """The second launch path: `kernel.warmup(...)` returns a compiled kernel, and Triton's fused
    tutorial 02 launches it by `compiled[grid](...)`, which never passes through `run`."""

    def launch_logged(self, grid):
        runner = getitem(self, grid)

        def run_logged(*args, **kwargs):
            if _LOGS and math.prod(grid) > 0:
                recorder.record(getattr(self.src, "fn", None) or self, self)
            return runner(*args, **kwargs)

        return run_logged

    launch_logged._graded = True
    return launch_logged
