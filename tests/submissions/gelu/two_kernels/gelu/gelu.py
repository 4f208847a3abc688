# Known-wrong submission (two_kernels): GELU in one Triton kernel, bias and scale in a second: the intermediate goes through HBM.
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
    tl.store(out_ptr + offsets, y, mask=mask)


@triton.jit
def bias_scale_kernel(
    y_ptr,  # pointer to gelu(x), n_elements float32 values
    bias_ptr,  # pointer to the bias, n_cols values
    scale_ptr,  # pointer to the scale, one float32 value
    out_ptr,  # pointer to the output, n_elements values of x's dtype
    n_elements,  # number of elements of x
    n_cols,  # length of x's last dimension
    BLOCK_SIZE: tl.constexpr,  # elements handled by one program; a power of two
):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    y = tl.load(y_ptr + offsets, mask=mask)
    bias = tl.load(bias_ptr + offsets % n_cols, mask=mask).to(tl.float32)
    out = (y + bias) * tl.load(scale_ptr)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def bias_gelu_scale(x: torch.Tensor, bias: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    y = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    out = torch.empty_like(x)
    n_elements = x.numel()
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    gelu_kernel[grid](x, y, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    bias_scale_kernel[grid](y, bias, scale, out, n_elements, x.shape[-1], BLOCK_SIZE=BLOCK_SIZE)
    return out
