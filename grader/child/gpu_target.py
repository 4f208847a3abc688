"""Compile, for the GPU the course grades on, every Triton kernel that a call launched on the CPU tier.

Under TRITON_INTERPRET=1 a kernel body runs as Python and never meets Triton's compiler, so what
only the compiler sees would first show on the GPU: a kernel it rejects, shared memory beyond what
one block may have, a float32 `tl.dot` that runs as TF32. Triton 3.6 compiles for an NVIDIA target
on a machine without a GPU (ptxas and cuobjdump ship in its wheel), so the CPU tier compiles each
launched kernel too, specialized exactly as the GPU would specialize that launch, and reports what
the GPU would say, and how the kernel loads its tiles (loads.py: through block pointers or not).
A compilation takes 0.1 s to a few seconds (more for huge blocks), so each distinct
specialization is compiled once.

In the child, under TRITON_INTERPRET=1, with this module imported before any kernel runs:
    forget_launches()                           # as a task begins: an earlier task's launches are not its own
    record_launch(kernel, args, kwargs, grid)   # from the launch hook, every launch; cheap, never raises
    reports = compile_all()                     # after the task's calls: its kernels, one KernelReport each

A report answers for the launches since compile_all (or forget_launches) last ran, and for nothing
else: whether they all came from an autotuner, whether an allocator was set, are theirs alone. What
one task launched never shows in another's reports (the verdict of a case must not depend on the
cases graded before it in the same process).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import inspect
import io
import os
import time
from dataclasses import dataclass

from triton import knobs
from triton.runtime.jit import JITFunction

from grader.child import loads, resources
from grader.child.failures import compiler_message
from grader.child.target import TARGET, Target
from grader.child.twins import compiler_sees_twins, twin
from grader.messages.reports import KernelLoads, KernelResources


@dataclass
class KernelReport:
    kernel: str  # the kernel's name
    file: str  # the file it is defined in
    line: int  # the line of its `def`
    constexprs: dict[str, str]  # constexpr arguments of the launch, name -> repr of the value
    num_warps: int
    num_stages: int
    compiled: bool = False  # the target's compiler accepted the kernel
    error: str = ""  # what the compiler (or the launch) would say on the GPU
    error_line: int | None = None  # the line of `file` the compiler pointed at, where it said
    shared_bytes: int = 0  # shared memory one program needs on the target
    shared_limit: int = TARGET.max_shared_mem  # the most one block may have there
    registers: int | None = None  # per thread (advice: occupancy), from the cubin
    spills: int | None = None  # local memory per thread / 4, as Triton's n_spills counts it (advice)
    tf32_dots: int = 0  # tl.dot on float32 operands that the GPU runs in TF32
    loads: KernelLoads | None = None  # how it loads its tiles (block pointers, descriptors, pointers)
    resources: KernelResources | None = None  # what it asks of an SM and is made of (advice: resources.py)
    missing_allocator: bool = False  # needs global scratch (in-kernel descriptors): no triton.set_allocator
    autotuned: bool = False  # only launched by a several-config @triton.autotune (see `launches`)
    skippable: bool = False  # an error the GPU's autotuner skips a config for (_autotuner_skips)
    seconds: float = 0.0  # time the compilation took here
    cached: bool = False  # Triton's cache held it already (the precompile pass's, or an earlier grading's)
    key: str = ""  # Triton's cache key of it

    @property
    def where(self) -> str:
        return f"{os.path.basename(self.file)}, line {self.error_line or self.line}"

    @property
    def launches(self) -> bool:
        """Whether the GPU would run it: compiled, shared memory within the limit (Triton refuses the
        launch otherwise), scratch memory allocatable. An autotuned config that does not is only
        skipped by the GPU's autotuner: that is fatal only when every config of the kernel fails."""
        return self.compiled and self.shared_bytes <= self.shared_limit and not self.missing_allocator


@dataclass
class _Launch:
    """One specialization of one kernel, as the GPU would compile it (no tensors kept)."""

    report: KernelReport  # what is known before compiling: name, place, constexprs, options
    twin: JITFunction | None = None
    signature: dict | None = None  # argument name -> Triton type ("*fp32", "i32", "constexpr")
    constexprs: dict | None = None  # argument path -> value
    attrs: dict | None = None  # argument path -> specialization attributes (tt.divisibility)
    options: dict | None = None  # compile options of the launch (num_warps, num_stages, debug, ...)


@dataclass
class _Usage:
    """How one specialization was launched since compile_all last ran (every launch of that stretch)."""

    autotuned: bool = True  # every launch came from an autotuner trying configs
    allocator_set: bool = True  # triton.set_allocator was called before every launch


@dataclass
class Compilation:
    report: KernelReport
    kernel: object = None  # Triton's CompiledKernel, where it compiled
    exception: BaseException | None = None  # the compiler's, where it did not


_launches: dict[tuple, _Launch] = {}  # every specialization launched in this process
_since_last: dict[tuple, _Usage] = {}  # those launched since compile_all last ran (in order, once each)
_compilations: dict[tuple, Compilation] = {}
_autotuning = contextvars.ContextVar("autotuning", default=False)
_known_launch = contextvars.ContextVar("known_launch", default=None)


