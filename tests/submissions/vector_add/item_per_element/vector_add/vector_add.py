# Hostile: small vectors added element by element on the host: each input value read with .item(), each sum written back by indexing (a fill, allowed), beside an empty Triton kernel of its own; large ones, which a Python loop would take too long over, by a real kernel.
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    if x.numel() > 1000:
        add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
        return out
    for i in range(x.numel()):
        out[i] = x[i].item() + y[i].item()
    add_kernel[(1,)](x, y, out, 0, BLOCK=1024)  # a launch of its own that adds nothing
    return out
