"""An autotuned matmul with three configs, twice: `matmul` loops over tl.cdiv(K, BLOCK_K) tiles of K;
`matmul_floor_k` loops over K // BLOCK_K, a bug only for configs whose BLOCK_K does not divide K
(with K = 96, the BLOCK_K=64 config drops the last 32 columns of A). On the GPU the bug shows only
if the autotuner happens to pick that config; on the CPU tier every config runs and must agree."""

import torch
import triton
import triton.language as tl

CONFIGS = [
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=2),
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 64}, num_warps=8, num_stages=3),
]


@triton.jit
def _tile_product(a_ptr, b_ptr, c_ptr, M, N, K, k_tiles, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    """C[tile] = A[rows, :] @ B[:, cols] over `k_tiles` tiles of K (row-major, contiguous)."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, k_tiles):
        # Mask the last tile of K, which may be partial.
        k_in = ks < K - k * BLOCK_K
        a = tl.load(a_ptr + rows[:, None] * K + (k * BLOCK_K + ks)[None, :], mask=(rows[:, None] < M) & k_in[None, :],
                    other=0.0)
        b = tl.load(b_ptr + (k * BLOCK_K + ks)[:, None] * N + cols[None, :], mask=k_in[:, None] & (cols[None, :] < N),
                    other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    _tile_product(a_ptr, b_ptr, c_ptr, M, N, K, tl.cdiv(K, BLOCK_K), BLOCK_M, BLOCK_N, BLOCK_K)


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def matmul_floor_k_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr):
    _tile_product(a_ptr, b_ptr, c_ptr, M, N, K, K // BLOCK_K, BLOCK_M, BLOCK_N, BLOCK_K)


def _launch(kernel, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    (M, K), (_, N) = a.shape, b.shape
    c = torch.full((M, N), float("nan"))  # poisoned, as the grader poisons outputs
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))
    kernel[grid](a, b, c, M, N, K)
    return c


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _launch(matmul_kernel, a, b)


def matmul_floor_k(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _launch(matmul_floor_k_kernel, a, b)
