# Hostile, for a child whose guard is off: the sum is right, and a thread of its own writes zeros over
# every mapping of the grader's memory file that outputs cross in, again and again, after the harness
# put them there. The thread is a bare OS thread (_thread), which threading.enumerate() never lists, so
# the child's own check for threads left running misses it: only the outputs' fingerprint can tell.
import _thread
import ctypes
import time

import triton
import triton.language as tl
import torch

MAPPED = "kept-outputs"  # the memory file's name, as /proc/self/maps shows its mappings


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def _zero_the_file():
    while True:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split()
                if MAPPED in line and fields[1].startswith("rw"):
                    start, end = (int(x, 16) for x in fields[0].split("-"))
                    ctypes.memset(start, 0, min(end - start, 64 << 20))
        time.sleep(0.001)


_started = []


def add(x, y):
    if not _started:
        _started.append(_thread.start_new_thread(_zero_the_file, ()))
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
