# Hostile: runs torch.add inside a profiler range named like an allocation, so that the add looks
# like part of torch's own work for `empty_like`.
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
    with record_function("aten::empty_like"):
        torch.add(x, y, out=out)
    return out
