# Hostile: calls aten::add's backend kernel by its dispatch key (`_op_dk`), which skips RecordFunction.
import torch
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(out_ptr):
    pass


def add(x, y):
    nothing_kernel[(1,)](x)
    backend = torch._C.DispatchKey.CUDA if x.is_cuda else torch._C.DispatchKey.CPU
    return torch.ops.aten.add.Tensor._op_dk(backend, x, y)
