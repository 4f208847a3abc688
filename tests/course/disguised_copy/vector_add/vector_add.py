# Lab 1: my vector addition.
# (A copy of solutions/vector_add/vector_add.py disguised the way a copier would: every name
# changed but the entry point's own, the functions in the other order, every comment and
# docstring rewritten. The similarity review must flag it against the original:
# tests/test_course_batch.py.)

import torch
import triton
import triton.language as tl


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Adds two tensors with my kernel."""
    first, second = x, y
    if first.shape != second.shape or first.dim() != 1:
        raise ValueError(f"need 1-D inputs of the same size: {tuple(first.shape)} vs {tuple(second.shape)}")
    result = torch.empty_like(first)
    total = result.numel()
    # I picked 1024 after trying a few sizes
    chunk = 1024
    launch = (triton.cdiv(total, chunk),)
    sum_kernel[launch](first, second, result, total, CHUNK=chunk)
    return result


@triton.jit
def sum_kernel(
    a_pointer,  # first vector
    b_pointer,  # second vector
    c_pointer,  # where the answer goes
    total,  # how many numbers
    CHUNK: tl.constexpr,  # numbers per program
):
    """My kernel: one chunk per program."""
    # which chunk am I
    me = tl.program_id(axis=0)
    # indices of my chunk
    first_index = me * CHUNK
    idx = first_index + tl.arange(0, CHUNK)
    # whole chunks go fast, the last one is careful
    if first_index + CHUNK <= total:
        # nothing to guard here
        p = tl.load(a_pointer + idx)
        q = tl.load(b_pointer + idx)
        tl.store(c_pointer + idx, p + q)
    else:
        # guard the end of the vectors
        ok = idx < total
        p = tl.load(a_pointer + idx, mask=ok)
        q = tl.load(b_pointer + idx, mask=ok)
        tl.store(c_pointer + idx, p + q, mask=ok)
