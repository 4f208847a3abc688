"""A student's kernels as built: the CUDA C build (cuda_build), which kernels each launcher starts
(cuda_launches), what the compiler made of each kernel (cuda_resources, ptx, occupancy,
compiled_kernels), and `make profile` under Nsight Compute (profiling, ncu)."""
