# Known-wrong submission (no_tail_mask): no mask on the load and the store, so the last program reads and writes past the end.
"""Fused GELU: gelu(x), tanh approximation, any shape, float32 / float16 / bfloat16."""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 4096


@triton.jit
def gelu_tanh(x):
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    return x / (1.0 + tl.exp(-2.0 * u))


@triton.jit
def gelu_kernel(
    x_ptr,  # pointer to the input, n_elements values, contiguous
    out_ptr,  # pointer to the output, n_elements values of the input's dtype
    n_elements,  # number of elements of x
    BLOCK_SIZE: tl.constexpr,  # elements handled by one program; a power of two
):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets).to(tl.float32)
    tl.store(out_ptr + offsets, gelu_tanh(x).to(out_ptr.dtype.element_ty))


def gelu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements = x.numel()
    gelu_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out
