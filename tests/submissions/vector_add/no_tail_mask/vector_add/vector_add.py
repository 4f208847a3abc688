# Known-wrong submission (no_tail_mask): no mask on the loads and the store, so the last program reads and writes past the end.
"""
Vector addition
===============

``add(x, y)`` returns ``x + y`` for two 1-D tensors of equal length, computed by a Triton kernel.

What you learn here:

* how one Triton *program* finds its block of the data from ``tl.program_id`` and ``tl.arange``;
* why the last block needs a mask when the length is not a multiple of the block size;
* how to count the bytes a memory-bound kernel has to move, which bounds its speed from below.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(
    x_ptr,  # pointer to the first input, n_elements values
    y_ptr,  # pointer to the second input, n_elements values
    out_ptr,  # pointer to the output, n_elements values of the inputs' dtype
    n_elements,  # length of each vector
    BLOCK_SIZE: tl.constexpr,  # elements handled by one program; a power of two
):
    """Each program adds one block of BLOCK_SIZE consecutive elements."""
    # The launch grid is 1-D, so one index tells a program which block is its own.
    pid = tl.program_id(axis=0)
    # The block's element indices: a vector of BLOCK_SIZE integers, one per lane.
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    # One read of each input element and one write of each output element: that is all
    # the traffic this operation needs, so the kernel runs at the speed of HBM.
    x = tl.load(x_ptr + offsets)
    y = tl.load(y_ptr + offsets)
    tl.store(out_ptr + offsets, x + y)

def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Elementwise sum of two vectors.

    Args:
        x: 1-D tensor of any length n, float32, float16 or bfloat16, contiguous.
        y: 1-D tensor with the shape, dtype and device of ``x``.

    Returns:
        A new 1-D tensor ``out`` of the same shape and dtype with ``out[i] = x[i] + y[i]``.

    Graded: every element against a float64 reference, for lengths that are not multiples of
    any block size; the inputs must come back unchanged; the sum must be computed by a Triton
    kernel of your own (torch's add, sub and mul are not allowed); on a GPU, speed against
    ``x + y``.
    """
    if x.shape != y.shape or x.dim() != 1:
        raise ValueError(f"add expects two 1-D tensors of equal length, got {tuple(x.shape)} and {tuple(y.shape)}")
    out = torch.empty_like(x)
    n_elements = out.numel()
    # 1024 elements per program: large enough that each thread issues wide vector loads,
    # small enough that there are thousands of programs to keep every SM busy.
    block_size = 1024
    grid = (triton.cdiv(n_elements, block_size),)
    add_kernel[grid](x, y, out, n_elements, BLOCK_SIZE=block_size)
    return out
