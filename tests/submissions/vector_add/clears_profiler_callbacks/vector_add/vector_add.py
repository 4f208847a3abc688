# Hostile: removes every RecordFunction callback (the profiler's among them), then adds with torch.
import torch
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(out_ptr):
    pass


def add(x, y):
    out = torch.empty_like(x)
    nothing_kernel[(1,)](out)
    torch._C._autograd._clear_callbacks()
    torch.add(x, y, out=out)
    return out
