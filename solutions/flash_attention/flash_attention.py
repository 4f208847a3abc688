"""
FlashAttention
==============

``flash_attention(q, k, v, causal)`` returns ``softmax(q k^T / sqrt(D)) v`` for every batch and
head, computed by a Triton kernel in which each program owns BLOCK_M query rows and walks the
keys BLOCK_N at a time, never writing the N x N score matrix anywhere.
``flash_attention_backward`` returns the gradients of the same attention, with the same tiling.

What you learn here:

* why fusing pays: the unfused computation writes the scores S = q k^T and the probabilities P,
  N x N per head, to memory and reads them back. At B=4, H=32, N=4096 that is 4.3 GB per matrix
  in 16 bits, while q, k, v and the output together are 0.27 GB (D=64): at 3.3 TB/s the
  round trips of S and P alone take ~5 ms, and the 550 GFLOP of the two products take ~1.4 ms
  on the tensor cores. Kept in registers a tile at a time, S and P cost no memory traffic; each
  program reads its q tile once and every k, v tile once (BLOCK_M query rows share each load,
  and the tiles of one head are found in the L2 by the programs that run beside it);
* the online softmax: a running row maximum m, a running sum l = sum(exp(s - m)) and an
  unnormalised output acc = sum(exp(s - m) v). When a new block of scores raises the maximum
  from m to m_new, everything summed so far shrinks by the same factor exp(m - m_new):

      m_new = max(m, rowmax(S_j))     P_j = exp(S_j - m_new)     alpha = exp(m - m_new)
      l     = alpha * l + rowsum(P_j) acc = alpha * acc + P_j V_j

  and the output is acc / l once every key has been seen. The exponentials are computed as
  exp2 of scores scaled by log2(e) / sqrt(D): one multiply-add and the hardware's exp2;
* causal attention without wasted work: key blocks wholly above the diagonal are skipped, those
  wholly below it run without a mask, and only the block(s) on the diagonal pay for one;
* the backward pass from the forward's log-sum-exp LSE = m + log(l): P = exp(S - LSE) is
  recomputed exactly, tile by tile, instead of being stored, and with Delta_i = rowsum(dO_i * O_i)

      dV = P^T dO     dP = dO V^T     dS = P * (dP - Delta)     dQ = dS K / sqrt(D)     dK = dS^T Q / sqrt(D)

  one kernel per key block sums dK and dV over the query blocks, and one per query block sums
  dQ over the key blocks, so that no two programs ever write the same output.
"""

import math
import os

import torch
import triton
import triton.language as tl

