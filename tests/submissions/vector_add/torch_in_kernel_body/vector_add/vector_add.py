# Hostile: the kernel body calls Python that does the work with torch (only the interpreter runs it).
import torch
import triton
import triton.language as tl

_KEPT = {}


def _cheat():
    torch.add(_KEPT["x"], _KEPT["y"], out=_KEPT["out"])


@triton.jit
def add_kernel(out_ptr):
    _cheat()


def add(x, y):
    out = torch.empty_like(x)
    _KEPT.update(x=x, y=y, out=out)
    add_kernel[(1,)](out)
    return out
