"""Make what students copy from Triton's tutorials run under TRITON_INTERPRET=1 as it runs on the GPU.

The CPU tier runs kernels in Triton's interpreter, where Triton 3.6 has no active driver: every
driver query raises "0 active drivers ([]). There should only be one." That breaks code that
works on the GPU: the tutorials' module-level `DEVICE = triton.runtime.driver.active.
get_active_torch_device()`, the `get_device_properties` and `kernel.warmup(...)` of Triton's
second tutorial (a fused row normalisation), `@triton.autotune` (its benchmarker is the driver's) and
`triton.testing.do_bench`. `install()` answers them as the grading GPU would (`target.TARGET`,
an sm_90 H100/H200), except that tensors live on the CPU, where the grader puts them.

An autotuner on the CPU tier times nothing; instead it runs every config on the real arguments
and checks that the configs agree, so a config-specific bug (a mask that is only right for one
BLOCK_K) shows here before the GPU happens to pick that config (config_trials.py).

Call `install()` in the child before student code is imported.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
import weakref
from types import SimpleNamespace

import torch
from triton.backends.driver import DriverBase
from triton.runtime.errors import OutOfResources

from grader.child import gpu_target
from grader.child.config_trials import Trials, config_named, copies_of, tensors_of
from grader.child.target import TARGET, Target

_clock = time.perf_counter  # taken before student code could rebind it


def install(target: Target = TARGET, dry: bool = False) -> None:
    """Answer driver queries as `target`, and make autotune, warmup and triton.testing work here.
    `dry`: in a precompile child, whose launches are recorded and not run (dry_run.py), an
    autotuner tries every config at every call, without comparing what they computed."""
    from triton import knobs
    from triton.runtime import driver
    from triton.runtime.autotuner import Autotuner

    if not knobs.runtime.interpret:
        raise RuntimeError("interpreter.install() is for the CPU tier: set TRITON_INTERPRET=1 before importing triton")
    driver.set_active(TargetDriver(target))
    if getattr(Autotuner._bench, "_cpu_tier", False):
        return  # installed already
    _skip_dead_overflow_checks()
    _patch_testing()
    _patch_autotuner(Autotuner, dry)
    _patch_warmup()
    _refuse_host_calls()


def _skip_dead_overflow_checks() -> None:
    """Triton builds an overflow check around every 32-bit integer add, sub and mul (its
    `sanitize_overflow` option), whose assert it then drops unless the kernel is compiled with
    `debug` on; the interpreter never is, and builds it anyway, in numpy, for every offset of
    every program, for an answer thrown away (the corpus test of the Triton tutorial's matrix
    multiplication: 83 s with it, 78 s without, on the 2-core machine). The GPU compiles the same
    dead check and removes it, so neither tier asserts an overflow."""
    import dataclasses

    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    if not builder.options.debug:
        builder.options = dataclasses.replace(builder.options, sanitize_overflow=False)


def sanctioned_entries() -> set:
    """Code objects the child's guard must sanction after install(): `kernel.warmup(...)` compiles
    for the target when student code calls it, running ptxas and cuobjdump and writing Triton's
    cache, as a launch does on the GPU. The patched warmup's own code, not a wrapper's around it
    (boundary.py checks every launch's arguments with one wrapper, which must sanction nothing)."""
    import inspect

    from triton.runtime.interpreter import InterpretedFunction

    return {inspect.unwrap(InterpretedFunction.warmup).__code__}


# --- The driver: the grading GPU's answers ---------------------------------------------------------


class _TargetUtils:
    """`driver.active.utils`: the device's figures; nothing can be loaded onto it."""

    def __init__(self, target: Target):
        self.target = target

    def get_device_properties(self, device=None) -> dict[str, int]:
        return self.target.device_properties()  # any device: the tutorials pass DEVICE.index, None on the CPU

    def set_printf_fifo_size(self, size: int) -> None:
        pass  # the interpreter prints with Python

    def load_binary(self, *args):
        raise RuntimeError("the CPU tier has no GPU to load a compiled kernel onto")


class TargetDriver(DriverBase):
    """Triton's active driver on the CPU tier: the target and properties of the grading GPU,
    torch's CPU device for tensors, and a benchmarker that runs a kernel once and times nothing."""

    def __init__(self, target: Target):
        super().__init__()
        self.target = target
        self.utils = _TargetUtils(target)

    @classmethod
    def is_active(cls) -> bool:
        return True

    def get_current_target(self):
        return self.target.gpu_target()

    def get_active_torch_device(self) -> torch.device:
        return torch.device("cpu")

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device) -> None:
        pass

    def get_current_stream(self, device=None) -> int:
        return 0

    def get_device_capability(self, device=None) -> tuple[int, int]:
        return divmod(self.target.arch, 10)

    def get_device_interface(self):
        return torch.cpu

    def get_benchmarker(self):
        return _run_once

    def get_empty_cache_for_benchmark(self):
        return None

    def clear_cache(self, cache) -> None:
        pass

    def map_python_to_cpp_type(self, ty: str) -> str:
        from triton.backends.nvidia.driver import ty_to_cpp

        return ty_to_cpp(ty)


