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
// Threads of the rounded-up grid past the edge of the matrix have no element. Which of the
// warp's two accesses is coalesced, and which is 32 transactions?
__global__ void transpose_naive_kernel(const float* __restrict__ in, float* __restrict__ out, int rows,
                                       int cols) {
}

extern "C" int transpose_naive(const float* in, float* out, int rows, int cols) {
    return -1;  // not implemented: replace with your launch
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
// it is rows col0 .. col0 + 31 and columns row0 .. row0 + 31 of `out`. Read the tile row by row
// into `__shared__ float tile[TILE][TILE + PAD]` (a warp per row of 32 adjacent floats; slots
// outside the matrix get 0), wait for the whole block (say in a comment why), then write the
// transposed tile row by row, so that the writes are coalesced too. Count the banks that a warp's
// read of the tile touches, with PAD = 0 and with PAD = 1.
template <int PAD>
__global__ void transpose_tiled_kernel(const float* __restrict__ in, float* __restrict__ out, int rows,
                                       int cols) {
}

extern "C" int transpose_smem(const float* in, float* out, int rows, int cols) {
    return -1;  // not implemented: replace with your launch
}

extern "C" int transpose_padded(const float* in, float* out, int rows, int cols) {
    return -1;  // not implemented: replace with your launch
}
