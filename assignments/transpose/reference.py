"""Grading data for the transpose assignment that is code rather than numbers.

The grader imports this module and calls the functions that assignment.toml names for each part:
the input generator, the float64 reference, the baseline the student is timed against (a copy of
the same bytes, so the speed ratio is a share of the copy bandwidth), the fewest bytes through
memory, and the launcher's argument list and the output's shape. The three CUDA parts share them:
they compute the same transpose three ways. Nothing here is shipped as a solution: it only
describes the problem.

Each of these functions is a top-level `def`, named in assignment.toml or, where a part names
none, called `<part>_inputs`, `<part>_reference`, `<part>_baseline` or `<part>_traffic` (a CUDA C
part's also `<part>_arguments`, `<part>_output_shape`); loading assignment.toml checks each exists.
"""

import ctypes

import torch


def transpose_inputs(shape, dtype, layout, generator, device):
    """Keyword arguments for the launchers: ``x``, a contiguous ``rows x cols`` matrix.

    ``shape`` is ``[rows, cols]``. Every element is ``1 + randn``: a nonzero mean, so an output of
    zeros is far off, and values that are all different, so an element taken from the wrong place
    is wrong.
    """
    if layout != "contiguous":
        raise ValueError(f"transpose has only the contiguous layout (rows packed, row-major), not {layout!r}")
    rows, cols = shape
    return {"x": (1.0 + torch.randn((rows, cols), generator=generator, device=device)).to(dtype)}


def transpose_reference(x):
    """The transpose, ``cols x rows``, rows packed; the grader passes ``x`` upcast to float64."""
    return x.t().contiguous()


def transpose_baseline(x):
    """What the kernels are timed against: a device-to-device copy of x's bytes (``clone``), the
    fastest way to read and write them, returned as a transposed view so that its values are the
    right answer (a view costs no time and moves nothing). Your time over this copy's is the
    share of the copy bandwidth that your kernel reaches."""
    return x.clone().t()


def transpose_traffic(x):
    """Fewest bytes through memory: one read of x and one write of the output. No FLOPs."""
    return {"bytes": 2 * x.numel() * x.element_size(), "flops": 0}


def transpose_output_shape(x):
    """Shape of the output that the grader allocates for the launchers: ``cols x rows``."""
    return (x.shape[1], x.shape[0])


def transpose_arguments(out, x):
    """The launcher's arguments in order: ``(in, out, rows, cols)``; pointers as device pointers,
    the sizes as C ints."""
    rows, cols = x.shape
    return [x, out, ctypes.c_int(rows), ctypes.c_int(cols)]
