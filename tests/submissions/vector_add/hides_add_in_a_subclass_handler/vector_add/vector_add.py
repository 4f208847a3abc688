# Hostile: a tensor subclass whose __torch_dispatch__ answers a copy of the input with the sum,
# computed inside torch's `clone`.
import torch
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(out_ptr):
    pass


class Summing(torch.Tensor):
    operands = ()

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func is not torch.ops.aten.clone.default:
            return NotImplemented
        return torch.add(*cls.operands)  # a plain tensor


def add(x, y):
    Summing.operands = (x, y)
    out = x.as_subclass(Summing).clone()
    nothing_kernel[(1,)](out)
    return out
