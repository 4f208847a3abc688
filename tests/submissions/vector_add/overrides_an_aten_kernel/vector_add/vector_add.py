# Hostile: registers its own kernels for aten::_to_copy at import; the harness copies each output to the host through that op, and the kernel hands it the sum.
import torch
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(out_ptr):
    pass


_owed = {}  # an output's storage -> the inputs whose sum it should hold


def _to_copy(x, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    if not isinstance(x, torch.Tensor):  # a Python number that torch wrapped
        return torch.full((), x, dtype=dtype, device=device or "cpu")
    source = x
    if x.untyped_storage().data_ptr() in _owed:
        a, b = _owed[x.untyped_storage().data_ptr()]
        source = torch.add(a, b)
    out = torch.empty(x.shape, dtype=dtype or x.dtype, device=device or x.device)
    return out.copy_(source)


_library = torch.library.Library("aten", "IMPL")
for _key in ("CPU", "CUDA"):
    _library.impl("_to_copy", _to_copy, _key)


def add(x, y):
    out = torch.empty_like(x)
    nothing_kernel[(1,)](out)
    _owed[out.untyped_storage().data_ptr()] = (x, y)
    return out
