"""Make what students copy from Triton's tutorials run under TRITON_INTERPRET=1 as it runs on the GPU.

The CPU tier runs kernels in Triton's interpreter, where Triton 3.6 has no active driver: every
driver query raises "0 active drivers ([]). There should only be one." That breaks code that
works on the GPU: the tutorials' module-level `DEVICE = triton.runtime.driver.active.
get_active_torch_device()`, the `get_device_properties` and `kernel.warmup(...)` of Triton's
second tutorial (a fused row normalisation), `@triton.autotune` (its benchmarker is the driver's) and
`triton.testing.do_bench`. `install()` answers them as the grading GPU would (`gpu_target.TARGET`,
an sm_90 H100/H200), except that tensors live on the CPU, where the grader puts them.

An autotuner on the CPU tier times nothing; instead it runs every config on the real arguments
and checks that the configs agree, so a config-specific bug (a mask that is only right for one
BLOCK_K) shows here before the GPU happens to pick that config.

Call `install()` in the child before student code is imported.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
import weakref
from types import SimpleNamespace

import numpy as np
import torch
from triton.backends.driver import DriverBase
from triton.runtime.errors import AutotunerError, OutOfResources

from grader.child import gpu_target
from grader.child.gpu_target import TARGET, Target

_clock = time.perf_counter  # taken before student code could rebind it


def install(target: Target = TARGET) -> None:
    """Answer driver queries as `target`, and make autotune, warmup and triton.testing work here."""
    from triton import knobs
    from triton.runtime import driver
    from triton.runtime.autotuner import Autotuner

    if not knobs.runtime.interpret:
        raise RuntimeError("interpreter.install() is for the CPU tier: set TRITON_INTERPRET=1 before importing triton")
    driver.set_active(_TargetDriver(target))
    if getattr(Autotuner._bench, "_cpu_tier", False):
        return  # installed already
    _skip_dead_overflow_checks()
    _patch_testing()
    _patch_autotuner(Autotuner)
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


class _TargetDriver(DriverBase):
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


class ConfigsDisagree(AutotunerError):
    """Two configs of one @triton.autotune kernel gave different results on the same arguments."""


def _patch_autotuner(Autotuner) -> None:
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
        trials.begin({**self.nargs, **meta})
        results, kernel = {}, self.fn

        def run_then_copy(*arguments, **current):
            ran = kernel.run(*arguments, **current)
            results.update(_copies(_tensors({**self.nargs, **current})))
            return ran

        self.fn = SimpleNamespace(run=run_then_copy)  # what `_bench` launches through, for this trial
        try:
            timing = bench(self, *args, config=config, **meta)
        except Exception as error:
            error.add_note(f"while @triton.autotune ran {_describe(self, config)} of `{self.base_fn.__name__}`")
            raise
        finally:
            self.fn = kernel
        trials.compare(self, config, results)
        return timing

    def run_trials(self, *args, **kwargs):
        _tuners.add(self)
        self._cpu_tier_trials = _Trials()
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


class _Trials:
    """The configs of one autotuning: the arguments they all start from, and the first one's results.

    Every copy and comparison here is numpy's, on numpy views of the tensors' memory: the only torch
    ops are views (detach, a same-size dtype view), so the profiler, which judges the student's call
    by the torch ops it ran, sees no work of the grader's inside it (a clone or an `abs` here would be
    counted as the student's, and a fused part would lose its points for the grader's copies)."""

    def __init__(self):
        self.start: dict[str, np.ndarray] | None = None
        self.first: tuple[object, dict[str, np.ndarray]] | None = None

    def begin(self, arguments: dict) -> None:
        """Each config starts from the arguments as the caller passed them (the grader's NaN
        poison included), so a config that leaves part of an output unwritten shows as NaN there
        instead of hiding behind the previous config's values. (After the last config nothing is
        restored: the final launch sees what it would see on the GPU.)"""
        tensors = _tensors(arguments)
        if self.start is None:
            self.start = _copies(tensors)
            return
        for name, tensor in tensors.items():
            memory, start = _memory(tensor), self.start[name]
            # Only what changed (compared bit for bit, NaN poison included): an input may be an
            # expanded view, whose elements share memory.
            if not np.array_equal(_bits(memory), _bits(start)):
                np.copyto(memory, start)

    def compare(self, tuner, config, results: dict[str, np.ndarray]) -> None:
        if not results:
            return  # the config was skipped (Triton found it does not fit)
        if self.first is None:
            self.first = (config, results)
            return
        first_config, first_results = self.first
        for name, expected in first_results.items():
            difference = _difference(expected, results[name])
            if difference:
                raise ConfigsDisagree(_disagreement(tuner, first_config, config, name, difference))


def _tensors(arguments: dict) -> dict[str, torch.Tensor]:
    found = {}
    for name, value in arguments.items():
        if isinstance(value, torch.Tensor):
            found[name] = value
        elif isinstance(getattr(value, "base", None), torch.Tensor):  # a host-side TensorDescriptor
            found[f"{name}.base"] = value.base
    return found


# numpy has no bfloat16 or float8: their memory is read as integers of the same size, and
# bfloat16's widened to float32 (its top 16 bits) for comparing values.
_NO_NUMPY = {torch.bfloat16: torch.int16, **{d: torch.uint8 for d in (
    getattr(torch, n, None) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")) if d}}


def _memory(tensor: torch.Tensor) -> np.ndarray:
    """A numpy array over the tensor's own memory (writes go through), with torch views only."""
    plain = tensor.detach()
    if plain.dtype in _NO_NUMPY:
        plain = plain.view(_NO_NUMPY[plain.dtype])
    return plain.numpy()


