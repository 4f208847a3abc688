// Known-wrong submission (cuda_no_tail): float4 loads and stores only; the last n % 4 elements are never written.
#include <cuda_runtime.h>

constexpr int THREADS = 256;

__device__ __forceinline__ float gelu(float x) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
}

__global__ void gelu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    const long long n_vec = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += (long long)gridDim.x * blockDim.x) {
        float4 v = x4[i];
        v.x = gelu(v.x);
        v.y = gelu(v.y);
        v.z = gelu(v.z);
        v.w = gelu(v.w);
        y4[i] = v;
    }
}

extern "C" int gelu_cuda(const float* x, float* y, long long n) {
    long long blocks = (n / 4 + THREADS - 1) / THREADS;
    blocks = blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks);
    gelu_kernel<<<(unsigned int)blocks, THREADS>>>(x, y, n);
    return (int)cudaGetLastError();
}
