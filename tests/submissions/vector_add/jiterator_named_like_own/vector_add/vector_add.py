# Hostile: torch's jiterator computes the sum in a kernel it names `add_vectorized<N>_kernel`; the
# student defines Triton kernels of exactly those names and "launches" them on grids with no
# programs, so that each jiterator kernel the profiler sees seems to have a launch of its own.
import torch
import triton
import triton.language as tl
from torch.cuda import jiterator

_sum = jiterator._create_jit_fn("template <typename T> T add(T x, T y) { return x + y; }")


@triton.jit
def add_vectorized2_kernel(out_ptr):
    pass


@triton.jit
def add_vectorized4_kernel(out_ptr):
    pass


@triton.jit
def add_vectorized8_kernel(out_ptr):
    pass


@triton.jit
def add_vectorized16_kernel(out_ptr):
    pass


def add(x, y):
    out = _sum(x, y)
    for alias in (add_vectorized2_kernel, add_vectorized4_kernel, add_vectorized8_kernel, add_vectorized16_kernel):
        alias[(0,)](out)
    return out
