// Matrix transpose in CUDA C, three ways: out = in^T
// ==================================================
//
// `in` is rows x cols and `out` is cols x rows, both float32, row-major, rows packed:
// in[r][c] is in[r * cols + c], and out[c][r] = in[r][c] is out[c * rows + r]. Each version is an
// extern "C" launcher that the grader calls with device pointers; it launches on the default
// stream and returns cudaGetLastError() (0 = success).
//
// What you learn here. A transpose computes nothing: it reads each element once and writes it
// once, 8 bytes per float32 element, so the best it can do is the speed of a device-to-device
// copy of the same bytes, which is what it is timed against. What stands in the way is the order
// of the accesses:
//
//   transpose_naive   one thread per element. A warp reads 32 adjacent floats of a row of `in`
//                     (128 bytes, one line) and writes them down a column of `out`, 32 floats
//                     `rows` apart: 32 separate 32-byte sectors for 128 useful bytes.
//   transpose_smem    a block moves a 32 x 32 tile through shared memory: it reads the tile row
//                     by row (coalesced), waits, and writes it out row by row (coalesced),
//                     reading the tile down its columns. A column of a 32 x 32 float tile lies in
//                     ONE of shared memory's 32 banks: each warp's read is 32 accesses in a row.
//   transpose_padded  the same tile with one extra float per row (32 x 33): a column now
//                     touches all 32 banks once, one access per warp's read.
//
// Build by hand (the grader does this for you):
//   nvcc -arch=sm_90 -O3 -shared -Xcompiler -fPIC -o transpose.so transpose.cu
//
// Every rows, cols >= 1 must work, multiples of the tile or not (rows up to 65535 x 32, the
// grid's limit along y; cols up to 2^31 - 1).

#include <cuda_runtime.h>

// ---------------------------------------------------------------------------------------
// v1: one thread per element
// ---------------------------------------------------------------------------------------

// Threads per block of the naive kernel: 32 along the columns of `in` (one warp per row of the
// block), 8 along its rows.
constexpr int NAIVE_BLOCK_X = 32;
constexpr int NAIVE_BLOCK_Y = 8;

// out[col][row] = in[row][col], one thread per element, threadIdx.x along the columns of `in`.
__global__ void transpose_naive_kernel(const float* __restrict__ in, float* __restrict__ out, int rows,
                                       int cols) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    // The grid is rounded up to whole blocks: threads past the edge of the matrix have no element.
    if (row >= rows || col >= cols) return;
    // The read is coalesced: the warp's 32 threads read in[row][col .. col + 31], one 128-byte
    // line. The write is not: out[col][row], out[col + 1][row], ... are `rows` floats apart, so
    // the warp's one store instruction becomes 32 transactions of a 32-byte sector each, for 4
    // useful bytes apiece. 64-bit offsets: row * cols passes 2^31 in large matrices.
    out[(size_t)col * rows + row] = in[(size_t)row * cols + col];
}

extern "C" int transpose_naive(const float* in, float* out, int rows, int cols) {
    dim3 block(NAIVE_BLOCK_X, NAIVE_BLOCK_Y);
    dim3 grid((cols + NAIVE_BLOCK_X - 1) / NAIVE_BLOCK_X, (rows + NAIVE_BLOCK_Y - 1) / NAIVE_BLOCK_Y);
    transpose_naive_kernel<<<grid, block>>>(in, out, rows, cols);
    return (int)cudaGetLastError();
}

// ---------------------------------------------------------------------------------------
// v2 and v3: a 32 x 32 tile through shared memory, without and with padding
// ---------------------------------------------------------------------------------------

// Side of the square tile. A block has TILE x BLOCK_ROWS threads (256), so each thread moves
// TILE / BLOCK_ROWS = 4 elements in and 4 out: more bytes in flight per thread to cover the
// latency of global memory, and smaller blocks, more of which fit on an SM at once.
constexpr int TILE = 32;
constexpr int BLOCK_ROWS = 8;

// One kernel for both tiled versions: PAD floats of padding at the end of each row of the tile.
// transpose_smem launches it with PAD = 0, transpose_padded with PAD = 1.
//
// The block's tile is rows row0 .. row0 + 31 and columns col0 .. col0 + 31 of `in`; transposed,
// it is rows col0 .. col0 + 31 and columns row0 .. row0 + 31 of `out`.
template <int PAD>
__global__ void transpose_tiled_kernel(const float* __restrict__ in, float* __restrict__ out, int rows,
                                       int cols) {
    __shared__ float tile[TILE][TILE + PAD];
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE;
    const int col0 = blockIdx.x * TILE;

    // Read the tile row by row: at step j the warp ty reads in[row0 + ty + j][col0 .. col0 + 31],
    // 128 adjacent bytes, and stores them into row ty + j of the tile, 32 consecutive words: one
    // per bank, no conflict. A slot outside the matrix gets 0: a right kernel never reads it,
    // and a wrong index then reads a 0 (plain to see in the report) instead of whatever an
    // earlier kernel left in shared memory.
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        const int row = row0 + ty + j;
        const int col = col0 + tx;
        tile[ty + j][tx] = (row < rows && col < cols) ? in[(size_t)row * cols + col] : 0.0f;
    }
    // Every thread now reads elements that other warps stored: none may start before all
    // stores to the tile are done.
    __syncthreads();
    // Write the transposed tile row by row: at step j the warp ty writes
    // out[col0 + ty + j][row0 .. row0 + 31], 128 adjacent bytes, coalesced. Lane tx needs
    // in[row0 + tx][col0 + ty + j], which is tile[tx][ty + j]: the warp reads a COLUMN of the
    // tile. Word tile[tx][k] sits at tx * (TILE + PAD) + k, in bank (tx * (TILE + PAD) + k) % 32:
    //   PAD = 0: bank k % 32 for every lane, 32 different words in one bank, 32 accesses in turn;
    //   PAD = 1: bank (tx + k) % 32, a different bank for each lane, one access.
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        const int row = col0 + ty + j;  // of `out`
        const int col = row0 + tx;
        if (row < cols && col < rows) {
            out[(size_t)row * rows + col] = tile[tx][ty + j];
        }
    }
}

// The grid: one block per tile of `in`, rounded up so that the ragged last tiles are covered.
static dim3 tile_grid(int rows, int cols) {
    return dim3((cols + TILE - 1) / TILE, (rows + TILE - 1) / TILE);
}

extern "C" int transpose_smem(const float* in, float* out, int rows, int cols) {
    transpose_tiled_kernel<0><<<tile_grid(rows, cols), dim3(TILE, BLOCK_ROWS)>>>(in, out, rows, cols);
    return (int)cudaGetLastError();
}

extern "C" int transpose_padded(const float* in, float* out, int rows, int cols) {
    transpose_tiled_kernel<1><<<tile_grid(rows, cols), dim3(TILE, BLOCK_ROWS)>>>(in, out, rows, cols);
    return (int)cudaGetLastError();
}