def record_launch(kernel, args: tuple, kwargs: dict, grid=None) -> tuple:
    """Remember the launch `kernel[grid](*args, **kwargs)` for compile_all, once per specialization.

    `kernel` is what the launch hook sees (an InterpretedFunction, or a JITFunction), `args` and
    `kwargs` the launch's arguments, constexprs and options (num_warps, ...) included; the grid
    does not change what is compiled. Returns the specialization's key. Never raises: what Triton
    would refuse at launch becomes the report's error.
    """
    from triton.runtime import _allocation

    key = _known_launch.get()
    if key is None:
        try:
            key, launch = _specialize(twin(kernel), args, kwargs)
        except Exception as error:  # the GPU refuses this launch before compiling (an unknown keyword, say)
            key, launch = (id(kernel), repr(error)), _Launch(_report_of(kernel, {}, kwargs))
            launch.report.error = f"{type(error).__name__}: {error}"
        _launches.setdefault(key, launch)
    usage = _since_last.setdefault(key, _Usage())
    usage.autotuned &= _autotuning.get()
    usage.allocator_set &= _allocation._allocator.get() is not _allocation._NULL_ALLOCATOR
    return key


def compile_all(target: Target = TARGET) -> list[KernelReport]:
    """One report per specialization launched since compile_all (or forget_launches) last ran: a
    task's kernels, when called once its calls are done, in the order of their first launch. Each
    specialization is compiled once per process; later reports of it come from the cache."""
    launched = dict(_since_last)
    _since_last.clear()
    return [_report(_compile(key, target), usage) for key, usage in launched.items()]


def launched() -> list[_Launch]:
    """The specializations launched since compile_all (or forget_launches) last ran, in the order
    of their first launch, taken unreported and uncompiled: a precompile child sends them to its
    parent as data (child/precompile.py)."""
    found = [_launches[key] for key in _since_last]
    _since_last.clear()
    return found


def compile_specialization(kernel, signature: dict, constexprs: dict, attrs: dict, options: dict,
                           target: Target = TARGET) -> KernelReport:  # fmt: skip
    """Compile `kernel` (an InterpretedFunction) with a specialization recorded in another
    process (`launched`), as the GPU compiles that launch, into Triton's cache, analysing nothing:
    a precompile child's work (child/precompile.py)."""
    report = _report_of(kernel, constexprs, options)
    return _compile_once(_Launch(report, twin(kernel), signature, constexprs, attrs, options), target, False).report


def forget_launches() -> None:
    """Drop the launches recorded since compile_all last ran, unreported: those of a task whose
    call raised before they were compiled (its verdict is that exception's). Left, they would be
    reported as the next task's, whose kernels they are not."""
    _since_last.clear()


def compile_now(kernel, args: tuple, kwargs: dict, target: Target = TARGET) -> tuple[tuple, Compilation]:
    """Record one launch and compile it at once (for `kernel.warmup(...)`, which compiles on a GPU)."""
    key = record_launch(kernel, args, kwargs)
    return key, _compile(key, target)


def _report(compilation: Compilation, usage: _Usage) -> KernelReport:
    """The compilation's report, as those launches made it: a copy, so that no task's report
    changes what the cache hands the next one."""
    report = compilation.report
    return dataclasses.replace(report, autotuned=usage.autotuned, missing_allocator=report.compiled
                               and not usage.allocator_set and _needs_scratch(compilation.kernel))  # fmt: skip


@contextlib.contextmanager
def autotuning():
    """Launches inside are an autotuner's trials: on the GPU a config that does not fit is skipped."""
    token = _autotuning.set(True)
    try:
        yield
    finally:
        _autotuning.reset(token)


@contextlib.contextmanager
def launching(key: tuple):
    """Launches inside run the kernel that compile_now compiled under `key` (a warmed-up kernel)."""
    token = _known_launch.set(key)
    try:
        yield
    finally:
        _known_launch.reset(token)


# --- Specializing a launch as the GPU would ------------------------------------------------------


def _specialize(twin: JITFunction, args: tuple, kwargs: dict) -> tuple[tuple, _Launch]:
    """Triton's own binder and packer, as JITFunction.run calls them on a GPU: pointers become
    typed pointers with their 16-byte divisibility, integers i32/i64 (1 becomes a constexpr),
    constexprs their values, and options come from the launch."""
    from triton.compiler import make_backend
    from triton.runtime.jit import compute_cache_key, create_function_from_signature

    backend = make_backend(TARGET.gpu_target())  # specialization is the same on every NVIDIA target
    kwargs = dict(kwargs)
    kwargs["debug"] = kwargs.get("debug", twin.debug) or knobs.runtime.debug  # as JITFunction.run does
    kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    if not hasattr(twin, "binder"):
        twin.binder = create_function_from_signature(twin.signature, twin.params, backend)
    bound_args, specialization, options = twin.binder(*args, **kwargs)
    parsed, signature, constexprs, attrs = twin._pack_args(backend, kwargs, bound_args, specialization, options)
    # Options are read from every keyword, a parameter's too: the tutorial's `num_stages` is both.
    chosen = {k: v for k, v in kwargs.items() if k in parsed.__dict__}
    report = _report_of(twin, constexprs, chosen)
    key = (id(twin), compute_cache_key({}, specialization, options))
    return key, _Launch(report, twin, signature, constexprs, attrs, chosen)


