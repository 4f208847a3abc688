# Hostile: an empty kernel, and the sum as torch.stack([x, y]).sum(0).
import torch
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(out_ptr):
    pass


def add(x, y):
    out = torch.stack([x, y]).sum(0)
    nothing_kernel[(1,)](out)
    return out
