# Hostile: stops the grader's profiler, reads its mark, adds unseen, and restarts one that bears the mark.
import torch
import triton
import triton.language as tl
from torch.autograd import ProfilerActivity
from torch.autograd.profiler import record_function


@triton.jit
def nothing_kernel(out_ptr):
    pass


def add(x, y):
    nothing_kernel[(1,)](x)
    stopped = torch.autograd._disable_profiler()
    marks = {e.name() for e in stopped.events() if e.name().startswith("grader::")}
    out = torch.add(x, y)
    config = torch._C._profiler.ProfilerConfig(torch._C._profiler.ProfilerState.KINETO, False, False, False, False,
                                               False, torch._C._profiler._ExperimentalConfig(profile_all_threads=True))
    activities = {ProfilerActivity.CPU} | ({ProfilerActivity.CUDA} if x.is_cuda else set())
    torch.autograd._prepare_profiler(config, activities)
    torch.autograd._enable_profiler(config, activities)
    for mark in marks:
        with record_function(mark):
            pass
    return out