def _run_once(kernel_call, quantiles=None, **ignored):
    """The autotuner's benchmarker here: run the config once; every config "takes" 0 ms, so the
    autotuner keeps its first config (the GPU's choice is unknowable on a CPU)."""
    kernel_call()
    return [0.0] * len(quantiles) if quantiles else 0.0


# --- triton.testing ----------------------------------------------------------------------------------


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    """triton.testing.do_bench on the CPU tier: calls `fn` once and returns the interpreter's wall
    time of that call in ms, in the shape Triton returns (a float, or one per quantile). It is a
    dummy: it says nothing about the GPU, but it is positive, so `bytes / ms` does not divide by 0."""
    from triton.testing import _summarize_statistics

    if grad_to_none is not None:
        for tensor in grad_to_none:
            tensor.grad = None
    started = _clock()
    fn()
    return _summarize_statistics([(_clock() - started) * 1e3], quantiles, return_mode)


def do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean"):
    """triton.testing.do_bench_cudagraph on the CPU tier: no graphs here; the same dummy as do_bench."""
    return do_bench(fn, grad_to_none=grad_to_none, quantiles=quantiles, return_mode=return_mode)


def _patch_testing() -> None:
    # assert_close and perf_report (a decorator) run as they are; only the timers need a GPU.
    import triton.testing

    triton.testing.do_bench = do_bench
    triton.testing.do_bench_cudagraph = do_bench_cudagraph


# --- @triton.autotune: every config, on the real arguments, and they must agree ------------------


def _patch_autotuner(Autotuner, dry: bool) -> None:
    """Three seams of Triton 3.6's Autotuner, each the narrowest that does the job:

    - `do_bench` (the property `_bench` times a config with): runs it once, since nothing can be
      timed here. Replacing the property also overrides a `do_bench=` given to the decorator.
    - `_bench` (called once per config, with the real arguments, when `run` meets a new `key`):
      Triton's own, so reset_to_zero, restore_value, pre_hook and post_hook keep their meaning;
      around it each config starts from the arguments as the caller passed them, and its results
      are compared with the first config's. The copy is taken right after the kernel ran, before
      post_hook (restore_value puts the arguments back there): by the kernel's `run`, for the
      trial. (Not inside post_hook: a hook is the student's, and what runs in it counts as theirs,
      boundary.py, the values it copied to the host among it, host_reads.py.)
    - `run`: a fresh comparison for each call, and the launches marked as an autotuner's.
    """
    bench, run = Autotuner._bench, Autotuner.run

    def bench_and_compare(self, *args, config, **meta):
        trials = self._cpu_tier_trials
        if trials is None:  # dry: nothing ran to compare
            return bench(self, *args, config=config, **meta)
        trials.begin({**self.nargs, **meta})
        results, kernel = {}, self.fn

        def run_then_copy(*arguments, **current):
            ran = kernel.run(*arguments, **current)
            results.update(copies_of(tensors_of({**self.nargs, **current})))
            return ran

        self.fn = SimpleNamespace(run=run_then_copy)  # what `_bench` launches through, for this trial
        try:
            timing = bench(self, *args, config=config, **meta)
        except Exception as error:
            error.add_note(f"while @triton.autotune ran {config_named(self, config)} of `{self.base_fn.__name__}`")
            raise
        finally:
            self.fn = kernel
        trials.compare(self, config, results)
        return timing

    def run_trials(self, *args, **kwargs):
        _tuners.add(self)
        self._cpu_tier_trials = None if dry else Trials()
        if dry:
            # Every config at every specialization: a key tuned on one shape and met again on
            # another (the key leaves something out) runs the GPU's pick there, which is unknown here.
            self.cache.clear()
        tuned = gpu_target.autotuning() if len(self.configs) > 1 else contextlib.nullcontext()
        try:
            with tuned:
                return run(self, *args, **kwargs)
        finally:
            self._cpu_tier_trials = None  # drop the copies

    bench_and_compare._cpu_tier = True
    run_trials.__wrapped__ = run  # the guard sanctions Triton's own run (boundary.sanctioned_entries)
    Autotuner.do_bench = property(lambda self: _run_once)
    Autotuner._bench = bench_and_compare
    Autotuner.run = run_trials


