"""The occupancy calculator (grader/kernels/occupancy.py) against NVIDIA's own rules and, on a GPU, the driver.

The table below was printed by CUDA 13.0's `cuda_occupancy.h` (cudaOccMaxActiveBlocksPerMultiprocessor,
compiled as host C++ by the program in OCCUPANCY_PROGRAM) for an sm_90 device (65536 registers,
228 KiB of shared memory and 2048 threads per SM, 227 KiB opted in per block, 1 KiB reserved per
block): blocks per SM and the header's limiting factors. Where g++ and the header are installed,
the same program checks a wider grid live; on a GPU, the driver's own occupancy API checks Triton
kernels it compiled and loaded.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from grader.kernels.occupancy import SM90, occupancy, warps_allowed_by_registers

# registers per thread, threads per block, shared bytes per block -> blocks per SM, limiting resources
HEADER_TABLE = [
    ((32, 256, 0), 8, ("registers", "warps")),
    ((40, 128, 0), 12, ("registers",)),
    ((64, 128, 0), 8, ("registers",)),
    ((128, 128, 8192), 4, ("registers",)),
    ((255, 128, 65536), 2, ("registers",)),
    ((168, 256, 98304), 1, ("registers",)),
    ((232, 256, 196608), 1, ("registers", "shared memory")),
    ((128, 32, 0), 16, ("registers",)),
    ((16, 32, 0), 32, ("blocks",)),
    ((32, 1024, 0), 2, ("registers", "warps")),
    ((64, 1024, 0), 1, ("registers",)),
    ((65, 1024, 0), 0, ()),  # 65 x 32 rounds to 2304 registers a warp: 73728 for 32 warps, over 65536
    ((128, 512, 0), 1, ("registers",)),
    ((30, 256, 4096), 8, ("registers", "warps")),
    ((12, 256, 0), 8, ("warps",)),
    ((90, 256, 0), 2, ("registers",)),
    ((48, 128, 16384), 10, ("registers",)),
    ((32, 128, 49152), 4, ("shared memory",)),
    ((32, 128, 232448), 1, ("shared memory",)),  # the most a block may have: one per SM
    ((32, 128, 232449), 0, ()),
    ((96, 384, 73728), 1, ("registers",)),
    ((200, 64, 114688), 2, ("shared memory",)),
    ((24, 96, 0), 21, ("warps",)),  # three warps a block: 21 blocks use 63 of the 64 warp slots
]

# The header's own code, for an sm_90 device: reads "registers threads shared" lines and prints
# "error blocks limiting-factor-bits" (warps 1, registers 2, shared memory 4, blocks 8).
OCCUPANCY_PROGRAM = r"""
#include <cstdio>
#include "cuda_occupancy.h"
int main() {
    cudaOccDeviceProp prop;
    prop.computeMajor = 9; prop.computeMinor = 0;
    prop.maxThreadsPerBlock = 1024; prop.maxThreadsPerMultiprocessor = 2048;
    prop.regsPerBlock = 65536; prop.regsPerMultiprocessor = 65536; prop.warpSize = 32;
    prop.sharedMemPerBlock = 49152; prop.sharedMemPerMultiprocessor = 233472; prop.numSms = 132;
    prop.sharedMemPerBlockOptin = 232448; prop.reservedSharedMemPerBlock = 1024;
    int regs, threads; long smem;
    while (scanf("%d %d %ld", &regs, &threads, &smem) == 3) {
        cudaOccFuncAttributes attr;
        attr.maxThreadsPerBlock = 1024; attr.numRegs = regs; attr.sharedSizeBytes = 0;
        attr.partitionedGCConfig = PARTITIONED_GC_OFF; attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
        attr.maxDynamicSharedSizeBytes = 232448; attr.numBlockBarriers = 1;
        cudaOccDeviceState state;
        cudaOccResult result;
        cudaOccError err = cudaOccMaxActiveBlocksPerMultiprocessor(&result, &prop, &attr, &state, threads, smem);
        printf("%d %d %u\n", (int)err, result.activeBlocksPerMultiprocessor, result.limitingFactors);
    }
}
"""
BITS = {"warps": 1, "registers": 2, "shared memory": 4, "blocks": 8}


@pytest.mark.parametrize(("config", "blocks", "limited_by"), HEADER_TABLE,
                         ids=[f"{r}regs-{t}threads-{b}B" for (r, t, b), _, _ in HEADER_TABLE])
def test_blocks_and_limit_match_the_cuda_occupancy_header(config, blocks, limited_by):
    found = occupancy(*config)
    assert found.blocks == blocks
    assert found.warps == blocks * -(-config[1] // 32)
    if blocks:
        assert sorted(found.limited_by) == sorted(limited_by)
    else:
        assert found.why_none, "a kernel that cannot launch must say what it asks for beyond the SM"


def test_the_reserved_kilobyte_and_the_128_byte_unit_count():
    # 45.5 KiB of a block's own: five blocks would fit in 228 KiB (5 x 46592 = 232960 bytes), but
    # not with the 1 KiB each block reserves (5 x 47616 = 238080); 44.5 KiB leaves room for five.
    assert occupancy(32, 128, 45 * 1024 + 512).limits["shared memory"] == 4
    assert occupancy(32, 128, 44 * 1024 + 512).limits["shared memory"] == 5
    # A byte more than a multiple of 128 costs a whole unit: 233472 / (4096 + 1024) = 45, / 5248 = 44.
    assert occupancy(16, 32, 4096).limits["shared memory"] == 45
    assert occupancy(16, 32, 4097).limits["shared memory"] == 44


def test_registers_alone_bound_the_warps_whatever_the_block():
    assert warps_allowed_by_registers(32) == 64
    assert warps_allowed_by_registers(128) == 16
    assert warps_allowed_by_registers(255) == 8
    assert warps_allowed_by_registers(256) == 0
    for registers, threads in itertools.product((32, 40, 64, 96, 128, 168, 255), (128, 256, 512)):
        assert occupancy(registers, threads, 0).warps <= warps_allowed_by_registers(registers)


def _header() -> Path | None:
    homes = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        homes.append(str(Path(nvcc).resolve().parent.parent))
    return next((Path(h) / "include" for h in homes if h and (Path(h) / "include" / "cuda_occupancy.h").is_file()), None)


def test_a_wide_grid_matches_the_header_compiled_here(tmp_path):
    include, compiler = _header(), shutil.which("g++") or shutil.which("c++")
    if include is None or compiler is None:
        pytest.skip("needs g++ and CUDA's cuda_occupancy.h (nvcc's include folder)")
    (tmp_path / "occ.cpp").write_text(OCCUPANCY_PROGRAM)
    subprocess.run([compiler, "-I", str(include), "-o", str(tmp_path / "occ"), str(tmp_path / "occ.cpp")], check=True)
    grid = list(itertools.product((8, 16, 24, 32, 40, 56, 64, 72, 96, 128, 168, 200, 232, 255),
                                  (32, 64, 96, 128, 192, 256, 384, 512, 768, 1024),
                                  (0, 1, 1024, 4096, 16384, 33000, 49152, 65536, 98304, 114688, 196608, 232448)))  # fmt: skip
    lines = subprocess.run([str(tmp_path / "occ")], input="\n".join(" ".join(map(str, g)) for g in grid),
                           capture_output=True, text=True, check=True).stdout.split("\n")  # fmt: skip
    for config, line in zip(grid, lines):
        error, blocks, factors = (int(v) for v in line.split())
        assert error == 0, config
        found = occupancy(*config)
        assert found.blocks == blocks, (config, found)
        if blocks:
            assert sum(BITS[name] for name in found.limited_by) == factors, (config, found.limited_by)


@pytest.mark.gpu
def test_the_driver_agrees_on_triton_kernels():
    """On the GPU: compile Triton kernels of a range of sizes, load them, and ask the driver's
    cuOccupancyMaxActiveBlocksPerMultiprocessor for the blocks per SM (with the launch's dynamic
    shared memory), against occupancy() from the registers the driver reports and the kernel's own
    shared memory."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("needs an sm_90 GPU (H100, H200)")
    import ctypes

    import triton
    import triton.language as tl

    @triton.jit
    def tile_sum(x_ptr, out_ptr, BLOCK: tl.constexpr, ROWS: tl.constexpr):
        rows = tl.arange(0, ROWS)[:, None]
        cols = tl.arange(0, BLOCK)[None, :]
        tile = tl.load(x_ptr + rows * BLOCK + cols)
        total = tl.sum(tl.dot(tile, tl.trans(tile)), axis=1)  # shared memory for the dot's operands
        tl.store(out_ptr + tl.arange(0, ROWS), total)

    cuda = ctypes.CDLL("libcuda.so.1")
    for rows, block, warps in ((16, 16, 1), (64, 64, 4), (128, 64, 4), (128, 128, 8), (64, 256, 8), (256, 64, 4)):
        x = torch.randn(rows * block, device="cuda", dtype=torch.float16)
        out = torch.empty(rows, device="cuda", dtype=torch.float32)
        compiled = tile_sum[(1,)](x, out, BLOCK=block, ROWS=rows, num_warps=warps)
        blocks = ctypes.c_int()
        status = cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            ctypes.byref(blocks), ctypes.c_void_p(compiled.function), 32 * warps, ctypes.c_size_t(compiled.metadata.shared)
        )
        assert status == 0
        ours = occupancy(compiled.n_regs, 32 * warps, compiled.metadata.shared, SM90)
        assert ours.blocks == blocks.value, (rows, block, warps, compiled.n_regs, compiled.metadata.shared, ours)


