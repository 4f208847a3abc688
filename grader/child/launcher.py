"""Calling a student's CUDA launcher (an extern "C" function) from the child, through ctypes.

The launcher gets the device pointers of torch tensors and plain integers, launches on the
default stream and returns `cudaGetLastError()`. The grader allocates the output (so it is
poisoned and guarded like any other) and checks the return code: the stub's documented
not-implemented value means `not_implemented`, any other nonzero value is a CUDA error.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

from grader.assignment import cases
from grader.assignment.spec import Assignment, Part
from grader.child.submission import SubmissionError

CUDA_ERRORS = {
    1: "cudaErrorInvalidValue", 2: "cudaErrorMemoryAllocation", 9: "cudaErrorInvalidConfiguration",
    35: "cudaErrorInsufficientDriver", 98: "cudaErrorInvalidDeviceFunction", 100: "cudaErrorNoDevice",
    209: "cudaErrorNoKernelImageForDevice", 222: "cudaErrorUnsupportedPtxVersion", 400: "cudaErrorInvalidResourceHandle",
    700: "cudaErrorIllegalAddress", 701: "cudaErrorLaunchOutOfResources", 702: "cudaErrorLaunchTimeout",
    719: "cudaErrorLaunchFailure",
}  # fmt: skip


class LaunchError(RuntimeError):
    """The launcher returned a CUDA error code."""


class StubNotImplemented(NotImplementedError):
    """The launcher returned the stub's not-implemented code: the message says so in those words."""


class CudaEntry:
    """The student's launcher, wrapped as `entry(**inputs) -> output tensor` like a Triton entry point."""

    def __init__(self, assignment: Assignment, part: Part, library: Path):
        self.assignment, self.part = assignment, part
        try:
            self.function = getattr(ctypes.CDLL(str(library)), part.entry)
        except OSError as error:
            raise SubmissionError("import_error", f"the library built from {part.file} failed to load: {error}") from None
        except AttributeError:
            message = f'{part.file} must define `extern "C" int {part.entry}(...)`; no such function was exported'
            raise SubmissionError("missing_entry_point", message) from None
        self.function.restype = ctypes.c_int

    def __call__(self, **inputs: torch.Tensor) -> torch.Tensor:
        first = next(t for t in inputs.values() if isinstance(t, torch.Tensor))
        shape = cases.function(self.assignment, self.part.output_shape)(**inputs)
        out = torch.empty(shape, dtype=first.dtype, device=first.device)
        arguments = cases.function(self.assignment, self.part.arguments)(out, **inputs)
        code = self.function(*[ctypes.c_void_p(a.data_ptr()) if isinstance(a, torch.Tensor) else a for a in arguments])
        if code == self.part.not_implemented_code:
            raise StubNotImplemented(f"{self.part.entry}() returned {code}, the not-implemented code of the stub: "
                                     f"fill in {self.part.file}")
        if code != 0 and first.is_cuda:
            name = CUDA_ERRORS.get(code, "see cudaGetErrorName")
            raise LaunchError(f"{self.part.entry} returned CUDA error {code} ({name})")
        return out
