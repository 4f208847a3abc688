// Known-wrong submission (cuda_syntax_error): a missing semicolon in gelu(): nvcc names the line.
#include <cuda_runtime.h>

constexpr int THREADS = 256;

__device__ __forceinline__ float gelu(float x) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x)
    return x / (1.0f + expf(-2.0f * u));
}

__global__ void gelu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = gelu(x[i]);
    }
}

extern "C" int gelu_cuda(const float* x, float* y, long long n) {
    gelu_kernel<<<(unsigned int)((n + THREADS - 1) / THREADS), THREADS>>>(x, y, n);
    return (int)cudaGetLastError();
}
