"""Kernels whose trouble only Triton's compiler sees: the interpreter runs every one of them as
Python, while on the GPU two do not compile and one multiplies float32 in TF32."""

import torch
import triton
import triton.language as tl

BLOCK = 128  # a plain int: Python reads it anywhere, but a kernel may only read constexpr globals


@triton.jit
def double_kernel(x_ptr, n):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)


@triton.jit
def count_leading_positive_kernel(x_ptr, out_ptr, n):
    # `break` is Python the interpreter runs, and a construct Triton's compiler does not support.
    count = 0
    for i in range(0, n):
        if tl.load(x_ptr + i) <= 0:
            break
        count += 1
    tl.store(out_ptr, count)


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr, IEEE: tl.constexpr):
    """C = A @ B for one (N, N) tile of float32."""
    offsets = tl.arange(0, N)
    tile = offsets[:, None] * N + offsets[None, :]
    a, b = tl.load(a_ptr + tile), tl.load(b_ptr + tile)
    if IEEE:
        c = tl.dot(a, b, input_precision="ieee")
    else:
        c = tl.dot(a, b)  # on an NVIDIA GPU: TF32 inputs, about 3 decimal digits
    tl.store(c_ptr + tile, c)


def double_(x: torch.Tensor) -> None:
    double_kernel[(triton.cdiv(x.numel(), BLOCK), )](x, x.numel())


def count_leading_positive(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(1, dtype=torch.int32)
    count_leading_positive_kernel[(1, )](x, out, x.numel())
    return out


def dot(a: torch.Tensor, b: torch.Tensor, ieee: bool) -> torch.Tensor:
    c = torch.empty_like(a)
    dot_kernel[(1, )](a, b, c, N=a.shape[0], IEEE=ieee)
    return c
