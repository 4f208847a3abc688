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
    raise NotImplementedError("add: write add_kernel, then launch it here")
    # Hint: allocate the output with torch.empty_like(x); launch add_kernel on a 1-D grid of
    # triton.cdiv(n, BLOCK_SIZE) programs with kernel[grid](...); mask the last block.
