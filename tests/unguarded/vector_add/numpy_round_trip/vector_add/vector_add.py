# Hostile: numpy does the sum on the host; an empty Triton kernel of its own makes it look like a kernel ran.
import torch
import triton
import triton.language as tl


@triton.jit
def empty_kernel(x_ptr):
    pass


def add(x, y):
    # numpy has no bfloat16: the halves travel as float32 (a conversion, which torch allows).
    total = x.detach().float().cpu().numpy() + y.detach().float().cpu().numpy()
    empty_kernel[(1,)](x)
    return torch.from_numpy(total).to(device=x.device, dtype=x.dtype)
