"""Autotuned kernels whose configs must not see each other's side effects: a sum by atomics into
`out` (reset_to_zero), an in-place increment (restore_value), and a heuristic under an autotuner;
and a launcher whose grid ignores the config's BLOCK, so that small-block configs leave part of
the output unwritten."""

import torch
import triton
import triton.language as tl

BLOCKS = [triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((32, 1), (64, 2), (128, 4))]


@triton.autotune(configs=BLOCKS, key=["n"], reset_to_zero=["out_ptr"])
@triton.jit
def sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    # Every program adds its partial sum into one cell: each config would add the whole sum again
    # unless the autotuner zeroes `out` before each.
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))


@triton.autotune(configs=BLOCKS, key=["n"], restore_value=["x_ptr"])
@triton.jit
def increment_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)


@triton.autotune(configs=BLOCKS, key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets) * 2)
    else:
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)


def grid(n):
    return lambda meta: (triton.cdiv(n, meta["BLOCK"]), )


def total(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(1, dtype=x.dtype)
    sum_kernel[grid(x.numel())](x, out, x.numel())
    return out


def increment_(x: torch.Tensor) -> None:
    increment_kernel[grid(x.numel())](x, x.numel())


def scale(x: torch.Tensor) -> torch.Tensor:
    y = torch.full_like(x, float("nan"))
    scale_kernel[grid(x.numel())](x, y, x.numel())
    return y


def scale_fixed_grid(x: torch.Tensor) -> torch.Tensor:
    """Bug: the grid assumes BLOCK = 128, so the BLOCK=32 and BLOCK=64 configs cover a quarter
    and a half of `x`. On the GPU it shows only when the autotuner picks one of those."""
    y = torch.full_like(x, float("nan"))
    scale_kernel[(triton.cdiv(x.numel(), 128), )](x, y, x.numel())
    return y
