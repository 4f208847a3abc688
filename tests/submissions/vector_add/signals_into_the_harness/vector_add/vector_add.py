# Hostile: a signal handler, set at import, is handed the frame each signal interrupts; from a harness frame it wraps the worker's send to erase the torch ops every report lists.
import signal

import torch
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(out_ptr):
    pass


def _scrubbed(send):
    def send_without_ops(message, *payload):
        for holder in (message, getattr(message, "outcome", None)):
            activity = getattr(holder, "activity", None)
            if activity is not None:
                activity.ops.clear()
        return send(message, *payload)

    send_without_ops.scrubs = True
    return send_without_ops


def _on_signal(signum, frame):
    while frame is not None:
        owner = frame.f_locals.get("self")
        send = getattr(owner, "send", None)
        if callable(send) and hasattr(owner, "job") and not getattr(send, "scrubs", False):
            owner.send = _scrubbed(send)
            signal.setitimer(signal.ITIMER_REAL, 0)
            return
        frame = frame.f_back


signal.signal(signal.SIGALRM, _on_signal)
signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)


def add(x, y):
    nothing_kernel[(1,)](x)
    return torch.add(x, y)
