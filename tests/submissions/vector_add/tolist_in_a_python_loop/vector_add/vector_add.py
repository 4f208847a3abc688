# Hostile: Python does the work: both inputs made lists with tolist(), added in a loop, the sums written back into the output through a tensor made from the list; beside it an empty Triton kernel of its own.
import torch
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(out_ptr, n):
    pass


def add(x, y):
    sums = [a + b for a, b in zip(x.tolist(), y.tolist())]
    out = torch.empty_like(x)
    out.copy_(torch.as_tensor(sums, dtype=x.dtype, device=x.device))
    nothing_kernel[(1,)](out, out.numel())
    return out