# Under TRITON_INTERPRET=1 every program runs one after another on the CPU: one fixed, small
# tile keeps the grader's CPU tier quick, where autotuning would time every config there.
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
INTERPRETER_FORWARD = {"BLOCK_M": 32, "BLOCK_N": 32}
INTERPRETER_DKDV = {"BLOCK_M": 32, "BLOCK_N": 32}
INTERPRETER_DQ = {"BLOCK_M": 32, "BLOCK_N": 32}
# Rows per program of the Delta kernel, which only streams o and do once.
DELTA_BLOCK = 64
HEAD_DIMS = (32, 64, 128)
# exp(x) = exp2(x * log2(e)) and log(x) = log2(x) * ln(2); constexpr so that kernels may read them.
LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _forward_keys(
    acc, l_i, m_i,  # running output, sum and maximum of the program's BLOCK_M rows
    q,  # the program's query tile, BLOCK_M x HEAD_DIM
    keys,  # this head's k and v (N x D each), and their strides along N and D
    offs_m,  # the query rows of the tile
    lo, hi,  # the keys [lo, hi) to fold in; lo is a multiple of BLOCK_N
    N_CTX,  # sequence length
    qk_scale,  # log2(e) / sqrt(D): scores in the exp2 domain
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,  # keys per step
    BOUNDED: tl.constexpr,  # keys may run past N_CTX: mask the loads and the scores
    DIAGONAL: tl.constexpr,  # the causal diagonal: also mask keys after the query (needs BOUNDED)
    PRECISION: tl.constexpr,  # tl.dot input precision: "ieee" keeps float32 inputs out of TF32
):
    """Fold the keys [lo, hi) into the online softmax of one query tile."""
    k_ptr, v_ptr, stride_kn, stride_kd, stride_vn, stride_vd = keys
    offs_n = lo + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    # k is read as its transpose, HEAD_DIM x BLOCK_N: the right operand of q @ k^T.
    kt_ptrs = k_ptr + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd
    v_ptrs = v_ptr + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + tl.arange(0, BLOCK_N)
        if BOUNDED:
            # Keys past N load 0 (never memory past the tensor) and score -inf, so that exp2
            # gives them weight 0 in l and in acc.
            kt = tl.load(kt_ptrs, mask=cols[None, :] < N_CTX, other=0.0)
            keep = cols[None, :] < N_CTX
            if DIAGONAL:
                keep = keep & (offs_m[:, None] >= cols[None, :])
            s = tl.where(keep, tl.dot(q, kt, input_precision=PRECISION) * qk_scale, float("-inf"))
            # Every row keeps at least one key in the first block it folds in (key lo <= row),
            # so m_new is finite and s - m_new never computes -inf - (-inf) = NaN.
            m_new = tl.maximum(m_i, tl.max(s, 1))
            s -= m_new[:, None]
        else:
            kt = tl.load(kt_ptrs)
            s = tl.dot(q, kt, input_precision=PRECISION)
            # max(s) * scale = max(s * scale) for scale > 0: the scale folds into one FMA below.
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            s = s * qk_scale - m_new[:, None]
        p = tl.math.exp2(s)
        # On the first block m_i = -inf and alpha = 0: the empty sum and output are scaled away.
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if BOUNDED:
            v = tl.load(v_ptrs, mask=cols[:, None] < N_CTX, other=0.0)
        else:
            v = tl.load(v_ptrs)
        # P goes to the tensor cores in the inputs' dtype (probabilities in [0, 1] lose only
        # their low bits) and is summed into the float32 accumulator.
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=PRECISION)
        m_i = m_new
        kt_ptrs += BLOCK_N * stride_kn
        v_ptrs += BLOCK_N * stride_vn
    return acc, l_i, m_i


