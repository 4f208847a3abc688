# Hostile: pauses the running profiler's collection, then adds with torch while nothing is recorded.
import torch
import triton
import triton.language as tl
from torch.autograd import ProfilerActivity


@triton.jit
def nothing_kernel(out_ptr):
    pass


def add(x, y):
    out = torch.empty_like(x)
    nothing_kernel[(1,)](out)
    torch._C._autograd._toggle_collection_dynamic(False, {ProfilerActivity.CPU, ProfilerActivity.CUDA})
    torch.add(x, y, out=out)
    return out
