// Known-wrong submission (missing_second_syncthreads): matmul_smem lacks its second __syncthreads(): the next tiles overwrite shared memory while other warps still read it.
// Matrix multiplication in CUDA C, three ways: C = A @ B
// =====================================================
//
// A is M x K, B is K x N, C is M x N, all float32, row-major, rows packed (A[i][k] is
// A[i * K + k]). Each version is an extern "C" launcher that the grader calls with device
// pointers; it launches on the default stream and returns cudaGetLastError() (0 = success).
//
// What you learn here, with the global-memory reads of each version for N x N matrices:
//
//   matmul_naive  one thread per element of C. Each thread reads a row of A and a column of
//                 B, 2N values, and there are N^2 threads: 2N^3 reads for 2N^3 FLOPs, one
//                 float read per multiply-add.
//   matmul_smem   a block of 32 x 32 threads computes a 32 x 32 tile of C. The block copies a
//                 32 x 32 tile of A and one of B into shared memory (cooperative fetching:
//                 each thread copies one element of each), waits, and every thread then reads
//                 them 32 times from shared memory: 2N^3 / 32 reads from global memory.
//   matmul_reg    shared-memory tiles of 128 x 8 (A) and 8 x 128 (B) and, in each thread, an
//                 8 x 8 tile of C in registers. Per step along K a thread loads 8 values of A
//                 and 8 of B from shared memory into registers and does 64 multiply-adds with
//                 them: 2N^3 / 128 global reads, and 16 shared-memory reads for 64 FMAs.
//
// Build by hand (the grader does this for you):
//   nvcc -arch=sm_90 -O3 -shared -Xcompiler -fPIC -o matmul.so matmul.cu
// Add -Xptxas -v to see each kernel's registers and any spills to local memory.
//
// Every M, N and K >= 1 must work, multiples of the tile sizes or not.

#include <cuda_runtime.h>

// ---------------------------------------------------------------------------------------
// v1: one thread per element of C
// ---------------------------------------------------------------------------------------

// Threads per block of the naive kernel: 32 along N (one warp per row of the block), 8 along M.
constexpr int NAIVE_BLOCK_X = 32;
constexpr int NAIVE_BLOCK_Y = 8;

// C[row][col] = sum_k A[row][k] * B[k][col], one thread per (row, col).
// Run threadIdx.x along N (the columns of C), so that the 32 threads of a warp read 32
// adjacent elements of B at each step and write 32 adjacent elements of C.
__global__ void matmul_naive_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                    float* __restrict__ C, int M, int N, int K) {
    // The 32 threads of a warp share one row: each step they read one A[row][k] (the same
    // address for all, a broadcast) and 32 adjacent B[k][col] (one 128-byte access). Run
    // threadIdx.x along M instead and every read of A and write of C touches 32 rows.
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    // The grid is rounded up to whole blocks: threads past the edge of C have no element.
    if (row >= M || col >= N) return;
    const float* a = A + (size_t)row * K;  // 64-bit: row * K passes 2^31 in large matrices
    const float* b = B + col;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += a[k] * b[(size_t)k * N];
    }
    C[(size_t)row * N + col] = acc;
}

extern "C" int matmul_naive(const float* A, const float* B, float* C, int M, int N, int K) {
    dim3 block(NAIVE_BLOCK_X, NAIVE_BLOCK_Y);
    dim3 grid((N + NAIVE_BLOCK_X - 1) / NAIVE_BLOCK_X, (M + NAIVE_BLOCK_Y - 1) / NAIVE_BLOCK_Y);
    matmul_naive_kernel<<<grid, block>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}

// ---------------------------------------------------------------------------------------
// v2: shared-memory tiles, loaded by cooperative fetching
// ---------------------------------------------------------------------------------------

// Side of the square tiles; the block is SMEM_TILE x SMEM_TILE threads (1024, the most a
// block may have), one per element of its tile of C.
constexpr int SMEM_TILE = 32;