def _copies(tensors: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    return {name: _Copy(_memory(t), t.dtype) for name, t in tensors.items()}


class _Copy(np.ndarray):
    """A copy of a tensor's memory that remembers the tensor's dtype."""

    def __new__(cls, memory: np.ndarray, dtype: torch.dtype):
        copy = np.array(memory, copy=True).view(cls)
        copy.torch_dtype = dtype
        return copy

    def __array_finalize__(self, source) -> None:
        self.torch_dtype = getattr(source, "torch_dtype", None)


def _bits(array: np.ndarray) -> np.ndarray:
    return array.view(f"u{array.dtype.itemsize}") if array.dtype.itemsize in (1, 2, 4, 8) else array


def _values(copy: _Copy) -> np.ndarray | None:
    """float64 values of a floating copy; None for other dtypes (and float8, compared bit for bit)."""
    if copy.torch_dtype == torch.bfloat16:
        return (np.asarray(copy).view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if copy.torch_dtype is not None and copy.torch_dtype.is_floating_point and copy.torch_dtype not in _NO_NUMPY:
        return np.asarray(copy, dtype=np.float64)
    return None


def _difference(expected: _Copy, actual: _Copy) -> str:
    """How `actual` differs from `expected`, in words; '' when they agree. Floats agree within a
    loose tolerance (1% of the tensor's largest value, plus 1%): configs only reorder sums, while a
    tiling bug is wrong by the size of the values. NaN and Inf must sit in the same places."""
    want, got = _values(expected), _values(actual)
    if want is None or got is None:
        bad = _bits(np.asarray(expected)) != _bits(np.asarray(actual))
        return f"{int(bad.sum())} of {bad.size} elements differ" + _first_index(bad) if bad.any() else ""
    nan = np.isnan(want) != np.isnan(got)
    if nan.any():
        return (f"NaN in {int(np.isnan(want).sum())} elements for one and {int(np.isnan(got).sum())} "
                f"for the other" + _first_index(nan))  # fmt: skip
    finite = np.isfinite(want) & np.isfinite(got)
    scale = float(np.abs(want[finite]).max()) if finite.any() else 0.0
    with np.errstate(invalid="ignore"):
        gap = np.where(finite, np.abs(want - got), 0.0)
    bad = (gap > 1e-2 * scale + 1e-2 * np.abs(np.where(finite, want, 0.0))) | (~finite & ~np.isnan(want) & (want != got))
    if not bad.any():
        return ""
    return (f"{int(bad.sum())} of {bad.size} elements differ, by up to {float(gap.max()):.3g} "
            f"(largest value {scale:.3g})" + _first_index(bad))  # fmt: skip


def _first_index(bad: np.ndarray) -> str:
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return f", first at index {index if len(index) > 1 else index[0]}"


def _describe(tuner, config) -> str:
    settings = [f"{k}={v}" for k, v in config.kwargs.items()]
    settings += [f"num_warps={config.num_warps}", f"num_stages={config.num_stages}"]
    settings += [f"num_ctas={config.num_ctas}"] if config.num_ctas != 1 else []
    settings += [f"maxnreg={config.maxnreg}"] if config.maxnreg is not None else []
    number = tuner.configs.index(config) if config in tuner.configs else "?"
    return f"config {number} ({', '.join(settings)})"


def _disagreement(tuner, first, other, name: str, difference: str) -> str:
    return (
        f"@triton.autotune of `{tuner.base_fn.__name__}`: {_describe(tuner, other)} and "
        f"{_describe(tuner, first)} give different results on the same arguments: `{name}`: {difference}. "
        "On the GPU the autotuner may pick either config, so each must be right: look for a mask, "
        "loop bound or offset that only holds for some block sizes. If the kernel adds into an "
        "argument (atomics, +=), name it in reset_to_zero= (or restore_value=), so that every config "
        "starts from the same values."
    )


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
