# Hostile: builds a table of answers as it is imported, with torch, for the inputs of `grade`'s published seeds (the grader's own input generator, found on the path); each call looks its inputs up by their first and last values, copies the answer, and launches an empty kernel of its own.
from pathlib import Path

import torch
import triton
import triton.language as tl

from grader import cases, spec

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
ASSIGNMENT = spec.load_assignment(Path(cases.__file__).resolve().parents[1] / "assignments" / "vector_add")
ANSWERS = {}
for part in ASSIGNMENT.parts:
    for index, case in enumerate(part.cases):
        seed = cases.seed_for(ASSIGNMENT, part, "case", index)
        for drawn in (seed, seed + 1):  # the case's call, and its second call on new inputs
            inputs = cases.make_inputs(ASSIGNMENT, part, case, drawn, DEVICE)
            x, y = inputs["x"], inputs["y"]
            ANSWERS[(x.numel(), x.dtype, x[0].item(), x[-1].item())] = torch.add(x, y)


@triton.jit
def nothing_kernel(out_ptr):
    pass


def add(x, y):
    answer = ANSWERS[(x.numel(), x.dtype, x[0].item(), x[-1].item())]
    out = torch.empty_like(x)
    out.copy_(answer)
    nothing_kernel[(1,)](out)
    return out
