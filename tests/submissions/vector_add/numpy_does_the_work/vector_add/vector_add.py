# Hostile: numpy does the work: the inputs copied to the host, added there, the sum copied back; beside it an empty Triton kernel of its own, launched on a real grid.
import torch
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(out_ptr, n):
    pass


def add(x, y):
    total = x.detach().cpu().numpy() + y.detach().cpu().numpy()
    out = torch.from_numpy(total).to(x.device)
    nothing_kernel[(1,)](out, out.numel())
    return out
