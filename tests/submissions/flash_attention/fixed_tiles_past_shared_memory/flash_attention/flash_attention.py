"""FlashAttention forward with one tile for every shape, as many a first attempt launches it:
BLOCK_M = 128 query rows per program, BLOCK_N = 64 keys per step, num_warps = 4, num_stages = 3,
no autotuning. Right everywhere, but at float32 and D = 128 the compiler's three-stage pipeline of
k and v tiles needs 64 KiB for q plus 3 x (32 + 32) KiB: 256 KiB of shared memory, more than
the 227 KiB one block may have on an H100 or H200. With one query (N = 1, a constexpr on the
GPU) the loop runs once, nothing is pipelined, and the same kernel needs 24 KiB.
"""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def attention_forward_kernel(
    Q, K, V, O,  # (B, H, N, D) tensors, any strides
    stride_qz, stride_qh, stride_qm, stride_qk,
    stride_kz, stride_kh, stride_kn, stride_kk,
    stride_vz, stride_vh, stride_vn, stride_vk,
    stride_oz, stride_oh, stride_om, stride_ok,
    H, N_CTX,  # heads, and the sequence length
    sm_scale,  # 1 / sqrt(D)
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,  # query rows per program
    BLOCK_N: tl.constexpr,  # keys per step
):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z, off_h = off_hz // H, off_hz % H
    Q_block_ptr = tl.make_block_ptr(Q + off_z * stride_qz + off_h * stride_qh, shape=(N_CTX, HEAD_DIM),
                                    strides=(stride_qm, stride_qk), offsets=(start_m * BLOCK_M, 0),
                                    block_shape=(BLOCK_M, HEAD_DIM), order=(1, 0))
    # k is read as its transpose, HEAD_DIM x BLOCK_N: the right operand of q @ k^T.
    K_block_ptr = tl.make_block_ptr(K + off_z * stride_kz + off_h * stride_kh, shape=(HEAD_DIM, N_CTX),
                                    strides=(stride_kk, stride_kn), offsets=(0, 0),
                                    block_shape=(HEAD_DIM, BLOCK_N), order=(0, 1))
    V_block_ptr = tl.make_block_ptr(V + off_z * stride_vz + off_h * stride_vh, shape=(N_CTX, HEAD_DIM),
                                    strides=(stride_vn, stride_vk), offsets=(0, 0),
                                    block_shape=(BLOCK_N, HEAD_DIM), order=(1, 0))
    O_block_ptr = tl.make_block_ptr(O + off_z * stride_oz + off_h * stride_oh, shape=(N_CTX, HEAD_DIM),
                                    strides=(stride_om, stride_ok), offsets=(start_m * BLOCK_M, 0),
                                    block_shape=(BLOCK_M, HEAD_DIM), order=(1, 0))
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)  # running maximum of each row
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # running sum of exp(score - maximum)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    q = tl.load(Q_block_ptr, boundary_check=(0,), padding_option="zero")
    hi = tl.minimum((start_m + 1) * BLOCK_M, N_CTX) if CAUSAL else N_CTX
    for start_n in range(0, hi, BLOCK_N):
        k = tl.load(K_block_ptr, boundary_check=(1,), padding_option="zero")
        qk = tl.dot(q, k) * sm_scale
        # Keys past N (zero-padded) and, for causal attention, future keys get no weight.
        keep = (start_n + offs_n)[None, :] < N_CTX
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= (start_n + offs_n)[None, :])
        qk = tl.where(keep, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp(m_i - m_new)  # rescales what was summed under the old maximum
        p = tl.exp(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V_block_ptr, boundary_check=(0,), padding_option="zero")
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
        K_block_ptr = tl.advance(K_block_ptr, (0, BLOCK_N))
        V_block_ptr = tl.advance(V_block_ptr, (BLOCK_N, 0))
    acc = acc / l_i[:, None]
    tl.store(O_block_ptr, acc.to(O.type.element_ty), boundary_check=(0,))


def flash_attention(q, k, v, causal=False):
    B, H, N, D = q.shape
    o = torch.empty_like(q)
    grid = (triton.cdiv(N, 128), B * H)
    attention_forward_kernel[grid](q, k, v, o, *q.stride(), *k.stride(), *v.stride(), *o.stride(), H, N,
                                   1.0 / math.sqrt(D), HEAD_DIM=D, CAUSAL=causal, BLOCK_M=128, BLOCK_N=64,
                                   num_warps=4, num_stages=3)
    return o
