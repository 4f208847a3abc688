"""Grading data for the softmax assignment that is code rather than numbers.

The grader imports this module and calls the functions that assignment.toml names for each part:
the input generator, the float64 reference, the torch baseline the student is timed against,
and the minimum memory traffic that places a timing on the roofline. Nothing here is shipped as
a solution: it only describes the problem.

Each of these functions is a top-level `def`, named in assignment.toml or, where a part names
none, called `<part>_inputs`, `<part>_reference`, `<part>_baseline` or `<part>_traffic` (a CUDA C
part's also `<part>_arguments`, `<part>_output_shape`); loading assignment.toml checks each exists.
"""

import torch


def softmax_inputs(shape, dtype, layout, generator, device):
    """Keyword arguments for ``softmax(x)``: one (M, N) matrix drawn from ``generator``.

    Each row is ``2 * randn + 0.5`` plus its own offset in [-8, 120]; the last row gets -8 and
    the first 120, so every case has both extremes. Rows with an offset above ~80 overflow
    ``exp`` in float32 unless the maximum is subtracted first; the spread of 2 keeps the outputs
    far from one-hot; in a row of negative values a masked lane that loads 0 instead of -inf
    wins the maximum. With ``layout == "strided"`` the rows are a slice of a matrix 37 columns
    wider, so ``x.stride(0) > N``.
    """
    n_rows, n_cols = shape
    if layout == "contiguous":
        width = n_cols
    elif layout == "strided":
        width = n_cols + 37
    else:
        raise ValueError(f"softmax has no layout {layout!r}")
    offsets = torch.rand((n_rows, 1), generator=generator, device=device) * 128.0 - 8.0
    offsets[-1] = -8.0
    offsets[0] = 120.0
    noise = torch.randn((n_rows, width), generator=generator, device=device)
    x = (2.0 * noise + 0.5 + offsets).to(dtype)
    return {"x": x[:, :n_cols]}


def softmax_reference(x):
    """Softmax over the last dimension; the grader passes ``x`` upcast to float64."""
    return torch.softmax(x, dim=-1)


def softmax_baseline(x):
    """What the student's kernel is timed against, in the input's dtype."""
    return torch.softmax(x, dim=-1)


def softmax_chain(x):
    """Softmax written as torch ops, in the input's dtype: the row maximum, the subtraction, exp,
    the row sum and the division. The report shows the student's time against torch.compile of
    this chain, which fuses it into generated Triton kernels (not graded)."""
    shifted = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return shifted / shifted.sum(dim=-1, keepdim=True)


def softmax_traffic(x):
    """Fewest bytes through memory: one read of x, one write of the output.

    FLOPs per element: a compare for the maximum, a subtraction, an exp, an addition to the
    sum and a division.
    """
    n = x.numel()
    return {"bytes": 2 * n * x.element_size(), "flops": 5 * n}
