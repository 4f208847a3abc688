# A FlashAttention forward in Triton, copied from Yh1zzzzzzz/LLM-from-scratch at 3b5811d1f1d7424aca6cf4b722eabe352f8dce62
# (MIT, see ../LICENSE): Operator/Attention/FlashAttention.py, its imports, the forward kernel and
# FlashAttentionFunction.forward, verbatim (the backward kernels and backward are left out). Only
# `flash_attention` at the end is the corpus's wrapper.

import torch
import math
import triton
import triton.language as tl
from typing import Optional


@triton.jit
def _flash_attention_forward_kernel(
    Q_ptr, K_ptr, V_ptr, O_ptr,
    L_ptr, M_ptr,  # L: 归一化因子, M: 最大值
    q_batch_stride, q_head_stride, q_seq_stride, q_dim_stride,
    k_batch_stride, k_head_stride, k_seq_stride, k_dim_stride,
    v_batch_stride, v_head_stride, v_seq_stride, v_dim_stride,
    o_batch_stride, o_head_stride, o_seq_stride, o_dim_stride,
    l_batch_stride, l_head_stride, l_seq_stride,
    m_batch_stride, m_head_stride, m_seq_stride,
    N_CTX, N_HEAD, N_DIM, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_DMODEL: tl.constexpr, CAUSAL: tl.constexpr,
):
    # 获取当前块的索引
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    
    # 计算batch和head索引
    off_b = off_hz // N_HEAD
    off_h = off_hz % N_HEAD
    
    # 初始化指针偏移
    q_offset = off_b * q_batch_stride + off_h * q_head_stride
    k_offset = off_b * k_batch_stride + off_h * k_head_stride
    v_offset = off_b * v_batch_stride + off_h * v_head_stride
    o_offset = off_b * o_batch_stride + off_h * o_head_stride
    l_offset = off_b * l_batch_stride + off_h * l_head_stride
    m_offset = off_b * m_batch_stride + off_h * m_head_stride
    
    # 计算序列索引
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_DMODEL)
    
    # 初始化累加器
    acc = tl.zeros([BLOCK_M, BLOCK_DMODEL], dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    m_i = tl.full([BLOCK_M], value=-float('inf'), dtype=tl.float32)
    
    # 加载查询Q
    q_ptrs = Q_ptr + q_offset + (offs_m[:, None] * q_seq_stride + offs_d[None, :] * q_dim_stride)
    q = tl.load(q_ptrs, mask=offs_m[:, None] < N_CTX)
    
    # 缩放因子
    scale = 1.0 / math.sqrt(BLOCK_DMODEL)
    q = q * scale
    
    # 遍历所有K、V块
    for start_n in range(0, N_CTX, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        
        # 计算当前块的索引
        offs_n_curr = start_n + offs_n
        
        # 因果掩码：只处理当前或之前的token
        if CAUSAL:
            # 检查是否需要处理这个块
            if start_n > start_m * BLOCK_M + BLOCK_M - 1:
                break
        
        # 加载键K和值V
        k_ptrs = K_ptr + k_offset + (offs_n_curr[:, None] * k_seq_stride + offs_d[None, :] * k_dim_stride)
        v_ptrs = V_ptr + v_offset + (offs_n_curr[:, None] * v_seq_stride + offs_d[None, :] * v_dim_stride)
        
        k = tl.load(k_ptrs, mask=offs_n_curr[:, None] < N_CTX)
        v = tl.load(v_ptrs, mask=offs_n_curr[:, None] < N_CTX)
        
        # 计算注意力分数
        qk = tl.dot(q, tl.trans(k))
        
        # 应用因果掩码
        if CAUSAL:
            causal_mask = (offs_m[:, None] >= offs_n_curr[None, :])
            qk = tl.where(causal_mask, qk, -float('inf'))
        
        # 在线softmax更新
        m_ij = tl.max(qk, 1)
        m_new = tl.maximum(m_i, m_ij)
        alpha = tl.exp(m_i - m_new)
        beta = tl.exp(m_ij - m_new)
        
        l_ij = tl.sum(tl.exp(qk - m_ij[:, None]), 1)
        l_new = alpha * l_i + beta * l_ij
        
        # 更新累加器
        acc_scale = alpha / l_new
        acc = acc * acc_scale[:, None]
        
        # 计算当前块的贡献
        p_ij = tl.exp(qk - m_new[:, None])
        acc += tl.dot(p_ij, v) * (beta / l_new)[:, None]
        
        # 更新统计量
        l_i = l_new
        m_i = m_new
    
    # 存储输出
    o_ptrs = O_ptr + o_offset + (offs_m[:, None] * o_seq_stride + offs_d[None, :] * o_dim_stride)
    tl.store(o_ptrs, acc, mask=offs_m[:, None] < N_CTX)
    
    # 存储统计量（用于反向传播）
    l_ptrs = L_ptr + l_offset + offs_m * l_seq_stride
    m_ptrs = M_ptr + m_offset + offs_m * m_seq_stride
    tl.store(l_ptrs, l_i, mask=offs_m < N_CTX)
    tl.store(m_ptrs, m_i, mask=offs_m < N_CTX)


class FlashAttentionFunction(torch.autograd.Function):
    """Flash Attention自动求导函数"""
    
    @staticmethod
    def forward(ctx, q, k, v, causal=True):
        # 检查输入形状
        batch, num_heads, seq_len, d_model = q.shape
        assert k.shape == v.shape == q.shape
        
        # 块大小配置
        BLOCK_M = min(64, seq_len)
        BLOCK_N = min(64, seq_len)
        BLOCK_DMODEL = d_model
        
        # 确保d_model是2的幂
        assert d_model in {16, 32, 64, 128, 256}, f"d_model={d_model} not supported"
        
        # 输出张量
        o = torch.empty_like(q)
        l = torch.empty((batch, num_heads, seq_len), device=q.device, dtype=torch.float32)
        m = torch.empty((batch, num_heads, seq_len), device=q.device, dtype=torch.float32)
        
        # 计算grid维度
        grid_m = triton.cdiv(seq_len, BLOCK_M)
        grid = (grid_m, batch * num_heads)
        
        # 启动前向内核
        _flash_attention_forward_kernel[(grid_m, batch * num_heads)](
            q, k, v, o, l, m,
            q.stride(0), q.stride(1), q.stride(2), q.stride(3),
            k.stride(0), k.stride(1), k.stride(2), k.stride(3),
            v.stride(0), v.stride(1), v.stride(2), v.stride(3),
            o.stride(0), o.stride(1), o.stride(2), o.stride(3),
            l.stride(0), l.stride(1), l.stride(2),
            m.stride(0), m.stride(1), m.stride(2),
            seq_len, num_heads, d_model,
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_DMODEL=BLOCK_DMODEL,
            CAUSAL=causal,
            num_warps=4,
            num_stages=3,
        )
        
        # 保存用于反向传播的张量
        ctx.save_for_backward(q, k, v, o, l, m)
        ctx.causal = causal
        ctx.BLOCK_M = BLOCK_M
        ctx.BLOCK_N = BLOCK_N
        ctx.BLOCK_DMODEL = BLOCK_DMODEL
        
        return o


# --- corpus wrapper: the flash_attention assignment's entry point -----------------------------
def flash_attention(q, k, v, causal=False):
    return FlashAttentionFunction.apply(q, k, v, causal)
