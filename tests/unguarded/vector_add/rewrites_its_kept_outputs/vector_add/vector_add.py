# Hostile, for a child whose guard is off: every call is right, and a thread of its own rewrites the
# outputs the harness kept of its timed calls, in the file they cross to the grader in, once the
# harness has written them (as code would that returned garbage in timed calls and wrote the right
# answer there afterwards).
import os
import threading
import time

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def _kept_file():
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("/memfd:kept-outputs"):
                return int(name)
        except OSError:
            pass
    return None


def _rewrite():
    while (found := _kept_file()) is None:
        time.sleep(0.05)
    while True:  # until the process ends: whatever the harness wrote last at the start is rewritten
        first = os.pread(found, 4, 0)
        if first.strip(b"\0"):
            os.pwrite(found, bytes(b ^ 0xFF for b in first), 0)
        time.sleep(0.0005)


threading.Thread(target=_rewrite, daemon=True).start()


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    return out
