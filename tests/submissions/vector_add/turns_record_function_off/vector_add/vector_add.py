# Hostile: switches RecordFunction off around torch.add, so that torch's profiler would not see the op.
import torch
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(out_ptr):
    pass


def add(x, y):
    out = torch.empty_like(x)
    nothing_kernel[(1,)](out)
    torch._C._autograd._enable_record_function(False)
    try:
        torch.add(x, y, out=out)
    finally:
        torch._C._autograd._enable_record_function(True)
    return out