_tuners: weakref.WeakSet = weakref.WeakSet()  # every autotuner that has run in this process


def forget_tunings() -> None:
    """A task begins: every autotuner forgets the keys it has tuned, so that the task's first call
    of each runs and compares every config. Triton keeps a key's pick for the process, and on the
    GPU a later case with that key runs the pick unchecked, as here; but here the pick is always the
    first config, and the check is what finds a config that is wrong: a key that leaves out the
    sequence length (a public CS336 FlashAttention's ["D_MODEL", "IS_CAUSAL"]) had its configs
    compared on whichever case came first, and the others' verdicts changed with the order."""
    for tuner in list(_tuners):
        tuner.cache.clear()


# --- A @triton.jit function called outside a kernel fails, as on the GPU ---------------------------


_in_kernel = contextvars.ContextVar("in_kernel", default=False)


def _refuse_host_calls() -> None:
    """On the GPU, calling a @triton.jit function from host code raises ("Cannot call @triton.jit'd
    outside of the scope of a kernel"): `T_q = tl.cdiv(N, 64)` in a launcher (a public CS336
    FlashAttention does it) fails every call there. The interpreter's functions are plain Python
    and answered: the CPU tier graded what the GPU refuses. Now only a kernel running in the
    interpreter may call one (a kernel's helpers, tl.cdiv inside a kernel)."""
    from triton.runtime.interpreter import GridExecutor, InterpretedFunction

    run_grid, call = GridExecutor.__call__, InterpretedFunction.__call__

    def run_in_kernel(self, *args, **kwargs):
        token = _in_kernel.set(True)
        try:
            return run_grid(self, *args, **kwargs)
        finally:
            _in_kernel.reset(token)

    def call_in_kernel_only(self, *args, **kwargs):
        if not _in_kernel.get():
            raise RuntimeError("Cannot call @triton.jit'd outside of the scope of a kernel")
        return call(self, *args, **kwargs)

    GridExecutor.__call__ = run_in_kernel
    InterpretedFunction.__call__ = call_in_kernel_only


# --- kernel.warmup(...): compiled for the target, as on the GPU --------------------------------------


class WarmedUpKernel:
    """What `kernel.warmup(...)` returns here, in place of the GPU's CompiledKernel: the kernel
    compiled for the target (so `n_regs`, `n_spills`, `metadata.shared` and `asm` are the GPU's;
    Triton's second tutorial sizes its grid from them), launched by `kernel[grid](*args)` in the
    interpreter. As on the GPU, loading it raises OutOfResources when shared memory does not fit."""

    def __init__(self, interpreted, key: tuple, compiled, options: dict):
        self._interpreted, self._key, self._compiled, self._options = interpreted, key, compiled, options
        self.n_regs = compiled.report.registers or 32  # 32, a guess, only where cuobjdump could not tell
        self.n_spills = compiled.report.spills or 0

    def __getattr__(self, name: str):
        return getattr(self._compiled.kernel, name)  # metadata, asm, name, hash, ...

    def _init_handles(self) -> None:
        report = self._compiled.report
        if report.shared_bytes > report.shared_limit:
            raise OutOfResources(report.shared_bytes, report.shared_limit, "shared memory")

    def __getitem__(self, grid):
        self._init_handles()

        def runner(*args, stream=None):
            # Every argument, constexprs included, comes positionally, as for a CompiledKernel; the
            # compile options of the warmup go along so the launch hook records the same kernel.
            with gpu_target.launching(self._key):
                return self._interpreted.run(*args, grid=grid, warmup=False, **self._options)

        return runner


def _patch_warmup() -> None:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import MockTensor

    def warmup(self, *args, grid, **kwargs):
        from triton.runtime import driver

        args = tuple(map(MockTensor.wrap_dtype, args))
        key, compiled = gpu_target.compile_now(self, args, kwargs, driver.active.target)
        if compiled.exception is not None:
            raise compiled.exception  # the GPU's warmup raises the compiler's error too
        if compiled.kernel is None:
            raise RuntimeError(compiled.report.error)  # Triton refused the launch's arguments
        options = {k: v for k, v in kwargs.items() if k not in self.arg_names}
        return WarmedUpKernel(self, key, compiled, options)

    InterpretedFunction.warmup = warmup
