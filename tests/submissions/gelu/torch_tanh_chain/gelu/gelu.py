# Known-wrong submission (torch_tanh_chain): GELU written as torch ops, nine kernels and no Triton.
"""Fused GELU: gelu(x), tanh approximation, any shape, float32 / float16 / bfloat16."""

import torch


def gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
