"""Test inputs and references, from an assignment's reference.py and a seed.

The child process (which runs student code) and the parent (which judges) both call
`make_inputs` with the same seed on the same device and get the same tensors, so no input ever
needs to travel between them; the reference is computed by the parent alone, in float64.
"""

from __future__ import annotations

import hashlib
import math
import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType

import torch

from grader.assignment.spec import Assignment, Case, Part

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}


@cache
def reference_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_reference_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def function(assignment: Assignment, name: str):
    module = reference_module(assignment.reference_path)
    found = getattr(module, name, None)
    if not callable(found):
        raise AttributeError(f"{assignment.reference_path}: assignment.toml names '{name}', which it does not define")
    return found


def seed_for(assignment: Assignment, part: Part, kind: str, index: int, salt: str = "") -> int:
    """A seed per (assignment, part, case): stable for a given salt, unguessable without it."""
    text = f"{salt}|{assignment.name}|{assignment.seed}|{part.name}|{kind}|{index}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:7], "little")


def make_inputs(assignment: Assignment, part: Part, case: Case, seed: int, device: str) -> dict[str, object]:
    """The keyword arguments of one call: tensors, and plain values (a flag such as ``causal``)
    that travel unchanged."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    make = function(assignment, part.inputs)
    return make(tuple(case.shape), DTYPES[case.dtype], case.layout, generator, device)


def case_inputs(assignment: Assignment, part: Part, case: Case, seed: int, device: str) -> dict[str, object]:
    """A correctness case's inputs on `device`. A case that both tiers grade draws them from the
    CPU's generator, and the GPU tier copies them over: both tiers then judge the very same numbers.
    Drawn on each device, they differed (CUDA's generator is not the CPU's), and a bug that only
    some draws show got two verdicts: a FlashAttention kernel that weighs the zero-padded keys past
    N like real ones is right for one query whose score is loud (its weight beside 127 padded keys
    of score 0: 1 - 1e-10), and wrong everywhere for a query whose score is -10; the CPU tier drew
    the second, the GPU happened not to (issue 45). A case of one tier draws where it runs, as do
    benchmarks (`make_inputs`), whose inputs are large."""
    if case.tier != "both" or device == "cpu":
        return make_inputs(assignment, part, case, seed, device)
    drawn = make_inputs(assignment, part, case, seed, "cpu")
    return {name: _moved(value, device) if isinstance(value, torch.Tensor) else value for name, value in drawn.items()}


def _moved(tensor: torch.Tensor, device: str) -> torch.Tensor:
    """The tensor on `device` with its whole storage, so a strided view keeps its strides, offset
    and the values between its rows (which a kernel that ignores the row stride reads)."""
    storage = tensor.untyped_storage()
    whole = tensor.new_empty(0).set_(storage, 0, (storage.nbytes() // tensor.element_size(),), (1,))
    return whole.to(device).as_strided(tensor.shape, tensor.stride(), tensor.storage_offset())


def reference_output(assignment: Assignment, part: Part, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The reference in float64, computed from the very inputs the student received."""
    upcast = {k: v.to(torch.float64) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
              for k, v in inputs.items()}  # fmt: skip
    with torch.no_grad():
        return function(assignment, part.reference)(**upcast)


def tensors(inputs: dict[str, object]) -> dict[str, torch.Tensor]:
    """The tensor arguments of a call, the ones the grader guards, compares and refills."""
    return {name: value for name, value in inputs.items() if isinstance(value, torch.Tensor)}


def nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def traffic(assignment: Assignment, part: Part, inputs: dict[str, torch.Tensor]) -> dict:
    return function(assignment, part.traffic)(**inputs)


def shaped_inputs(assignment: Assignment, part: Part, case: Case) -> dict[str, object]:
    """The case's inputs without any data: made on torch's "meta" device, each tensor has the
    shape, dtype, strides and storage offset of the real ones, and plain values are as they are."""
    with torch.device("meta"):
        return function(assignment, part.inputs)(tuple(case.shape), DTYPES[case.dtype], case.layout,
                                                 torch.Generator(), "meta")  # fmt: skip


def zeros_shaped_as(assignment: Assignment, part: Part, case: Case) -> dict[str, object]:
    """The case's inputs as zeros on the CPU, each tensor laid out as the real one (shaped_inputs):
    what a precompile child calls a part with (child/precompile.py)."""
    return {name: _zeros(value) if isinstance(value, torch.Tensor) else value
            for name, value in shaped_inputs(assignment, part, case).items()}  # fmt: skip


def _zeros(like: torch.Tensor) -> torch.Tensor:
    return zeros_laid_out(list(like.shape), list(like.stride()), like.storage_offset(), like.dtype, like.requires_grad)


def storage_extent(shape: list[int], stride: list[int], offset: int) -> int:
    """The elements of storage a tensor of this layout reaches (1 for an empty one)."""
    if any(size == 0 for size in shape):
        return 1
    return offset + sum((size - 1) * step for size, step in zip(shape, stride)) + 1


def zeros_laid_out(shape: list[int], stride: list[int], offset: int, dtype: torch.dtype, grad: bool) -> torch.Tensor:
    """Zeros on the CPU with this shape, these strides and this storage offset."""
    made = torch.zeros(storage_extent(shape, stride, offset), dtype=dtype).as_strided(shape, stride, offset)
    return made.requires_grad_() if grad else made


def launched_on(part: Part, device: str) -> list[Case]:
    """What a tier's children call a Triton part with: its cases there (`graded_on`) and, on a GPU,
    its benchmarks after them (a CUDA C part launches no Triton kernel)."""
    graded = graded_on(part, device)
    return graded + list(part.benchmarks) if device == "cuda" and not part.is_cuda else graded


def graded_on(part: Part, device: str) -> list[Case]:
    """A Triton part's cases on a tier (a CUDA C part launches no Triton kernel)."""
    return [] if part.is_cuda else [case for case in part.cases if case.runs_on(device)]


def output_bytes(assignment: Assignment, part: Part, case: Case) -> int:
    """The bytes of the case's right output, found without any data: inputs made on torch's "meta"
    device carry shapes only, and the reference (or, for CUDA C, output_shape) maps them."""
    dtype = DTYPES[case.dtype]
    inputs = shaped_inputs(assignment, part, case)
    with torch.device("meta"):
        if part.is_cuda:
            shape = function(assignment, part.output_shape)(**inputs)
        else:
            shape = reference_output(assignment, part, inputs).shape
    return math.prod(shape) * dtype.itemsize
