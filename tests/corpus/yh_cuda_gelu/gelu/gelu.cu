// A CUDA GELU (tanh approximation), copied from Yh1zzzzzzz/LLM-from-scratch at
// 3b5811d1f1d7424aca6cf4b722eabe352f8dce62 (MIT, see ../LICENSE): activation_function/cuda_gelu.cu, gelu_kernel and
// cdiv verbatim. Upstream, `torch::Tensor gelu(torch::Tensor x)` (a PyTorch extension) launches
// it; the corpus's wrapper is gelu_cuda at the end, which launches it the same way (256 threads a
// block, nothing for n == 0) on the grader's pointers. The torch headers are not included.

#include <math.h>
#include <cuda_runtime.h>

__global__ void gelu_kernel(const float* __restrict__ in, 
                           float* __restrict__ out, 
                           int num_elements) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < num_elements) {
        const float x = in[i];
        const float cube = 0.044715f * x * x * x;
        out[i] = 0.5f * x * (1.0f + tanhf(0.79788456f * (x + cube)));
    }
}

inline unsigned int cdiv(unsigned int a, unsigned int b) {
    return (a + b - 1) / b;
}

// --- corpus wrapper: the gelu assignment's CUDA entry point -----------------------------------
extern "C" int gelu_cuda(const float* x, float* y, long long n) {
    const int num_elements = n;
    if (num_elements == 0) return cudaGetLastError();

    const int block_size = 256;
    const int num_blocks = cdiv(num_elements, block_size);

    const dim3 grid(num_blocks);
    const dim3 block(block_size);

    gelu_kernel<<<grid, block>>>(x, y, num_elements);
    return cudaGetLastError();
}
