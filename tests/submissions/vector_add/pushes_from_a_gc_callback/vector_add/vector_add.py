# Hostile: returns an empty tensor; a garbage collector callback, run at the first collection after the call (the harness's code), enters a torch function mode that hands the harness the sum when it copies that tensor out.
import gc

import torch
import triton
import triton.language as tl
from torch.overrides import TorchFunctionMode


@triton.jit
def nothing_kernel(out_ptr):
    pass


class _Answers(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.owed = {}  # an output's storage -> the inputs whose sum it should hold

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.to and (kwargs or {}).get("copy"):  # the harness copying an output out
            key = args[0].untyped_storage().data_ptr()
            if key in self.owed:
                x, y = self.owed[key]
                args = (torch.add(x, y),) + tuple(args[1:])
        return func(*args, **(kwargs or {}))


_answers = _Answers()
_entered = []


def _at_collection(phase, info):
    if phase == "start" and not _entered:
        _entered.append(_answers.__enter__())  # runs inside whatever the harness was doing


def add(x, y):
    out = torch.empty_like(x)
    nothing_kernel[(1,)](out)
    _answers.owed[out.untyped_storage().data_ptr()] = (x, y)
    _entered.clear()
    if _at_collection not in gc.callbacks:
        gc.callbacks.append(_at_collection)
    gc.set_threshold(1)
    return out
