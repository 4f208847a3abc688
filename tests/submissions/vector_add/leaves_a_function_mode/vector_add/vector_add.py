# Hostile: returns an empty tensor and leaves a torch function mode on the stack, which hands the harness the sum wherever it reads that tensor.
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

    def _answer(self, value):
        if isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() in self.owed:
            x, y = self.owed[value.untyped_storage().data_ptr()]
            return torch.add(x, y)
        return value

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.to and (kwargs or {}).get("copy"):  # the harness copying an output out
            args = (self._answer(args[0]),) + tuple(args[1:])
        return func(*args, **(kwargs or {}))


_answers = _Answers()


def add(x, y):
    out = torch.empty_like(x)
    nothing_kernel[(1,)](out)
    _answers.owed[out.untyped_storage().data_ptr()] = (x, y)
    _answers.__enter__()  # never left: the harness's own torch calls pass through it after the call
    return out
