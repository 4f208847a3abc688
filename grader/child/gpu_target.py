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
_twins: dict[int, JITFunction] = {}
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
            key, launch = _specialize(_twin(kernel), args, kwargs)
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


class _Twin(JITFunction):
    """The JITFunction that `@triton.jit` would have made without TRITON_INTERPRET=1.

    Under the interpreter every @triton.jit function, the student's helpers and half of
    triton.language (tl.max, tl.cdiv, ...) included, is an InterpretedFunction, which the code
    generator does not take as a callee. The twin sees twins wherever it looks names up."""

    def get_capture_scope(self):
        return {name: _twin(value) for name, value in super().get_capture_scope().items()}


def _twin(value):
    from triton.runtime.interpreter import InterpretedFunction

    if not isinstance(value, InterpretedFunction):
        return value
    if id(value) not in _twins:
        # Keyed by id (an InterpretedFunction's hash would hash its source); the twin keeps the
        # InterpretedFunction alive, so the id is not reused while it is remembered.
        _twins[id(value)] = _Twin(value.fn, **value.kwargs)
        _twins[id(value)].interpreted = value
    return _twins[id(value)]


def _member_function(value):
    """The free function behind a tensor method (`x.sum` forwards to `tl.sum`). Triton binds a
    JITFunction directly, but wraps anything else, an InterpretedFunction included; calling that
    wrapper would run the interpreter inside the compiler."""
    wrapper = getattr(value, "__func__", None)
    if getattr(wrapper, "__qualname__", "") != "_tensor_member_fn.<locals>.wrapper":
        return value
    return inspect.getclosurevars(wrapper).nonlocals.get("fn", value)


@contextlib.contextmanager
def _compiler_sees_twins():
    """While compiling: no interpreter mode, the real triton.language, and InterpretedFunctions
    reached as attributes (tl.max, x.sum, a helper in another module) seen as their twins."""
    from triton.compiler.code_generator import BoundJITMethod, CodeGenerator, _is_triton_value
    from triton.runtime.jit import DependenciesFinder

    import triton.experimental.gluon  # noqa: F401  Triton imports it lazily; it only loads in interpreter mode

    get_attribute, record_reference = CodeGenerator.get_Attribute, DependenciesFinder.record_reference

    def get_twin_attribute(self, lhs, attr):
        value = get_attribute(self, lhs, attr)
        twin = _twin(_member_function(value))
        if twin is value:
            return value
        return BoundJITMethod(lhs, twin) if _is_triton_value(lhs) else twin  # x.sum() binds x, as for a JITFunction

    CodeGenerator.get_Attribute = get_twin_attribute
    DependenciesFinder.record_reference = lambda self, val, *a, **k: record_reference(self, _twin(val), *a, **k)
    try:
        with knobs.runtime.scope(), _pristine_language():
            knobs.runtime.interpret = False  # constexpr_function results stay constexprs
            yield
    finally:
        CodeGenerator.get_Attribute, DependenciesFinder.record_reference = get_attribute, record_reference


# The interpreter runs a kernel by patching triton.language (tl.load, tensor.__add__, tl.range, ...)
# with numpy versions and undoes it after the launch, but not all of it: calling a @jit function
# whose module imports triton.language.core (tl.cdiv, say) from a kernel patches that module too,
# and nothing restores it (measured: 61 names of triton.language.core stay patched after one launch).
# The compiler needs the real language, so each attribute the interpreter patches is remembered
# with its value before the first patch, and put back while compiling. Recording starts when this
# module is imported, which must happen before any kernel runs.
_MISSING = object()
_originals: dict[tuple[int, str], tuple[object, str, object]] = {}


def _remember_originals() -> None:
    from triton.runtime.interpreter import _LangPatchScope

    set_attr = _LangPatchScope.set_attr
    if getattr(set_attr, "remembers", False):
        return

    def remembering_set_attr(scope, obj, name, value):
        _originals.setdefault((id(obj), name), (obj, name, getattr(obj, name, _MISSING)))
        return set_attr(scope, obj, name, value)

    remembering_set_attr.remembers = True
    _LangPatchScope.set_attr = remembering_set_attr


@contextlib.contextmanager
def _pristine_language():
    now = [(obj, name, getattr(obj, name, _MISSING)) for obj, name, _ in _originals.values()]
    for obj, name, original in _originals.values():
        _set_or_delete(obj, name, original)
    try:
        yield
    finally:
        for obj, name, value in now:
            _set_or_delete(obj, name, value)


def _set_or_delete(obj, name: str, value) -> None:
    if value is not _MISSING:
        setattr(obj, name, value)
    elif hasattr(obj, name):
        delattr(obj, name)


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


def _compile_once(launch: _Launch, target: Target) -> Compilation:
    import triton
    from triton.compiler import ASTSource, make_backend

    report = dataclasses.replace(launch.report, shared_limit=target.max_shared_mem)
    if launch.twin is None:
        return Compilation(report)  # the launch itself fails: its error is the report's already
    started = time.perf_counter()
    try:
        options = make_backend(target.gpu_target()).parse_options(dict(launch.options))
        # Triton prints the whole PTX to stdout when ptxas fails; the error it raises says enough.
        with _compiler_sees_twins(), contextlib.redirect_stdout(io.StringIO()):
            source = ASTSource(launch.twin, launch.signature, launch.constexprs, launch.attrs)
            kernel = triton.compile(source, target=target.gpu_target(), options=options.__dict__)
    except Exception as error:
        report.seconds = time.perf_counter() - started
        report.error, report.error_line = compiler_message(error, report.line)
        report.skippable = isinstance(error, _autotuner_skips())
        return Compilation(report, exception=error)
    report.seconds = time.perf_counter() - started
    report.compiled, report.shared_bytes = True, kernel.metadata.shared
    report.num_warps, report.num_stages = kernel.metadata.num_warps, kernel.metadata.num_stages
    report.registers, report.spills = resources.cubin_registers(kernel)
    report.tf32_dots = resources.tf32_dots(kernel.asm.get("ttir", ""))
    report.loads = loads.count(report.kernel, report.file, kernel.asm.get("source"))
    report.resources = resources.of_compiled(kernel, report.kernel, report.file, report.registers, report.spills)
    return Compilation(report, kernel)


def _autotuner_skips() -> tuple[type, ...]:
    """The errors on which Triton 3.6's Autotuner._bench gives a config an infinite time and goes on
    with the others; any other error of one config ends the whole launch."""
    from triton.compiler.errors import CompileTimeAssertionFailure
    from triton.runtime.errors import OutOfResources, PTXASError

    return OutOfResources, CompileTimeAssertionFailure, PTXASError


def _needs_scratch(kernel) -> bool:
    return getattr(kernel.metadata, "global_scratch_size", 0) > 0


if knobs.runtime.interpret:
    _remember_originals()
