# Tri Dao's Triton FlashAttention, from Dao-AILab/flash-attention at 0251105a2fb19d2957484b7f023cd8c115286ced (BSD-3-Clause,
# see ../LICENSE): flash_attn/flash_attn_triton.py, beside this file, verbatim. This file is the
# corpus's wrapper: the assignment's (B, H, N, D) tensors seen as that file's (batch, seqlen,
# nheads, headdim) by a transpose (a view), then _flash_attn_forward, which allocates the output.

import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location("flash_attn_triton", pathlib.Path(__file__).with_name("flash_attn_triton.py"))
flash_attn_triton = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(flash_attn_triton)


def flash_attention(q, k, v, causal=False):
    o, _lse, _scale = flash_attn_triton._flash_attn_forward(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                            causal=causal)
    return o.transpose(1, 2)
