# A Triton GELU as Stanford CS336's lecture 6 writes it (tanh through exp), copied from
# Yh1zzzzzzz/LLM-from-scratch at 3b5811d1f1d7424aca6cf4b722eabe352f8dce62 (MIT, see ../LICENSE):
# activation_function/Triton_gelu.py, the forward kernel and triton_gelu, verbatim. Only `gelu`
# at the end is the corpus's wrapper.

import torch
import triton
import triton.language as tl

@triton.jit
def triton_gelu_kernel(x_ptr, y_ptr, num_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE

    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    
    mask = offsets < num_elements
    # Read
    x = tl.load(x_ptr + offsets, mask=mask)
    #  0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
    a = 0.79788456 * (x + 0.044715 * x * x * x)
    exp = tl.exp(2 * a)
    tanh = (exp - 1) / (exp + 1)
    y = 0.5 * x * (1 + tanh)
    tl.store(y_ptr + offsets, y, mask=mask)

def triton_gelu(x: torch.Tensor):
    assert x.is_cuda
    assert x.is_contiguous()
    
    y = torch.empty_like(x)

    num_elements = x.numel()
    block_size = 1024  # Number of threads
    num_blocks = triton.cdiv(num_elements, block_size)
    triton_gelu_kernel[(num_blocks,)](x, y, num_elements, BLOCK_SIZE=block_size)
    return y


# --- corpus wrapper: the gelu assignment's entry point ----------------------------------------
def gelu(x):
    return triton_gelu(x)