// For each step of SMEM_TILE along K: every thread copies one element of the A tile and one
// of the B tile into shared memory (0 for elements outside A or B), the block waits, every
// thread adds its SMEM_TILE products, the block waits again. Say in a comment what each
// __syncthreads() protects.
__global__ void matmul_smem_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                   float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[SMEM_TILE][SMEM_TILE];
    __shared__ float Bs[SMEM_TILE][SMEM_TILE];
    int tx = threadIdx.x;  // along N, as in v1, so that global accesses are coalesced
    int ty = threadIdx.y;
    int row = blockIdx.y * SMEM_TILE + ty;
    int col = blockIdx.x * SMEM_TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += SMEM_TILE) {
        // Cooperative fetching: each thread copies one element of the A tile and one of the
        // B tile, and a warp copies 32 adjacent elements of a row. Elements outside A or B
        // (the ragged last tiles) are stored as 0, so they add nothing to the sums below.
        int a_col = k0 + tx;
        int b_row = k0 + ty;
        As[ty][tx] = (row < M && a_col < K) ? A[(size_t)row * K + a_col] : 0.0f;
        Bs[ty][tx] = (b_row < K && col < N) ? B[(size_t)b_row * N + col] : 0.0f;
        // Barrier 1: every thread reads elements that other threads wrote. No thread may
        // start reading the tiles before all threads have finished writing them.
        __syncthreads();
        // As[ty][k] is one address for the whole warp (a broadcast); Bs[k][tx] is 32
        // adjacent words, one per bank: neither read conflicts.
        for (int k = 0; k < SMEM_TILE; ++k) {
            acc += As[ty][k] * Bs[k][tx];
        }
    }
    if (row < M && col < N) {
        C[(size_t)row * N + col] = acc;
    }
}

extern "C" int matmul_smem(const float* A, const float* B, float* C, int M, int N, int K) {
    dim3 block(SMEM_TILE, SMEM_TILE);
    dim3 grid((N + SMEM_TILE - 1) / SMEM_TILE, (M + SMEM_TILE - 1) / SMEM_TILE);
    matmul_smem_kernel<<<grid, block>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}

// ---------------------------------------------------------------------------------------
// v3: shared-memory tiles plus register tiles
// ---------------------------------------------------------------------------------------

// A block computes a REG_BM x REG_BN tile of C with REG_THREADS threads, each an 8 x 8 tile
// in registers, walking K in steps of REG_BK. You may change these, and the layout with them.
constexpr int REG_BM = 128;
constexpr int REG_BN = 128;
constexpr int REG_BK = 8;
constexpr int REG_TM = 8;
constexpr int REG_TN = 8;
constexpr int REG_THREADS = (REG_BM / REG_TM) * (REG_BN / REG_TN);  // 256
// The A tile is stored transposed, As[k][m], so that a thread's 8 values of A for one k are
// adjacent (two float4 reads). 4 words of padding per row spread the transposing stores
// over all 32 banks; a row stays a multiple of 16 bytes, as float4 reads need.
constexpr int REG_AS_PAD = 4;
// Each thread copies this many elements of each tile per step: 128 * 8 / 256 = 4.
constexpr int REG_LOADS = REG_BM * REG_BK / REG_THREADS;

static_assert(REG_BM == REG_BN && REG_TM == 8 && REG_TN == 8, "the thread layout below assumes these");
static_assert(REG_THREADS == 256 && REG_LOADS == 4, "the copy layout below assumes these");