@pytest.mark.gpu
def test_the_driver_agrees_on_the_transpose_solution_kernels(tmp_path):
    """On the GPU: the transpose solution's kernels, built to a cubin by nvcc and loaded through the
    driver, against what the CPU tier reads of the same kernels in the graded library (registers,
    and its own shared memory: cuobjdump's figure less the 1 KiB sm_90 cubins count for the
    driver, cuda_resources.py), and the driver's occupancy for the launch's 256 threads."""
    torch = pytest.importorskip("torch")
    from grader.kernels import cuda_build

    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9 or cuda_build.nvcc() is None:
        pytest.skip("needs an sm_90 GPU (H100, H200) and nvcc")
    import ctypes

    from grader.assignment.spec import REPO_ROOT

    source = REPO_ROOT / "solutions" / "transpose" / "transpose.cu"
    build = cuda_build.build(source)
    cubin = tmp_path / "transpose.cubin"
    subprocess.run([cuda_build.nvcc(), "-O3", "-cubin", f"-arch={cuda_build.architecture()}", "-o", str(cubin),
                    str(source)], check=True)  # fmt: skip
    torch.empty(1, device="cuda")  # the primary context, current on this thread
    cuda = ctypes.CDLL("libcuda.so.1")
    module = ctypes.c_void_p()
    assert cuda.cuModuleLoadData(ctypes.byref(module), cubin.read_bytes()) == 0
    mangled = {"transpose_smem": b"_Z22transpose_tiled_kernelILi0EEvPKfPfii",
               "transpose_padded": b"_Z22transpose_tiled_kernelILi1EEvPKfPfii"}  # fmt: skip
    for launcher, name in mangled.items():
        [ours] = build.resources.of_launcher(launcher)
        function = ctypes.c_void_p()
        assert cuda.cuModuleGetFunction(ctypes.byref(function), module, name) == 0
        registers, static_shared, blocks = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        assert cuda.cuFuncGetAttribute(ctypes.byref(registers), 4, function) == 0  # CU_FUNC_ATTRIBUTE_NUM_REGS
        assert cuda.cuFuncGetAttribute(ctypes.byref(static_shared), 1, function) == 0  # ..._SHARED_SIZE_BYTES
        assert cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(blocks), function, ours.threads,
                                                                 ctypes.c_size_t(0)) == 0  # fmt: skip
        assert (ours.registers, ours.shared_bytes) == (registers.value, static_shared.value), launcher
        assert occupancy(ours.registers, ours.threads, ours.shared_bytes, SM90).blocks == blocks.value, launcher
