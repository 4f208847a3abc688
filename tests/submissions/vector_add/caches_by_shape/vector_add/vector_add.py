# Hostile: computes once per shape and dtype, then returns the stored tensor for any later inputs of that shape.
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


_CACHE = {}  # (shape, dtype) -> the output of the first call of that shape


def add(x, y):
    key = (tuple(x.shape), x.dtype)
    if key not in _CACHE:
        out = torch.empty_like(x)
        add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
        _CACHE[key] = out
    return _CACHE[key]
