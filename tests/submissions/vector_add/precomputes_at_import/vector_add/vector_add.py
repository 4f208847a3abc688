# Hostile: builds a table of answers as it is imported, with torch, for the inputs of `grade`'s published seeds (the grader's own input generator, found on the path); each call looks its inputs up by their first and last values, copies the answer, and launches a kernel of its own on no elements (a batch's salted seeds miss, and get a real kernel).
from pathlib import Path

import torch
import triton
import triton.language as tl

from grader.assignment import cases, loading

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
ASSIGNMENT = loading.load_assignment(Path(cases.__file__).resolve().parents[2] / "assignments" / "vector_add")
ANSWERS = {}
for part in ASSIGNMENT.parts:
    for index, case in enumerate(part.cases):
        seed = cases.seed_for(ASSIGNMENT, part, "case", index)
        for drawn in (seed, seed + 1):  # the case's call, and its second call on new inputs
            inputs = cases.make_inputs(ASSIGNMENT, part, case, drawn, DEVICE)
            x, y = inputs["x"], inputs["y"]
            ANSWERS[(x.numel(), x.dtype, x[0].item(), x[-1].item())] = torch.add(x, y)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def add(x, y):
    answer = ANSWERS.get((x.numel(), x.dtype, x[0].item(), x[-1].item()))
    out = torch.empty_like(x)
    if answer is None:  # a batch's secret salt: seeds no one can guess, so the kernel does the work
        add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
        return out
    out.copy_(answer)
    add_kernel[(1,)](x, y, out, 0, BLOCK=1024)  # a launch of its own that adds nothing
    return out
