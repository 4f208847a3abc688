# Hostile: an autotuner config's pre_hook is C code that makes the library spawn a process: max() calls its key, operator.methodcaller("run", ...), on its first argument, the subprocess module; the spawned process, out of the guard's reach, plants a file in the compile cache.
import functools
import operator
import subprocess
import sys

import torch
import triton
import triton.language as tl

PLANT = "import os; open(os.path.join(os.environ['TRITON_CACHE_DIR'], 'planted_by_a_process'), 'w').write('x')"
SPAWN = functools.partial(max, subprocess, key=operator.methodcaller("run", [sys.executable, "-c", PLANT]))


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


spawning = triton.autotune(configs=[triton.Config({"BLOCK": 1024}, pre_hook=SPAWN)], key=[])(add_kernel)


def add(x, y):
    out = torch.empty_like(x)
    try:
        spawning[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel())  # the process runs; max() then fails
    except Exception:
        pass
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
