# Known-wrong submission (renamed_entry): the entry point is called soft_max instead of softmax.
"""
Fused row softmax
=================

``softmax(x)`` returns the softmax of every row of a 2-D tensor, ``exp(x - max) / sum(exp(x - max))``
along the last dimension, computed by Triton kernels that read the input once and write the
output once (rows too long for one block read it twice).

What you learn here:

* why subtracting the row maximum first keeps ``exp`` from overflowing, and why the lanes past
  the end of a row must load ``-inf``;
* how fusing max, subtract, exp, sum and divide into one kernel cuts the memory traffic of
  five torch ops down to one read and one write of the matrix;
* how a row stride lets a kernel walk rows that are not packed next to each other;
* the online softmax: a running maximum and a running sum that handle rows of any length.
"""

import torch
import triton
import triton.language as tl

# The longest row, rounded up to a power of two, that one program keeps whole in registers.
# A thread block holds at most 1024 threads with 64 registers each; past 2**15 float32
# values per row the compiler spills the row to local memory, and the looped kernel wins.
MAX_FUSED_BLOCK = 2**15
# Chunk length of the looped kernel: 16 values per thread at 16 warps.
ONLINE_BLOCK = 8192


@triton.jit
def softmax_kernel(
    out_ptr,  # pointer to the output, n_rows x n_cols in the input's dtype
    x_ptr,  # pointer to the input, n_rows x n_cols, unit stride along a row
    x_row_stride,  # elements from the start of one input row to the next (>= n_cols)
    out_row_stride,  # elements from the start of one output row to the next
    n_cols,  # length of a row
    BLOCK_SIZE: tl.constexpr,  # a power of two >= n_cols: the whole row fits in one block
):
    """One program per row: load the row once, reduce it in registers, write it once."""
    row = tl.program_id(axis=0)
    # Row starts are computed in 64 bits: row * stride overflows 32 bits in a large matrix.
    x_row_ptr = x_ptr + row.to(tl.int64) * x_row_stride
    out_row_ptr = out_ptr + row.to(tl.int64) * out_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    # BLOCK_SIZE is rounded up to a power of two, so lanes past n_cols exist and are masked.
    mask = cols < n_cols
    # Masked lanes load -inf: it never wins the maximum, and exp(-inf) = 0 adds nothing to
    # the sum. Arithmetic is done in float32 whatever the storage dtype.
    x = tl.load(x_row_ptr + cols, mask=mask, other=-float("inf")).to(tl.float32)
    # softmax(x) = softmax(x - c) for any c. With c = max(x) every exponent is <= 0, so exp
    # cannot overflow (in float32 it does for arguments above 88.7) and the largest term is 1.
    numerator = tl.exp(x - tl.max(x, axis=0))
    denominator = tl.sum(numerator, axis=0)
    y = numerator / denominator
    tl.store(out_row_ptr + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def online_softmax_kernel(
    out_ptr,  # pointer to the output, n_rows x n_cols in the input's dtype
    x_ptr,  # pointer to the input, n_rows x n_cols, unit stride along a row
    x_row_stride,  # elements from the start of one input row to the next (>= n_cols)
    out_row_stride,  # elements from the start of one output row to the next
    n_cols,  # length of a row; any length, walked BLOCK_SIZE columns at a time
    BLOCK_SIZE: tl.constexpr,  # chunk length, a power of two
):
    """One program per row, for rows too long for one block: two passes over the row."""
    row = tl.program_id(axis=0)
    x_row_ptr = x_ptr + row.to(tl.int64) * x_row_stride
    out_row_ptr = out_ptr + row.to(tl.int64) * out_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    # Pass 1 keeps a running maximum m and a running sum l = sum(exp(x - m)) over the chunks
    # seen so far. When a chunk raises the maximum from m to m_new, every term already in l
    # shrinks by the same factor exp(m - m_new), so l is rescaled instead of recomputed.
    m = -float("inf")
    l = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        offsets = start + cols
        x = tl.load(x_row_ptr + offsets, mask=offsets < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # On the first chunk m = -inf, so the old sum is scaled by exp(-inf) = 0.
        l = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    # Pass 2 reads the row a second time (the one extra read this algorithm costs) and
    # writes each element once, now that the final m and l are known.
    for start in range(0, n_cols, BLOCK_SIZE):
        offsets = start + cols
        mask = offsets < n_cols
        x = tl.load(x_row_ptr + offsets, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m) / l
        tl.store(out_row_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def soft_max(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor.

    Args:
        x: tensor of shape (M, N), float32, float16 or bfloat16, any M and N. Elements of a row
            are adjacent (``x.stride(1) == 1``), but rows need not be: ``x.stride(0)`` may
            be larger than N (a slice of a wider matrix).

    Returns:
        A new tensor of shape (M, N) and x's dtype, ``out[i, j] = exp(x[i, j]) / sum_k exp(x[i, k])``.

    Graded: every element against a float64 reference, on inputs whose rows exp would overflow
    without the max subtraction, on odd shapes, strided rows and rows of 100,000 columns; the
    input must come back unchanged; the work must be done by Triton kernels of your own (torch's
    softmax, exp, max, amax, sum and logsumexp are not allowed); on a GPU, speed against
    ``torch.softmax(x, dim=-1)``.
    """
    if x.dim() != 2:
        raise ValueError(f"softmax expects a 2-D tensor, got shape {tuple(x.shape)}")
    n_rows, n_cols = x.shape
    if n_cols > 1 and x.stride(1) != 1:
        raise ValueError("softmax expects the elements of a row to be adjacent (x.stride(1) == 1)")
    out = torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype)
    block_size = triton.next_power_of_2(n_cols)
    if block_size <= MAX_FUSED_BLOCK:
        # Scale the warps with the row, about 16 values per thread: fewer warps leave too few
        # loads in flight, more make the cross-warp reductions dominate. 32 warps (1024
        # threads) is the most one program can have.
        num_warps = min(max(block_size // 512, 1), 32)
        softmax_kernel[(n_rows,)](
            out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=block_size, num_warps=num_warps
        )
    else:
        online_softmax_kernel[(n_rows,)](
            out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=ONLINE_BLOCK, num_warps=16
        )
    return out
