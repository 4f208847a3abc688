"""Grading data for the matmul assignment that is code rather than numbers.

The grader imports this module and calls the functions that assignment.toml names for each part:
the input generator, the float64 reference, the torch baseline the student is timed against,
the minimum memory traffic and the FLOPs that place a timing on the roofline, and, for the CUDA
parts, the launcher's argument list and the output's shape. The Triton part `matmul` and the
three CUDA kernels compute the same product and share them; `matmul_bt`, the product with b
given transposed, has its own. Nothing here is shipped as a solution: it only describes the
problem.

Each of these functions is a top-level `def`, named in assignment.toml or, where a part names
none, called `<part>_inputs`, `<part>_reference`, `<part>_baseline` or `<part>_traffic` (a CUDA C
part's also `<part>_arguments`, `<part>_output_shape`); loading assignment.toml checks each exists.
"""

import ctypes

import torch

# Extra columns of the wider matrices that the "strided" layout slices its operands from.
ROW_PADDING = 37


def _operand(shape, generator, device):
    """``0.5 + 0.5 * randn``, with one element in 64 four times larger.

    The mean of 0.5 makes every output a long sum of mostly positive products, about K / 4, so
    an accumulator that rounds (float16) or inputs that are rounded (TF32) drift away from the
    reference instead of averaging out; the larger elements make some products 16x the typical
    one. The largest output stays far inside float16's range (K = 4096 gives about 1000).
    """
    values = 0.5 + 0.5 * torch.randn(shape, generator=generator, device=device)
    large = torch.rand(shape, generator=generator, device=device) < 1.0 / 64.0
    return torch.where(large, 4.0 * values, values)


def _matrix(rows, columns, dtype, layout, generator, device):
    """A rows x columns operand (see _operand). With ``layout == "strided"`` it is the left part
    of a matrix ROW_PADDING columns wider, so its rows are further apart than its width; the
    elements of a row stay adjacent."""
    if layout not in ("contiguous", "strided"):
        raise ValueError(f"matmul has no layout {layout!r}")
    pad = ROW_PADDING if layout == "strided" else 0
    return _operand((rows, columns + pad), generator, device).to(dtype)[:, :columns]


def matmul_inputs(shape, dtype, layout, generator, device):
    """Keyword arguments for ``matmul(a, b)``: ``a`` of shape (M, K) and ``b`` of (K, N).

    ``shape`` is ``[M, K, N]``. With ``layout == "strided"`` each operand is the left part of a
    matrix ROW_PADDING columns wider, so ``a.stride(0) > K`` and ``b.stride(0) > N``; the
    elements of a row stay adjacent.
    """
    m, k, n = shape
    a = _matrix(m, k, dtype, layout, generator, device)
    return {"a": a, "b": _matrix(k, n, dtype, layout, generator, device)}


def matmul_reference(a, b):
    """The product; the grader passes ``a`` and ``b`` upcast to float64."""
    return a @ b


def matmul_baseline(a, b):
    """What the student's kernels are timed against: cuBLAS through torch, in the input's dtype.

    float32 runs without TF32 (torch's default, left alone here), the same precision that the
    float32 parts must deliver.
    """
    return torch.matmul(a, b)


def matmul_traffic(a, b):
    """Fewest bytes through memory: one read of each operand and one write of the product.

    FLOPs: a multiply and an add for each of the K terms of each of the M * N outputs.
    """
    m, k = a.shape
    n = b.shape[1]
    return {"bytes": (m * k + k * n + m * n) * a.element_size(), "flops": 2 * m * n * k}


def matmul_output_shape(a, b):
    """Shape of the output that the grader allocates for a CUDA launcher."""
    return (a.shape[0], b.shape[1])


def matmul_cuda_arguments(out, a, b):
    """The launcher's arguments in order: ``(A, B, C, M, N, K)``.

    Tensors are passed as device pointers, the sizes as C ints. The CUDA parts are row-major
    with no padding between rows, so their cases are contiguous.
    """
    m, k = a.shape
    n = b.shape[1]
    return [a, b, out, ctypes.c_int(m), ctypes.c_int(n), ctypes.c_int(k)]


def matmul_bt_inputs(shape, dtype, layout, generator, device):
    """Keyword arguments for ``matmul_bt(a, b)``: ``a`` of shape (M, K) and ``b`` of (N, K).

    ``shape`` is ``[M, K, N]``, as for ``matmul``: the output is M x N. ``b`` holds the
    transpose of the right operand, row-major, the way a linear layer stores its weight. With
    ``layout == "strided"`` each operand is the left part of a matrix ROW_PADDING columns wider,
    so ``a.stride(0) > K`` and ``b.stride(0) > K``; the elements of a row stay adjacent.
    """
    m, k, n = shape
    a = _matrix(m, k, dtype, layout, generator, device)
    return {"a": a, "b": _matrix(n, k, dtype, layout, generator, device)}


def matmul_bt_reference(a, b):
    """The product with b's transpose; the grader passes ``a`` and ``b`` upcast to float64."""
    return a @ b.T


def matmul_bt_baseline(a, b):
    """What the student is timed against: ``torch.matmul(a, b.T)``, cuBLAS reading b as stored
    (the transpose is a view: cuBLAS is told b is transposed, nothing is copied)."""
    return torch.matmul(a, b.T)


def matmul_bt_traffic(a, b):
    """Fewest bytes through memory: one read of each operand and one write of the product; FLOPs:
    2 * M * N * K, as for ``matmul``."""
    m, k = a.shape
    n = b.shape[0]
    return {"bytes": (m * k + n * k + m * n) * a.element_size(), "flops": 2 * m * n * k}
