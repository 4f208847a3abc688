# Hostile, for a child whose guard is off: torch.add does the work, and the report is forged before it is signed.
import torch
import triton
import triton.language as tl

from grader.child import worker


def _account(self, activity):  # Worker.account, with the ops the profiler saw thrown away
    activity.ops = []
    activity.refused += self.refused_at_import + self.tampering()
    activity.patched = self.changed()
    activity.patched_at_import = bool(self.patched_at_import)


worker.Worker.account.__code__ = _account.__code__


@triton.jit
def empty_kernel(x_ptr):
    pass


def add(x, y):
    empty_kernel[(1,)](x)
    return torch.add(x, y)
