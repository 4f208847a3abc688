# Hostile: the kernel body itself walks gc to the grader's worker and wraps its `send` to erase the torch ops of every report: on the CPU tier the interpreter runs the body as Python, compiled from the student's file inside Triton's launch.
import gc

import torch
import triton
import triton.language as tl


def scrub(send):
    def sent(message, *payload):
        for holder in (message, getattr(message, "outcome", None)):
            activity = getattr(holder, "activity", None)
            if activity is not None:
                activity.ops.clear(); activity.refused.clear(); activity.targets.clear()
        return send(message, *payload)

    sent.scrubs = True
    return sent


@triton.jit
def nothing_kernel(out_ptr):
    [w.__setattr__("send", scrub(w.send)) for w in gc.get_objects()
     if type(w).__name__ == "Worker" and not getattr(w.send, "scrubs", False)]


def add(x, y):
    nothing_kernel[(1,)](x)
    return torch.add(x, y)
