"""Block pointers and tensor descriptors, as the matmul handout's `matmul_bt` uses them:
C = A @ B.T with B given row-major as (N, K), so the B tile is read along K (coalesced)."""

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_bt_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a_block = tl.make_block_ptr(a_ptr, shape=(M, K), strides=(K, 1), offsets=(pid_m * BLOCK_M, 0),
                                block_shape=(BLOCK_M, BLOCK_K), order=(1, 0))
    # B.T is (K, N) with strides (1, K): the same memory, read as the transpose.
    bt_block = tl.make_block_ptr(b_ptr, shape=(K, N), strides=(1, K), offsets=(0, pid_n * BLOCK_N),
                                 block_shape=(BLOCK_K, BLOCK_N), order=(0, 1))
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BLOCK_K)):
        # boundary_check pads the partial tiles at the edges with zeros.
        a = tl.load(a_block, boundary_check=(0, 1), padding_option="zero")
        b = tl.load(bt_block, boundary_check=(0, 1), padding_option="zero")
        acc += tl.dot(a, b)
        a_block = tl.advance(a_block, (0, BLOCK_K))
        bt_block = tl.advance(bt_block, (BLOCK_K, 0))
    c_block = tl.make_block_ptr(c_ptr, shape=(M, N), strides=(N, 1), offsets=(pid_m * BLOCK_M, pid_n * BLOCK_N),
                                block_shape=(BLOCK_M, BLOCK_N), order=(1, 0))
    tl.store(c_block, acc, boundary_check=(0, 1))


@triton.jit
def padded_tile_kernel(x_ptr, out_ptr, R, C, BLOCK: tl.constexpr):
    """Copies the (BLOCK, BLOCK) tile at the origin of an (R, C) tensor, NaN where it hangs over."""
    x_block = tl.make_block_ptr(x_ptr, shape=(R, C), strides=(C, 1), offsets=(0, 0), block_shape=(BLOCK, BLOCK),
                                order=(1, 0))
    tile = tl.load(x_block, boundary_check=(0, 1), padding_option="nan")
    rows, cols = tl.arange(0, BLOCK), tl.arange(0, BLOCK)
    tl.store(out_ptr + rows[:, None] * BLOCK + cols[None, :], tile)


@triton.jit
def descriptor_bt_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    off_m, off_n = tl.program_id(0) * BLOCK_M, tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([off_n, k * BLOCK_K])
        acc += tl.dot(a, b.T)
    c_desc.store([off_m, off_n], acc)


def _grid(M, N):
    return lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))


def matmul_bt(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    (M, K), (N, _) = a.shape, b.shape
    c = torch.full((M, N), float("nan"))
    matmul_bt_kernel[_grid(M, N)](a, b, c, M, N, K, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
    return c


def padded_tile(x: torch.Tensor, block: int) -> torch.Tensor:
    out = torch.zeros(block, block)
    padded_tile_kernel[(1, )](x, out, x.shape[0], x.shape[1], BLOCK=block)
    return out


def descriptor_bt(a: torch.Tensor, b: torch.Tensor, set_allocator: bool = True) -> torch.Tensor:
    """On a GPU, in-kernel descriptors need scratch memory: triton.set_allocator must be called
    first (`set_allocator=False` forgets to, which only the GPU notices). Their strides must be
    multiples of 16 bytes, on the GPU and in the interpreter alike."""
    (M, K), (N, _) = a.shape, b.shape
    c = torch.full((M, N), float("nan"))
    if set_allocator:
        triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8))
    descriptor_bt_kernel[_grid(M, N)](a, b, c, M, N, K, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
    return c
