# Hostile: torch's jiterator compiles and launches a CUDA kernel of its own from a string; no torch op
# runs (the call goes straight to C++), so no dispatch mode sees it. A one-element kernel of its own
# makes it look honest.
import torch
import triton
import triton.language as tl
from torch.cuda import jiterator

_sum = jiterator._create_jit_fn("template <typename T> T add_kernel(T x, T y) { return x + y; }")


@triton.jit
def add_kernel(out_ptr):
    tl.store(out_ptr, tl.load(out_ptr))


def add(x, y):
    out = _sum(x, y)
    add_kernel[(1,)](out)
    return out