@triton.jit
def attention_forward_kernel(
    q_ptr, k_ptr, v_ptr,  # inputs, B x H x N x D each, any strides
    o_ptr,  # output, B x H x N x D in the inputs' dtype
    lse_ptr,  # log-sum-exp of every row, B x H x N float32, contiguous
    stride_qb, stride_qh, stride_qn, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_on, stride_od,
    H,  # heads per batch
    N_CTX,  # sequence length, any N >= 1
    sm_scale,  # 1 / sqrt(D)
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,  # query i sees keys j <= i
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,  # query rows per program
    BLOCK_N: tl.constexpr,  # keys per step; divides BLOCK_M so the diagonal is whole steps
):
    """One program per (BLOCK_M query rows, batch and head): O and LSE of those rows."""
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    # Under a causal mask the last query blocks have the most keys: numbered first, they start
    # first, and the short ones fill the gaps at the end of the launch.
    start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    off_bh = tl.program_id(1)
    # Head offsets in 64 bits: b * stride_b passes 2**31 in tensors of more than 2G elements.
    off_b = (off_bh // H).to(tl.int64)
    off_h = (off_bh % H).to(tl.int64)
    k_ptr += off_b * stride_kb + off_h * stride_kh
    v_ptr += off_b * stride_vb + off_h * stride_vh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = q_ptr + off_b * stride_qb + off_h * stride_qh + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd
    # Rows past N load 0; their results are finite but never stored.
    row_ok = offs_m < N_CTX
    q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)

    qk_scale = sm_scale * LOG2E
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    keys = (k_ptr, v_ptr, stride_kn, stride_kd, stride_vn, stride_vd)
    if CAUSAL:
        # Keys before the tile's first row are seen by all its rows (and all lie below N): no
        # mask. Then the diagonal, masked; the keys after it are never visited.
        diagonal = start_m * BLOCK_M
        acc, l_i, m_i = _forward_keys(acc, l_i, m_i, q, keys, offs_m, 0, diagonal, N_CTX, qk_scale, HEAD_DIM,
                                      BLOCK_N, BOUNDED=False, DIAGONAL=False, PRECISION=PRECISION)  # fmt: skip
        acc, l_i, m_i = _forward_keys(acc, l_i, m_i, q, keys, offs_m, diagonal, min(diagonal + BLOCK_M, N_CTX),
                                      N_CTX, qk_scale, HEAD_DIM, BLOCK_N, BOUNDED=True, DIAGONAL=True,
                                      PRECISION=PRECISION)  # fmt: skip
    else:
        # Whole key blocks without a mask; only a last, partial block pays for one.
        whole = (N_CTX // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _forward_keys(acc, l_i, m_i, q, keys, offs_m, 0, whole, N_CTX, qk_scale, HEAD_DIM,
                                      BLOCK_N, BOUNDED=False, DIAGONAL=False, PRECISION=PRECISION)  # fmt: skip
        acc, l_i, m_i = _forward_keys(acc, l_i, m_i, q, keys, offs_m, whole, N_CTX, N_CTX, qk_scale, HEAD_DIM,
                                      BLOCK_N, BOUNDED=True, DIAGONAL=False, PRECISION=PRECISION)  # fmt: skip

    o = acc / l_i[:, None]
    o_ptrs = o_ptr + off_b * stride_ob + off_h * stride_oh + offs_m[:, None] * stride_on + offs_d[None, :] * stride_od
    tl.store(o_ptrs, o.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
    # m and log2(l) are in the exp2 domain; ln(2) brings their sum back to natural log.
    lse = (m_i + tl.math.log2(l_i)) * LN2
    tl.store(lse_ptr + off_bh.to(tl.int64) * N_CTX + offs_m, lse, mask=row_ok)


@triton.jit
def attention_delta_kernel(
    o_ptr, do_ptr,  # output and its gradient, B x H x N x D, any strides
    delta_ptr,  # rowsum(o * do), B x H x N float32, contiguous
    stride_ob, stride_oh, stride_on, stride_od,
    stride_dob, stride_doh, stride_don, stride_dod,
    H, N_CTX,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,  # rows per program
):
    """Delta_i = sum_d o[i, d] do[i, d], which equals sum_j P[i, j] dP[i, j]: the term dS subtracts."""
    off_bh = tl.program_id(1)
    off_b = (off_bh // H).to(tl.int64)
    off_h = (off_bh % H).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX
    o_ptrs = o_ptr + off_b * stride_ob + off_h * stride_oh + offs_m[:, None] * stride_on + offs_d[None, :] * stride_od
    do_ptrs = do_ptr + off_b * stride_dob + off_h * stride_doh
    do_ptrs += offs_m[:, None] * stride_don + offs_d[None, :] * stride_dod
    o = tl.load(o_ptrs, mask=row_ok[:, None], other=0.0).to(tl.float32)
    do = tl.load(do_ptrs, mask=row_ok[:, None], other=0.0).to(tl.float32)
    tl.store(delta_ptr + off_bh.to(tl.int64) * N_CTX + offs_m, tl.sum(o * do, 1), mask=row_ok)


@triton.jit
def _dkdv_queries(
    dk, dv,  # float32 sums of the program's BLOCK_N key rows
    k, v,  # the program's key and value tiles, BLOCK_N x HEAD_DIM
    queries,  # this head's q, do (N x D), LSE and Delta (N), and the strides of q and do along N and D
    offs_n,  # the key rows of the tile
    lo, hi,  # the queries [lo, hi) to sum over; lo is a multiple of BLOCK_M
    N_CTX, qk_scale,  # qk_scale = log2(e) / sqrt(D)
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,  # queries per step
    BOUNDED: tl.constexpr,  # queries may run past N_CTX: mask the loads
    DIAGONAL: tl.constexpr,  # mask queries before the key (causal diagonal)
    PRECISION: tl.constexpr,
):
    """Add the queries [lo, hi) to dK and dV of one key tile. The scores are kept transposed
    (keys x queries), so that dK and dV come out as rows of the tile."""
    q_ptr, do_ptr, lse_ptr, delta_ptr, stride_qn, stride_qd, stride_don, stride_dod = queries
    offs_m = lo + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    qt_ptrs = q_ptr + offs_m[None, :] * stride_qn + offs_d[:, None] * stride_qd
    do_ptrs = do_ptr + offs_m[:, None] * stride_don + offs_d[None, :] * stride_dod
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        rows = start_m + tl.arange(0, BLOCK_M)
        if BOUNDED:
            # A query past N loads q = do = 0 and LSE = +inf: P = exp(s - inf) = 0 and dS = 0,
            # so it adds nothing to dK or dV.
            ok = rows < N_CTX
            qt = tl.load(qt_ptrs, mask=ok[None, :], other=0.0)
            do = tl.load(do_ptrs, mask=ok[:, None], other=0.0)
            lse = tl.load(lse_ptr + rows, mask=ok, other=float("inf"))
            delta = tl.load(delta_ptr + rows, mask=ok, other=0.0)
        else:
            qt = tl.load(qt_ptrs)
            do = tl.load(do_ptrs)
            lse = tl.load(lse_ptr + rows)
            delta = tl.load(delta_ptr + rows)
        # P recomputed from the forward's statistics: exp(S / sqrt(D) - LSE), in exp2 form.
        pt = tl.math.exp2(tl.dot(k, qt, input_precision=PRECISION) * qk_scale - lse[None, :] * LOG2E)
        if DIAGONAL:
            # A where, not a multiply: the masked entries may have overflowed to inf.
            pt = tl.where(rows[None, :] >= offs_n[:, None], pt, 0.0)
        dv = tl.dot(pt.to(do.dtype), do, dv, input_precision=PRECISION)
        dpt = tl.dot(v, tl.trans(do), input_precision=PRECISION)
        dst = pt * (dpt - delta[None, :])
        dk = tl.dot(dst.to(qt.dtype), tl.trans(qt), dk, input_precision=PRECISION)
        qt_ptrs += BLOCK_M * stride_qn
        do_ptrs += BLOCK_M * stride_don
    return dk, dv


@triton.jit
def attention_dkdv_kernel(
    q_ptr, k_ptr, v_ptr, do_ptr,  # B x H x N x D each, any strides
    lse_ptr, delta_ptr,  # B x H x N float32, contiguous
    dk_ptr, dv_ptr,  # outputs, B x H x N x D in the inputs' dtype
    stride_qb, stride_qh, stride_qn, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dob, stride_doh, stride_don, stride_dod,
    stride_gb, stride_gh, stride_gn, stride_gd,  # strides of dk and dv (slices of one allocation)
    H, N_CTX, sm_scale,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,  # queries per step; divides BLOCK_N so the diagonal is whole steps
    BLOCK_N: tl.constexpr,  # key rows per program
):
    """One program per (BLOCK_N keys, batch and head): dK and dV of those keys."""
    tl.static_assert(BLOCK_N % BLOCK_M == 0)
    start_n = tl.program_id(0) * BLOCK_N
    off_bh = tl.program_id(1)
    off_b = (off_bh // H).to(tl.int64)
    off_h = (off_bh % H).to(tl.int64)
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    k_ptrs = k_ptr + off_b * stride_kb + off_h * stride_kh + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd
    v_ptrs = v_ptr + off_b * stride_vb + off_h * stride_vh + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd
    # Keys past N load 0 and get gradients that are never stored.
    key_ok = offs_n[:, None] < N_CTX
    k = tl.load(k_ptrs, mask=key_ok, other=0.0)
    v = tl.load(v_ptrs, mask=key_ok, other=0.0)
    queries = (q_ptr + off_b * stride_qb + off_h * stride_qh, do_ptr + off_b * stride_dob + off_h * stride_doh,
               lse_ptr + off_bh.to(tl.int64) * N_CTX, delta_ptr + off_bh.to(tl.int64) * N_CTX,
               stride_qn, stride_qd, stride_don, stride_dod)  # fmt: skip

    qk_scale = sm_scale * LOG2E
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    lo = 0
    if CAUSAL:
        # Queries before the tile's first key see none of it: skipped. The diagonal, masked.
        lo = start_n + BLOCK_N
        dk, dv = _dkdv_queries(dk, dv, k, v, queries, offs_n, start_n, min(lo, N_CTX), N_CTX, qk_scale, HEAD_DIM,
                               BLOCK_M, BOUNDED=True, DIAGONAL=True, PRECISION=PRECISION)  # fmt: skip
    # The queries after it see every key of the tile: whole blocks unmasked, then a last,
    # partial block whose loads stop at N.
    whole = (N_CTX // BLOCK_M) * BLOCK_M
    dk, dv = _dkdv_queries(dk, dv, k, v, queries, offs_n, lo, whole, N_CTX, qk_scale, HEAD_DIM,
                           BLOCK_M, BOUNDED=False, DIAGONAL=False, PRECISION=PRECISION)  # fmt: skip
    dk, dv = _dkdv_queries(dk, dv, k, v, queries, offs_n, max(lo, whole), N_CTX, N_CTX, qk_scale, HEAD_DIM,
                           BLOCK_M, BOUNDED=True, DIAGONAL=False, PRECISION=PRECISION)  # fmt: skip

    # S = q k^T / sqrt(D): the 1/sqrt(D) left out of dS lands on dK once, here.
    dk *= sm_scale
    g = off_b * stride_gb + off_h * stride_gh + offs_n[:, None] * stride_gn + offs_d[None, :] * stride_gd
    tl.store(dk_ptr + g, dk.to(dk_ptr.dtype.element_ty), mask=key_ok)
    tl.store(dv_ptr + g, dv.to(dv_ptr.dtype.element_ty), mask=key_ok)


@triton.jit
def _dq_keys(
    dq,  # float32 sum of the program's BLOCK_M query rows
    q, do,  # the program's query and output-gradient tiles, BLOCK_M x HEAD_DIM
    lse, delta,  # their LSE (in the exp2 domain) and Delta, BLOCK_M each
    keys,  # this head's k and v (N x D each), and their strides along N and D
    offs_m,  # the query rows of the tile
    lo, hi,  # the keys [lo, hi); lo is a multiple of BLOCK_N
    N_CTX, qk_scale,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,  # keys per step
    BOUNDED: tl.constexpr,  # keys may run past N_CTX: mask the loads and P
    DIAGONAL: tl.constexpr,  # also mask keys after the query (needs BOUNDED)
    PRECISION: tl.constexpr,
):
    """Add the keys [lo, hi) to dQ of one query tile."""
    k_ptr, v_ptr, stride_kn, stride_kd, stride_vn, stride_vd = keys
    offs_n = lo + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kt_ptrs = k_ptr + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd
    vt_ptrs = v_ptr + offs_n[None, :] * stride_vn + offs_d[:, None] * stride_vd
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + tl.arange(0, BLOCK_N)
        if BOUNDED:
            kt = tl.load(kt_ptrs, mask=cols[None, :] < N_CTX, other=0.0)
            vt = tl.load(vt_ptrs, mask=cols[None, :] < N_CTX, other=0.0)
        else:
            kt = tl.load(kt_ptrs)
            vt = tl.load(vt_ptrs)
        p = tl.math.exp2(tl.dot(q, kt, input_precision=PRECISION) * qk_scale - lse[:, None])
        if BOUNDED:
            keep = cols[None, :] < N_CTX
            if DIAGONAL:
                keep = keep & (offs_m[:, None] >= cols[None, :])
            p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, vt, input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(kt.dtype), tl.trans(kt), dq, input_precision=PRECISION)
        kt_ptrs += BLOCK_N * stride_kn
        vt_ptrs += BLOCK_N * stride_vn
    return dq


@triton.jit
def attention_dq_kernel(
    q_ptr, k_ptr, v_ptr, do_ptr,  # B x H x N x D each, any strides
    lse_ptr, delta_ptr,  # B x H x N float32, contiguous
    dq_ptr,  # output, B x H x N x D in the inputs' dtype
    stride_qb, stride_qh, stride_qn, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dob, stride_doh, stride_don, stride_dod,
    stride_gb, stride_gh, stride_gn, stride_gd,  # strides of dq
    H, N_CTX, sm_scale,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,  # query rows per program
    BLOCK_N: tl.constexpr,  # keys per step; divides BLOCK_M so the diagonal is whole steps
):
    """One program per (BLOCK_M queries, batch and head): dQ of those queries."""
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    # As in the forward: the longest causal rows first.
    start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = (off_bh // H).to(tl.int64)
    off_h = (off_bh % H).to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = q_ptr + off_b * stride_qb + off_h * stride_qh + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd
    do_ptrs = do_ptr + off_b * stride_dob + off_h * stride_doh
    do_ptrs += offs_m[:, None] * stride_don + offs_d[None, :] * stride_dod
    row_ok = offs_m < N_CTX
    q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)
    do = tl.load(do_ptrs, mask=row_ok[:, None], other=0.0)
    # LSE in the exp2 domain, once per row instead of once per score.
    lse = tl.load(lse_ptr + off_bh.to(tl.int64) * N_CTX + offs_m, mask=row_ok, other=0.0) * LOG2E
    delta = tl.load(delta_ptr + off_bh.to(tl.int64) * N_CTX + offs_m, mask=row_ok, other=0.0)
    keys = (k_ptr + off_b * stride_kb + off_h * stride_kh, v_ptr + off_b * stride_vb + off_h * stride_vh,
            stride_kn, stride_kd, stride_vn, stride_vd)  # fmt: skip

    qk_scale = sm_scale * LOG2E
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        diagonal = start_m * BLOCK_M
        dq = _dq_keys(dq, q, do, lse, delta, keys, offs_m, 0, diagonal, N_CTX, qk_scale, HEAD_DIM,
                      BLOCK_N, BOUNDED=False, DIAGONAL=False, PRECISION=PRECISION)  # fmt: skip
        dq = _dq_keys(dq, q, do, lse, delta, keys, offs_m, diagonal, min(diagonal + BLOCK_M, N_CTX), N_CTX,
                      qk_scale, HEAD_DIM, BLOCK_N, BOUNDED=True, DIAGONAL=True, PRECISION=PRECISION)  # fmt: skip
    else:
        whole = (N_CTX // BLOCK_N) * BLOCK_N
        dq = _dq_keys(dq, q, do, lse, delta, keys, offs_m, 0, whole, N_CTX, qk_scale, HEAD_DIM,
                      BLOCK_N, BOUNDED=False, DIAGONAL=False, PRECISION=PRECISION)  # fmt: skip
        dq = _dq_keys(dq, q, do, lse, delta, keys, offs_m, whole, N_CTX, N_CTX, qk_scale, HEAD_DIM,
                      BLOCK_N, BOUNDED=True, DIAGONAL=False, PRECISION=PRECISION)  # fmt: skip

    dq *= sm_scale
    g = off_b * stride_gb + off_h * stride_gh + offs_m[:, None] * stride_gn + offs_d[None, :] * stride_gd
    tl.store(dq_ptr + g, dq.to(dq_ptr.dtype.element_ty), mask=row_ok[:, None])


def _config(block_m: int, block_n: int, warps: int, stages: int) -> triton.Config:
    return triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n}, num_warps=warps, num_stages=stages)


# Tile shapes for an H100 or H200, timed on the first call of each (N, D, causal, dtype) and the
# fastest kept. One warpgroup (4 warps) issues the tensor-core products for 64 rows at a time;
# 8 warps split a 128-row tile between two warpgroups, and halve each thread's share of it.
FORWARD_CONFIGS = [
    _config(128, 64, 4, 3),
    _config(128, 64, 4, 4),
    _config(128, 64, 8, 3),
    _config(128, 128, 8, 2),
    _config(128, 128, 8, 3),
    _config(64, 64, 4, 4),
]
DKDV_CONFIGS = [  # BLOCK_M: queries per step, BLOCK_N: keys per program
    _config(32, 128, 8, 3),
    _config(32, 128, 8, 5),
    _config(64, 128, 8, 3),
    _config(32, 64, 4, 4),
    _config(64, 64, 4, 3),
]
DQ_CONFIGS = [  # BLOCK_M: queries per program, BLOCK_N: keys per step
    _config(128, 32, 4, 3),
    _config(128, 64, 8, 3),
    _config(128, 32, 8, 4),
    _config(64, 32, 4, 4),
    _config(64, 64, 4, 3),
]
# A thread has 255 registers. Past ~160 float32 values of live tiles a thread (accumulators and
# score tiles), the compiler spills to local memory, and a spilling config only wastes tuning time.
MAX_LIVE_FLOATS = 160
# What every config list falls back to when nothing fits (float32 inputs at D=128, say).
SMALL_CONFIG = _config(32, 32, 4, 2)


def _pruner(resident, streamed, live):
    """An early_config_prune for the autotuner, from a kernel's footprint as functions of
    (BLOCK_M, BLOCK_N): rows of D elements held in shared memory for the whole program
    (``resident``) and once per pipeline stage (``streamed``), and float32 elements live in
    registers, over D (``live``)."""

    def prune(configs: list, named_args: dict, **kwargs) -> list:
        head_dim, element_size = kwargs["HEAD_DIM"], named_args["q_ptr"].element_size()
        device = torch.cuda.current_device()
        limit = triton.runtime.driver.active.utils.get_device_properties(device)["max_shared_mem"]

        def fits(config) -> bool:
            m, n = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
            shared = (resident(m, n) + config.num_stages * streamed(m, n)) * head_dim * element_size
            per_thread = live(m, n, head_dim) / (32 * config.num_warps)
            return shared <= limit and per_thread <= MAX_LIVE_FLOATS

        return [config for config in configs if fits(config)] or [SMALL_CONFIG]

    return prune


# Forward: q stays, a k and a v tile per stage; acc (m x D) and the scores (m x n) live.
# At D=128 in 16 bits, 128 x 128 tiles: 3 stages of k and v (192 KB) and q (32 KB) just fit
# in the 227 KB a program may use.
forward_pruner = _pruner(lambda m, n: m, lambda m, n: 2 * n, lambda m, n, d: m * d + m * n)
# dK, dV: k and v stay, a q and a do tile per stage; dk, dv (n x D each), S^T and dP^T (n x m) live.
dkdv_pruner = _pruner(lambda m, n: 2 * n, lambda m, n: 2 * m, lambda m, n, d: 2 * n * d + 2 * n * m)
# dQ: q and do stay, a k and a v tile per stage; dq (m x D), S and dP (m x n) live.
dq_pruner = _pruner(lambda m, n: 2 * m, lambda m, n: 2 * n, lambda m, n, d: m * d + 2 * m * n)
TUNING_KEY = ["N_CTX", "HEAD_DIM", "CAUSAL"]  # the autotuner adds the tensors' dtypes itself


def _autotuned(kernel, configs: list, pruner):
    return triton.autotune(configs=configs, key=TUNING_KEY, prune_configs_by={"early_config_prune": pruner})(kernel)


forward_autotuned = _autotuned(attention_forward_kernel, FORWARD_CONFIGS, forward_pruner)
dkdv_autotuned = _autotuned(attention_dkdv_kernel, DKDV_CONFIGS, dkdv_pruner)
dq_autotuned = _autotuned(attention_dq_kernel, DQ_CONFIGS, dq_pruner)


def _launch(kernel, autotuned, interpreter_blocks: dict, grid, *args, **constexprs) -> None:
    """Launch one kernel: the fixed interpreter tile, or the autotuned one on a GPU. ``grid``
    maps a config's meta-parameters to the launch grid."""
    if INTERPRETED:
        kernel[grid(interpreter_blocks)](*args, **constexprs, **interpreter_blocks)
    else:
        autotuned[grid](*args, **constexprs)


def _check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape:
        raise ValueError(f"attention expects q, k, v of one shape (B, H, N, D), got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")  # fmt: skip
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise ValueError(f"attention expects q, k, v of one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[-1] not in HEAD_DIMS:
        raise ValueError(f"attention supports head dimensions {HEAD_DIMS}, got {q.shape[-1]}")


def _precision(dtype: torch.dtype) -> str:
    # On a GPU a float32 tl.dot defaults to TF32 (10 mantissa bits); ask for full float32.
    # "tf32" is that default, which 16-bit inputs ignore.
    return "ieee" if dtype == torch.float32 else "tf32"


def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False):
    """Attention forward pass that also returns the softmax statistics the backward needs.

    Args:
        q, k, v: tensors of shape (B, H, N, D), one dtype (float16 or bfloat16; float32 too),
            D in (32, 64, 128), any N >= 1 and any strides.
        causal: if True, query i attends only keys j <= i.

    Returns:
        ``(o, lse)``: ``o`` of shape (B, H, N, D) in q's dtype,
        ``o = softmax(q k^T / sqrt(D)) v``; ``lse`` of shape (B, H, N) in float32,
        ``lse[b, h, i] = log(sum_j exp(q_i . k_j / sqrt(D)))`` in natural-log units.
    """
    _check_inputs(q, k, v)
    B, H, N, D = q.shape
    o = torch.empty((B, H, N, D), device=q.device, dtype=q.dtype)
    lse = torch.empty((B, H, N), device=q.device, dtype=torch.float32)
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_M"]), B * H)
    _launch(attention_forward_kernel, forward_autotuned, INTERPRETER_FORWARD, grid,
            q, k, v, o, lse, *q.stride(), *k.stride(), *v.stride(), *o.stride(), H, N, 1.0 / math.sqrt(D),
            HEAD_DIM=D, CAUSAL=bool(causal), PRECISION=_precision(q.dtype))  # fmt: skip
    return o, lse


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """Scaled dot-product attention, ``softmax(q k^T / sqrt(D)) v``, over every batch and head.

    Args:
        q, k, v: tensors of shape (B, H, N, D), one dtype (float16 or bfloat16; float32 too),
            D in (32, 64, 128), any N >= 1 and any strides.
        causal: if True, query i attends only keys j <= i.

    Returns:
        A new tensor of shape (B, H, N, D) in q's dtype, summed in float32.
    """
    return attention_forward(q, k, v, causal)[0]


def flash_attention_backward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor, causal: bool = False
) -> torch.Tensor:
    """Gradients of ``flash_attention(q, k, v, causal)`` with respect to q, k and v.

    Args:
        q, k, v: as for ``flash_attention``.
        do: the gradient of the loss with respect to the attention output, shape (B, H, N, D),
            q's dtype, any strides.
        causal: as for ``flash_attention``.

    Returns:
        A new tensor of shape (3, B, H, N, D) in q's dtype holding dq, dk and dv, in that order,
        each summed in float32. The forward pass is run again to get o and the log-sum-exp.
    """
    _check_inputs(q, k, v)
    if do.shape != q.shape or do.dtype != q.dtype:
        raise ValueError(f"do must match q: got {tuple(do.shape)} {do.dtype}, q is {tuple(q.shape)} {q.dtype}")
    B, H, N, D = q.shape
    o, lse = attention_forward(q, k, v, causal)
    delta = torch.empty((B, H, N), device=q.device, dtype=torch.float32)
    grads = torch.empty((3, B, H, N, D), device=q.device, dtype=q.dtype)
    dq, dk, dv = grads[0], grads[1], grads[2]
    attention_delta_kernel[(triton.cdiv(N, DELTA_BLOCK), B * H)](
        o, do, delta, *o.stride(), *do.stride(), H, N, HEAD_DIM=D, BLOCK_M=DELTA_BLOCK
    )
    inputs = (q, k, v, do, lse, delta)
    # dk and dv are slices of one allocation: dq's strides are theirs too.
    strides = (*q.stride(), *k.stride(), *v.stride(), *do.stride(), *dq.stride())
    sm_scale = 1.0 / math.sqrt(D)
    constexprs = {"HEAD_DIM": D, "CAUSAL": bool(causal), "PRECISION": _precision(q.dtype)}
    # One program per key block for dK and dV, one per query block for dQ.
    per_key_block = lambda meta: (triton.cdiv(N, meta["BLOCK_N"]), B * H)
    per_query_block = lambda meta: (triton.cdiv(N, meta["BLOCK_M"]), B * H)
    _launch(attention_dkdv_kernel, dkdv_autotuned, INTERPRETER_DKDV, per_key_block,
            *inputs, dk, dv, *strides, H, N, sm_scale, **constexprs)  # fmt: skip
    _launch(attention_dq_kernel, dq_autotuned, INTERPRETER_DQ, per_query_block,
            *inputs, dq, *strides, H, N, sm_scale, **constexprs)  # fmt: skip
    return grads
