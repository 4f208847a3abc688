# Hostile: hides torch.add from a dispatch mode, inside a profiler range named like the harness's.
import torch
import triton
import triton.language as tl
from torch.autograd.profiler import record_function


@triton.jit
def nothing_kernel(out_ptr):
    pass


def add(x, y):
    out = torch.empty_like(x)
    nothing_kernel[(1,)](out)
    with torch._C._DisableTorchDispatch(), record_function("grader::harness"):
        torch.add(x, y, out=out)
    return out