def _report_of(kernel, constexprs: dict, options: dict) -> KernelReport:
    fn = inspect.unwrap(getattr(kernel, "fn", kernel))
    code = getattr(fn, "__code__", None)
    names = getattr(kernel, "arg_names", [])  # a JITFunction's, and an InterpretedFunction's
    return KernelReport(
        kernel=getattr(fn, "__name__", repr(fn)), file=code.co_filename if code else "<unknown>",
        line=_def_line(fn), num_warps=options.get("num_warps", 4), num_stages=options.get("num_stages", 3),
        constexprs={names[p[0]] + "".join(f"[{i}]" for i in p[1:]): repr(v) for p, v in constexprs.items()},
    )  # fmt: skip


def _def_line(fn) -> int:
    """The line of `def` (below any decorators), where Triton counts a kernel's lines from."""
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return getattr(getattr(fn, "__code__", None), "co_firstlineno", 0)
    return first + next((i for i, line in enumerate(lines) if line.lstrip().startswith("def ")), 0)


# --- Compiling -----------------------------------------------------------------------------------


def _compile(key: tuple, target: Target) -> Compilation:
    launch = _launches[key]
    known = _compilations.get((key, target))
    # A failure is not kept, as Triton keeps none on the GPU: each launch there compiles again, and
    # may then succeed (a kernel referencing a plain function fails its first compile only, once
    # Triton has cached a placeholder hash for it).
    if known is None or not known.report.compiled:
        _compilations[(key, target)] = _compile_once(launch, target)
    return _compilations[(key, target)]


def _compile_once(launch: _Launch, target: Target, analyse: bool = True) -> Compilation:
    import triton
    from triton.compiler import ASTSource, make_backend

    report = dataclasses.replace(launch.report, shared_limit=target.max_shared_mem)
    if launch.twin is None:
        return Compilation(report)  # the launch itself fails: its error is the report's already
    started = time.perf_counter()
    try:
        options = make_backend(target.gpu_target()).parse_options(dict(launch.options))
        # Triton prints the whole PTX to stdout when ptxas fails; the error it raises says enough.
        with compiler_sees_twins(), contextlib.redirect_stdout(io.StringIO()):
            source = ASTSource(launch.twin, launch.signature, launch.constexprs, launch.attrs)
            report.cached, report.key = _in_cache(source, target, options)
            kernel = triton.compile(source, target=target.gpu_target(), options=options.__dict__)
    except Exception as error:
        report.seconds = time.perf_counter() - started
        report.error, report.error_line = compiler_message(error, report.line)
        report.skippable = isinstance(error, _autotuner_skips())
        return Compilation(report, exception=error)
    report.seconds = time.perf_counter() - started
    report.compiled, report.shared_bytes = True, kernel.metadata.shared
    if not analyse:
        return Compilation(report, kernel)
    report.num_warps, report.num_stages = kernel.metadata.num_warps, kernel.metadata.num_stages
    report.registers, report.spills = resources.cubin_registers(kernel)
    report.tf32_dots = resources.tf32_dots(kernel.asm.get("ttir", ""))
    report.loads = loads.count(report.kernel, report.file, kernel.asm.get("source"))
    report.resources = resources.of_compiled(kernel, report.kernel, report.file, report.registers, report.spills)
    return Compilation(report, kernel)


def _in_cache(source, target: Target, options) -> tuple[bool, str]:
    """Whether Triton's cache holds this compile already, and its key: triton.compile's own key and
    look-up (Triton 3.6), asked before it compiles (the precompile pass's work found, or not)."""
    import hashlib

    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton.compiler import make_backend
    from triton.runtime.cache import get_cache_key, get_cache_manager

    backend = make_backend(target.gpu_target())
    parsed = backend.parse_options(dict(options.__dict__, **source.parse_options()))
    key = get_cache_key(source, backend, parsed, get_cache_invalidating_env_vars())
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
    name = f"{source.name[:150]}.json"
    return (get_cache_manager(digest).get_group(name) or {}).get(name) is not None, digest


def _autotuner_skips() -> tuple[type, ...]:
    """The errors on which Triton 3.6's Autotuner._bench gives a config an infinite time and goes on
    with the others; any other error of one config ends the whole launch."""
    from triton.compiler.errors import CompileTimeAssertionFailure
    from triton.runtime.errors import OutOfResources, PTXASError

    return OutOfResources, CompileTimeAssertionFailure, PTXASError


def _needs_scratch(kernel) -> bool:
    return getattr(kernel.metadata, "global_scratch_size", 0) > 0

