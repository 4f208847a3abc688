"""An autotuned row sum whose key names the rows but not the columns, and whose loop over a row takes
n_cols // BLOCK steps: right for every config when each BLOCK divides n_cols (128), wrong for some
when not (100: BLOCK=64 drops 36 columns, BLOCK=32 only 4). A key that leaves out what a config's
correctness depends on is the student's choice; the CPU tier must check the configs of each case
whatever an earlier case tuned."""

import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n_rows"])
@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for step in range(0, n_cols // BLOCK):  # the bug: the last partial block is skipped
        total += tl.load(x_ptr + row * n_cols + step * BLOCK + cols)
    tl.store(out_ptr + row, tl.sum(total, axis=0))


def row_sum(x: torch.Tensor) -> torch.Tensor:
    out = torch.full((x.shape[0],), float("nan"))
    row_sum_kernel[(x.shape[0],)](x, out, x.shape[0], x.shape[1])
    return out
