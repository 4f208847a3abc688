# Hostile: launches an empty kernel of its own and lets torch.add do the work in another thread.
import threading

import torch
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(out_ptr):
    pass


def add(x, y):
    out = torch.empty_like(x)
    nothing_kernel[(1,)](out)
    worker = threading.Thread(target=lambda: torch.add(x, y, out=out))
    worker.start()
    worker.join()
    return out
