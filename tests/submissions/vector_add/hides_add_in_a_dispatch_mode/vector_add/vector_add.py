# Hostile: a dispatch mode of its own computes the sum inside torch's `empty_like`, so that the
# add runs nested in an op that only allocates.
import torch
import triton
import triton.language as tl
from torch.utils._python_dispatch import TorchDispatchMode


@triton.jit
def nothing_kernel(out_ptr):
    pass


class SumOnAllocation(TorchDispatchMode):
    def __init__(self, x, y):
        super().__init__()
        self.x, self.y = x, y

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.empty_like.default:
            torch.add(self.x, self.y, out=out)
        return out


def add(x, y):
    with SumOnAllocation(x, y):
        out = torch.empty_like(x)
    nothing_kernel[(1,)](out)
    return out
