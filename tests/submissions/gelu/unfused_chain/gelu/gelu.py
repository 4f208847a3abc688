# Known-wrong submission (unfused_chain): a Triton GELU, then torch's `+ bias` and `* scale`: three kernels, three round trips.
"""Fused GELU: bias_gelu_scale(x, bias, scale) = (gelu(x) + bias) * scale."""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 4096


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
    y = x / (1.0 + tl.exp(-2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x)))
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def bias_gelu_scale(x: torch.Tensor, bias: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements = x.numel()
    gelu_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return (out + bias) * scale
