"""A precompile child's tasks (running/precompile.py says why the pass exists and what it trusts).

"record": call a part's entry point once for each shape the predicted tier grades it on (task 0:
its cases of that tier; task 1, on the GPU tier: its benchmarks) with zeros laid out as those inputs
are (shape, dtype, strides, offset), every launch recorded and none run (dry_run.py, hooks.py): an
autotuner's every config is launched, so recorded, too. Each specialization goes back as data
(messages/specializations.py). A shape whose call raises is only missed.

"compile": import the part's file, find the kernel a specialization names among the objects the
student's modules hold (an autotuner's or heuristic's kernel included; one made inside a function
is not found), and compile it for the GPU target into Triton's cache (gpu_target.py), as the
graded child's launch would compile it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from grader.assignment import cases
from grader.child import gpu_target
from grader.messages.job import Input
from grader.messages.reports import Precompiled, Recorded
from grader.messages.specializations import Argument, Attribute, Attributes, Constant, Option, Specialization, written

MAX_MISSED_TEXT = 300  # characters of what a missed shape's call raised


def record(worker, task, call) -> Recorded:
    """Every specialization the part's calls launch, on every shape of the tier; `call` is how the
    harness hands control to student code (worker.call)."""
    part = worker.part(task)
    entry = worker.entry(part)  # an import that fails is the task's failure: nothing is recorded
    gpu_target.forget_launches()
    missed = []
    launched = cases.launched_on(part, worker.job.precompile)
    given = worker.job.layouts.get(part.name, [])
    # Laid out by the parent (assignment/input_layouts.py) where it could: working them out here
    # would import torch's compiler modules, seconds of every pass.
    laid_out_by_parent = len(given) == len(launched)
    graded = len(cases.graded_on(part, worker.job.precompile))
    for index, case in enumerate(launched):
        if (index >= graded) != (task.index == 1):  # task 0 calls the cases' shapes, task 1 the benchmarks'
            continue
        try:
            if laid_out_by_parent:
                inputs = laid_out(given[index])
            else:
                inputs = cases.zeros_shaped_as(worker.assignment, part, case)
            with torch.no_grad():
                call(entry, **inputs)
        except Exception as error:  # the student's: the launches it made before are kept
            missed.append(f"{case.label}: {type(error).__name__}: {error}"[:MAX_MISSED_TEXT])
    found = [as_data(launch, part.name) for launch in gpu_target.launched()]
    return Recorded([spec for spec in found if spec is not None], missed)


def laid_out(inputs: list[Input]) -> dict[str, object]:
    """A call's keyword arguments from their layouts: zeros on the CPU for each tensor, each plain
    value as it was."""
    return {given.name: cases.zeros_laid_out(given.shape, given.stride, given.offset, getattr(torch, given.dtype),
                                             given.grad) if given.kind == "tensor" else value_of(given.kind, given.text)
            for given in inputs}  # fmt: skip


def as_data(launch, part: str) -> Specialization | None:
    """A recorded launch as a Specialization; None where it cannot travel (the launch failed, or
    a value is of no kind the message carries)."""
    if launch.twin is None or not all(isinstance(kind, str) for kind in launch.signature.values()):
        return None
    code = launch.twin.fn.__code__
    constants, options = [], []
    for path, value in launch.constexprs.items():
        constants.append((list(path), written(value)))
    for name, value in launch.options.items():
        options.append((name, written(value)))
    if any(value is None for _, value in constants + options):
        return None
    attributes = [Attributes(list(path), [Attribute(str(name), int(value)) for name, value in pairs])
                  for path, pairs in launch.attrs.items()]  # fmt: skip
    return Specialization(part, code.co_name, code.co_filename, code.co_firstlineno,
                          [Argument(name, kind) for name, kind in launch.signature.items()],
                          [Constant(path, *value) for path, value in constants], attributes,
                          [Option(name, *value) for name, value in options])  # fmt: skip


def compile_one(worker, task) -> Precompiled:
    """Compile the specialization the task names (its index in the job's `compiles`)."""
    spec = worker.job.compiles[task.index]
    worker.entry(worker.part(task))  # the part's file imported: its kernels exist now
    kernel = _kernels(worker.root).get((spec.kernel, spec.file, spec.line))
    signature = {argument.name: argument.type for argument in spec.arguments}
    if kernel is None or list(signature) != list(kernel.arg_names):
        return Precompiled(False)
    constexprs = {tuple(c.path): value_of(c.kind, c.text) for c in spec.constants}
    attrs = {tuple(found.path): [[a.name, a.value] for a in found.given] for found in spec.attributes}
    options = {option.name: value_of(option.kind, option.text) for option in spec.options}
    report = gpu_target.compile_specialization(kernel, signature, constexprs, attrs, options)
    return Precompiled(report.compiled, report.cached, report.seconds, report.key)


def value_of(kind: str, text: str):
    """The value `written` wrote as (kind, text)."""
    if kind == "dtype":
        import triton.language as tl

        return tl.dtype(text)
    return {"int": int, "float": float.fromhex, "bool": lambda t: t == "True", "str": str,
            "none": lambda t: None}[kind](text)  # fmt: skip


def _kernels(root: Path) -> dict[tuple[str, str, int], object]:
    """Every InterpretedFunction the student's modules hold at their top level, directly or as
    the kernel of an autotuner or a heuristic (Triton's own classes only: no student object's
    attribute is read), by (name, file, first line)."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.interpreter import InterpretedFunction

    found = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not _inside(path, root):
            continue
        for value in list(vars(module).values()):
            for _ in range(8):  # autotune(heuristics(jit)): a few wrappers deep
                if type(value) not in (Autotuner, Heuristics):
                    break
                value = value.fn
            if type(value) is InterpretedFunction:
                code = value.fn.__code__
                found.setdefault((code.co_name, code.co_filename, code.co_firstlineno), value)
    return found


def _inside(path: str, root: Path) -> bool:
    try:
        return Path(path).resolve().is_relative_to(root)
    except (OSError, ValueError):
        return False

