"""Grading data for the vector_add assignment that is code rather than numbers.

The grader imports this module and calls the functions that assignment.toml names for each part:
the input generator, the float64 reference, the torch baseline the student is timed against,
and the minimum memory traffic that places a timing on the roofline.

Each of these functions is a top-level `def`, named in assignment.toml or, where a part names
none, called `<part>_inputs`, `<part>_reference`, `<part>_baseline` or `<part>_traffic` (a CUDA C
part's also `<part>_arguments`, `<part>_output_shape`); loading assignment.toml checks each exists.
"""

import torch


def _vector(shape, dtype, generator, device):
    """Values around 3 with about one element in a hundred near +-1000."""
    values = 3.0 + torch.randn(shape, generator=generator, device=device)
    large = torch.rand(shape, generator=generator, device=device) < 0.01
    return torch.where(large, 300.0 * values, values).to(dtype)


def add_inputs(shape, dtype, layout, generator, device):
    """Keyword arguments for ``add(x, y)``: two 1-D vectors drawn from ``generator``."""
    if layout != "contiguous":
        raise ValueError(f"vector_add has only the contiguous layout, not {layout!r}")
    return {"x": _vector(shape, dtype, generator, device), "y": _vector(shape, dtype, generator, device)}


def add_reference(x, y):
    """The sum; the grader passes the inputs upcast to float64."""
    return x + y


def add_baseline(x, y):
    """What the student's kernel is timed against, in the input's dtype."""
    return x + y


def add_traffic(x, y):
    """Fewest bytes through memory: one read of each input, one write of the output."""
    n = x.numel()
    return {"bytes": 3 * n * x.element_size(), "flops": n}
