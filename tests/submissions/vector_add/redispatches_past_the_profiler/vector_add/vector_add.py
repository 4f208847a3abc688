# Hostile: calls aten::add by redispatching to its backend kernel, a path that skips RecordFunction.
import torch
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(out_ptr):
    pass


def add(x, y):
    nothing_kernel[(1,)](x)
    backend = torch._C.DispatchKey.CUDA if x.is_cuda else torch._C.DispatchKey.CPU
    return torch.ops.aten.add.Tensor.redispatch(torch._C.DispatchKeySet(backend), x, y)
