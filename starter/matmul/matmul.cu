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
}

extern "C" int matmul_naive(const float* A, const float* B, float* C, int M, int N, int K) {
    return -1;  // not implemented: replace with your launch
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
}

extern "C" int matmul_smem(const float* A, const float* B, float* C, int M, int N, int K) {
    return -1;  // not implemented: replace with your launch
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

// For each step of REG_BK along K: the block copies a REG_BM x REG_BK tile of A and a
// REG_BK x REG_BN tile of B into shared memory; then, for each k of the step, each thread
// reads its REG_TM values of A and REG_TN values of B into registers and adds their outer
// product to its REG_TM x REG_TN accumulators. Store A's tile transposed (As[k][m]) so that a
// thread's values for one k are adjacent; check with -Xptxas -v that nothing spills.
// __launch_bounds__(256, 2) caps a thread at 128 registers, so that two blocks fit on an SM.
__global__ void __launch_bounds__(REG_THREADS, 2)
matmul_reg_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                  int M, int N, int K) {
}

extern "C" int matmul_reg(const float* A, const float* B, float* C, int M, int N, int K) {
    return -1;  // not implemented: replace with your launch
}
