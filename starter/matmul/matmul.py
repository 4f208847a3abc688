"""
Tiled matrix multiplication
===========================

``matmul(a, b)`` returns the product of an (M, K) and a (K, N) matrix, computed by a Triton
kernel in which each program owns one BLOCK_M x BLOCK_N tile of the output and walks the K
dimension in steps of BLOCK_K, multiplying tiles with ``tl.dot`` and summing in float32.

What you learn here:

* why tiling pays: a program reads (BLOCK_M + BLOCK_N) * K inputs to produce BLOCK_M * BLOCK_N
  outputs, so every value it loads takes part in BLOCK_N (or BLOCK_M) multiply-adds instead
  of one;
* masks on all three dimensions: rows of ``a`` past M, columns of ``b`` past N, and the last
  step along K, whose lanes past K must load 0 so that they add nothing to the sum;
* grouped ordering: launching the tiles in groups of GROUP_M rows so that programs running at
  the same time share their tiles of ``a`` and ``b`` in the L2 cache;
* precision: 16-bit inputs multiplied on the tensor cores and summed in float32, and float32
  inputs multiplied in full float32 (``input_precision="ieee"``), not in TF32;
* autotuning: letting Triton time a few tile shapes on the real GPU and keep the fastest;
* block pointers (``matmul_bt``): describing each operand once, by shape, strides and tile,
  and letting ``boundary_check`` do the masking; and reading a transposed operand along its
  rows, so that every load stays coalesced.
"""

import os

import torch
import triton
import triton.language as tl

# Under TRITON_INTERPRET=1 every program runs one after another on the CPU: one fixed, small
# tile keeps the grader's CPU tier quick, where autotuning would time every config there.
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
INTERPRETER_BLOCKS = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}


@triton.jit
def matmul_kernel(
    a_ptr,  # pointer to a, M x K, unit stride along a row
    b_ptr,  # pointer to b, K x N, unit stride along a row
    c_ptr,  # pointer to the output, M x N in the inputs' dtype
    M,  # rows of a and of the output
    N,  # columns of b and of the output
    K,  # columns of a, rows of b: the length of every dot product
    stride_am,  # elements from one row of a to the next (>= K)
    stride_ak,  # elements from one column of a to the next
    stride_bk,  # elements from one row of b to the next (>= N)
    stride_bn,  # elements from one column of b to the next
    stride_cm,  # elements from one row of the output to the next
    stride_cn,  # elements from one column of the output to the next
    BLOCK_M: tl.constexpr,  # rows of the output tile a program computes
    BLOCK_N: tl.constexpr,  # columns of that tile
    BLOCK_K: tl.constexpr,  # length of one step along K
    GROUP_M: tl.constexpr,  # tile rows per group of the launch order (L2 reuse)
):
    """One program per BLOCK_M x BLOCK_N output tile: the sum over K of a-tile @ b-tile."""


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Matrix product ``a @ b``.

    Args:
        a: tensor of shape (M, K), float32, float16 or bfloat16, any M >= 1 and K >= 1. The
            elements of a row are adjacent (``a.stride(1) == 1``); ``a.stride(0)`` may be
            larger than K (a slice of a wider matrix).
        b: tensor of shape (K, N) with a's dtype and device, any N >= 1, laid out like ``a``.

    Returns:
        A new tensor ``c`` of shape (M, N) and the inputs' dtype, ``c[i, j] = sum_k a[i, k] * b[k, j]``,
        summed in float32; float32 inputs are multiplied in full float32 (no TF32).

    Graded: every element against a float64 reference, for shapes that are no multiple of any
    block, K shorter than a block, M = 1, tall-skinny and large squares; the inputs must come
    back unchanged; the work must be done by a Triton kernel of your own (torch's matmul, mm,
    bmm, addmm, linear, einsum and their relatives are not allowed); on a GPU, speed against
    ``torch.matmul(a, b)``.
    """
    raise NotImplementedError("matmul: write matmul_kernel, then launch it here")
    # Hint: allocate c with torch.empty((M, N), device=a.device, dtype=a.dtype); launch one
    # program per output tile, triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N) of them, and
    # pass every stride. Start with INTERPRETER_BLOCKS everywhere; on a GPU, autotune later.


# --- Part 2: a @ b.T with block pointers -----------------------------------------------------------


@triton.jit
def matmul_bt_kernel(
    a_ptr,  # pointer to a, M x K
    b_ptr,  # pointer to b, N x K: the right operand stored transposed, as a linear layer's weight
    c_ptr,  # pointer to the output, M x N in the inputs' dtype
    M,  # rows of a and of the output
    N,  # rows of b, columns of the output
    K,  # columns of a and of b: the length of every dot product
    stride_am,  # elements from one row of a to the next (>= K)
    stride_ak,  # elements from one column of a to the next (1)
    stride_bn,  # elements from one row of b to the next (>= K)
    stride_bk,  # elements from one column of b to the next (1)
    stride_cm,  # elements from one row of the output to the next
    stride_cn,  # elements from one column of the output to the next
    BLOCK_M: tl.constexpr,  # rows of the output tile a program computes
    BLOCK_N: tl.constexpr,  # columns of that tile
    BLOCK_K: tl.constexpr,  # length of one step along K
    GROUP_M: tl.constexpr,  # tile rows per group of the launch order (L2 reuse)
):
    """One program per BLOCK_M x BLOCK_N output tile: the sum over K of a-tile @ (b.T)-tile."""


def matmul_bt(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Matrix product ``a @ b.T``, with ``b`` given as it is stored: (N, K), row-major.

    Args:
        a: tensor of shape (M, K), float32, float16 or bfloat16, any M >= 1 and K >= 1. The
            elements of a row are adjacent (``a.stride(1) == 1``); ``a.stride(0)`` may be
            larger than K (a slice of a wider matrix).
        b: tensor of shape (N, K) with a's dtype and device, any N >= 1, laid out like ``a``.

    Returns:
        A new tensor ``c`` of shape (M, N) and the inputs' dtype, ``c[i, j] = sum_k a[i, k] * b[j, k]``,
        summed in float32; float32 inputs are multiplied in full float32 (no TF32).

    Graded: every element against a float64 reference on odd shapes (M = 1, N = 1, K shorter
    than a block, strided rows); the kernels must load their tiles through block pointers (or
    tensor descriptors), which the grader reads in the compiled kernel; the inputs must come back
    unchanged; no torch matmul; on a GPU, speed against ``torch.matmul(a, b.T)``.
    """
    raise NotImplementedError("matmul_bt: write matmul_bt_kernel with tl.make_block_ptr, then launch it here")
    # Hint: give b's block pointer the shape of b.T, (K, N), and swap its strides to match: the
    # same memory, read along b's rows (the handout's "Block pointers" section). Load with
    # boundary_check and padding_option="zero", step along K with tl.advance, launch like matmul.
