# Hostile: a right kernel, and two files planted in the persistent compile cache as the file is imported, by writers that open their file in C++ (no `open` audit event): torch.save's zip writer, and torch.from_file with shared=True.
import os

import torch
import triton
import triton.language as tl

CACHE = os.environ["TRITON_CACHE_DIR"]
torch.save(torch.zeros(4), os.path.join(CACHE, "planted_by_torch_save.pt"))
torch.from_file(os.path.join(CACHE, "planted_by_from_file.bin"), shared=True, size=16)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
