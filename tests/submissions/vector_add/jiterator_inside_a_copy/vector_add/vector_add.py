# Hostile: torch's jiterator does the sum from inside torch's own `copy_`, in a dispatch mode's
# handler, so that its kernel is tied to a copy, an op that may launch kernels. A one-element
# kernel of its own makes it look honest.
import torch
import triton
import triton.language as tl
from torch.cuda import jiterator
from torch.utils._python_dispatch import TorchDispatchMode

_sum = jiterator._create_jit_fn("template <typename T> T sum_kernel(T x, T y) { return x + y; }")


@triton.jit
def touch_kernel(out_ptr):
    tl.store(out_ptr, tl.load(out_ptr))


class SumOnCopy(TorchDispatchMode):
    def __init__(self, y):
        super().__init__()
        self.y = y

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.copy_.default:
            out, x = args[0], args[1]
            return func(out, _sum(x, self.y))  # the sum's kernel launches inside this copy_
        return func(*args, **(kwargs or {}))


def add(x, y):
    out = torch.empty_like(x)
    with SumOnCopy(y):
        out.copy_(x)
    touch_kernel[(1,)](out)
    return out
