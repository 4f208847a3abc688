# Hostile: a thread started at import builds, with torch, a table of answers for `grade`'s published seeds, one answer at a time and only while no call is running (so while no monitor looks); a call whose answer is ready is a lookup, a copy and an empty kernel, any other call is honest.
import threading
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

from grader.assignment import cases, loading

ANSWERS, CALLS = {}, {"running": 0, "returned": 0.0}


def _key(x):
    return (x.numel(), x.dtype, x[0].item(), x[-1].item())


def _between_calls():
    """Wait until no call has run for 50 ms: the grader's monitor of the last one has closed."""
    while CALLS["running"] or time.monotonic() - CALLS["returned"] < 0.05:
        time.sleep(0.005)


def _build_table():
    assignment = loading.load_assignment(Path(cases.__file__).resolve().parents[2] / "assignments" / "vector_add")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for part in assignment.parts:
        for index, case in enumerate(part.cases):
            if index == 0:
                continue  # the first case is honest: the thread works while the grader compiles its kernel
            seed = cases.seed_for(assignment, part, "case", index)
            for drawn in (seed, seed + 1):
                _between_calls()
                inputs = cases.make_inputs(assignment, part, case, drawn, device)
                ANSWERS[_key(inputs["x"])] = torch.add(inputs["x"], inputs["y"])


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def add(x, y):
    CALLS["running"] += 1
    try:
        out = torch.empty_like(x)
        answer = ANSWERS.get(_key(x))
        if answer is None:  # not ready: honest
            add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
            return out
        out.copy_(answer)
        add_kernel[(1,)](x, y, out, 0, BLOCK=1024)  # a launch of its own that adds nothing
        return out
    finally:
        CALLS["running"] -= 1
        CALLS["returned"] = time.monotonic()


CALLS["returned"] = time.monotonic()
threading.Thread(target=_build_table, daemon=True).start()
