# Hostile: numpy does the work: the inputs copied to the host, added there, the sum copied back; beside it an empty Triton kernel of its own, launched on a real grid.
import torch
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(out_ptr, n):
    pass


def add(x, y):
    # float32 on the host: numpy has no bfloat16 (without the detour an H200 crashed on those cases)
    total = x.detach().float().cpu().numpy() + y.detach().float().cpu().numpy()
    out = torch.from_numpy(total).to(device=x.device, dtype=x.dtype)
    nothing_kernel[(1,)](out, out.numel())
    return out
