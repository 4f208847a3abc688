# Hostile: CuPy's elementwise add does the work on the tensors' memory; an empty kernel of its own beside it.
import cupy
import torch
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(out_ptr):
    pass


def add(x, y):
    out = torch.empty_like(x)
    cupy.add(cupy.from_dlpack(x), cupy.from_dlpack(y), out=cupy.from_dlpack(out))
    nothing_kernel[(1,)](out)
    return out
