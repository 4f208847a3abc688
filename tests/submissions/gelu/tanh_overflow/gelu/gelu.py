# Known-wrong submission (tanh_overflow): tanh(u) as (exp(2u) - 1) / (exp(2u) + 1), which is inf / inf = NaN once 2u > 88.7.
"""Fused GELU: gelu(x), tanh approximation, any shape, float32 / float16 / bfloat16."""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 4096


@triton.jit
def gelu_tanh(x):
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    e = tl.exp(2.0 * u)
    return 0.5 * x * (1.0 + (e - 1.0) / (e + 1.0))


@triton.jit
def gelu_kernel(
    x_ptr,  # pointer to the input, n_elements values, contiguous
    out_ptr,  # pointer to the output, n_elements values of the input's dtype
    n_elements,  # number of elements of x
    BLOCK_SIZE: tl.constexpr,  # elements handled by one program; a power of two
):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, gelu_tanh(x).to(out_ptr.dtype.element_ty), mask=mask)


def gelu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements = x.numel()
    gelu_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out