// For each step of REG_BK along K: the block copies a REG_BM x REG_BK tile of A and a
// REG_BK x REG_BN tile of B into shared memory; then, for each k of the step, each thread
// reads its REG_TM values of A and REG_TN values of B into registers and adds their outer
// product to its REG_TM x REG_TN accumulators. Store A's tile transposed (As[k][m]) so that a
// thread's values for one k are adjacent; check with -Xptxas -v that nothing spills.
// __launch_bounds__(256, 2) caps a thread at 128 registers, so that two blocks fit on an SM.
__global__ void __launch_bounds__(REG_THREADS, 2)
matmul_reg_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                  int M, int N, int K) {
    __shared__ __align__(16) float As[REG_BK][REG_BM + REG_AS_PAD];
    __shared__ __align__(16) float Bs[REG_BK][REG_BN];
    const int tid = threadIdx.x;
    const int block_row = blockIdx.y * REG_BM;
    const int block_col = blockIdx.x * REG_BN;

    // Copy layout. A: thread t copies A[t / 2][4 * (t % 2) + 0..3] of the 128 x 8 tile: a
    // warp reads 16 rows, 32 adjacent bytes each (whole 32-byte sectors). B: warp w copies
    // row w of the 8 x 128 tile, lane l its columns l, l + 32, l + 64, l + 96: 128 adjacent
    // bytes per load instruction.
    const int a_row = tid / 2;
    const int a_col = (tid % 2) * 4;
    const int b_row = tid / 32;
    const int b_col = tid % 32;
    const bool a_row_in = block_row + a_row < M;
    const float* a_src = A + (size_t)(block_row + a_row) * K + a_col;
    const float* b_src = B + (size_t)b_row * N + block_col + b_col;

    // Compute layout: a 16 x 16 grid of threads, each owning rows {4*ty + i, 64 + 4*ty + i}
    // and columns {4*tx + j, 64 + 4*tx + j} for i, j in 0..3 of the block's tile. Splitting
    // each thread's 8 columns into two runs of 4 makes the float4 reads of a warp's 16
    // different B addresses fall in distinct banks (8 adjacent float4 per 128-byte phase).
    const int tx = tid % 16;
    const int ty = tid / 16;

    float acc[REG_TM][REG_TN] = {};
    float a_next[REG_LOADS];
    float b_next[REG_LOADS];

    // Global -> registers for the tile starting at k0. Elements outside A or B load 0.
    auto fetch = [&](int k0) {
#pragma unroll
        for (int i = 0; i < REG_LOADS; ++i) {
            a_next[i] = (a_row_in && k0 + a_col + i < K) ? a_src[k0 + i] : 0.0f;
        }
        const bool b_row_in = k0 + b_row < K;
#pragma unroll
        for (int i = 0; i < REG_LOADS; ++i) {
            int col = block_col + b_col + 32 * i;
            b_next[i] = (b_row_in && col < N) ? b_src[(size_t)k0 * N + 32 * i] : 0.0f;
        }
    };
    // Registers -> shared memory, A transposed.
    auto stash = [&]() {
#pragma unroll
        for (int i = 0; i < REG_LOADS; ++i) {
            As[a_col + i][a_row] = a_next[i];
            Bs[b_row][b_col + 32 * i] = b_next[i];
        }
    };

    fetch(0);
    stash();
    __syncthreads();  // the first tiles are complete before anyone reads them
    for (int k0 = 0; k0 < K; k0 += REG_BK) {
        // Start loading the next tiles into registers now: their global-memory latency is
        // hidden behind the 512 FMAs below instead of stalling the block.
        const bool more = k0 + REG_BK < K;
        if (more) fetch(k0 + REG_BK);
#pragma unroll
        for (int k = 0; k < REG_BK; ++k) {
            float a_frag[REG_TM];
            float b_frag[REG_TN];
            *reinterpret_cast<float4*>(&a_frag[0]) = *reinterpret_cast<const float4*>(&As[k][4 * ty]);
            *reinterpret_cast<float4*>(&a_frag[4]) = *reinterpret_cast<const float4*>(&As[k][64 + 4 * ty]);
            *reinterpret_cast<float4*>(&b_frag[0]) = *reinterpret_cast<const float4*>(&Bs[k][4 * tx]);
            *reinterpret_cast<float4*>(&b_frag[4]) = *reinterpret_cast<const float4*>(&Bs[k][64 + 4 * tx]);
            // The outer product: 64 FMAs from 16 values, all in registers.
#pragma unroll
            for (int i = 0; i < REG_TM; ++i) {
#pragma unroll
                for (int j = 0; j < REG_TN; ++j) {
                    acc[i][j] += a_frag[i] * b_frag[j];
                }
            }
        }
        if (!more) break;
        // Barrier 2 of the step: all threads are done reading the tiles before they are overwritten.
        __syncthreads();
        stash();
        // Barrier 1 of the next step: the new tiles are complete before anyone reads them.
        __syncthreads();
    }

    // Registers -> C, element by element with bounds checks: the last tiles may be ragged.
#pragma unroll
    for (int i = 0; i < REG_TM; ++i) {
        int row = block_row + (i < 4 ? 4 * ty + i : 64 + 4 * ty + (i - 4));
        if (row >= M) continue;
        float* c_row = C + (size_t)row * N;
#pragma unroll
        for (int j = 0; j < REG_TN; ++j) {
            int col = block_col + (j < 4 ? 4 * tx + j : 64 + 4 * tx + (j - 4));
            if (col < N) c_row[col] = acc[i][j];
        }
    }
}

extern "C" int matmul_reg(const float* A, const float* B, float* C, int M, int N, int K) {
    dim3 block(REG_THREADS);
    dim3 grid((N + REG_BN - 1) / REG_BN, (M + REG_BM - 1) / REG_BM);
    matmul_reg_kernel<<<grid, block>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
