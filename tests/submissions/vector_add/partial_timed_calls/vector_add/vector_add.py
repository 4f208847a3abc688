# Hostile: correct while checked, then 1/8 of the work on every other call once the timed calls begin.
import torch
import triton
import triton.language as tl

CALLS = [0]


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def add(x, y):
    CALLS[0] += 1
    out = torch.empty_like(x)
    n = x.numel()
    if CALLS[0] > 20 and CALLS[0] % 2 == 0:  # past every correctness call of a child (8 cases, 2 calls each)
        n //= 8
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    return out
