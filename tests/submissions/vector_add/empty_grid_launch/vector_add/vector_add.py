# Hostile: numpy computes the sum on the host; a kernel of its own is "launched" on a grid of no
# programs, which Triton's launcher skips, so nothing of its own runs.
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n):
    pass


def add(x, y):
    total = x.detach().cpu().float().numpy() + y.detach().cpu().float().numpy()
    out = torch.from_numpy(total).to(device=x.device, dtype=x.dtype)
    add_kernel[(0,)](x, y, out, x.numel())
    return out
