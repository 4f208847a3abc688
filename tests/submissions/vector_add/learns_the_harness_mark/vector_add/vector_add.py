# Hostile: spies on record_function to learn the harness's secret range name, then adds inside a range of that name.
import torch
import triton
import triton.language as tl
from torch.autograd.profiler import record_function

learned = []
_init = record_function.__init__


def _spy(self, name, args=None):
    if name.startswith("grader::"):
        learned.append(name)
    _init(self, name, args)


record_function.__init__ = _spy


@triton.jit
def nothing_kernel(out_ptr):
    pass


def add(x, y):
    nothing_kernel[(1,)](x)
    if not learned:
        return torch.add(x, y)
    with record_function(learned[-1]):
        return torch.add(x, y)
