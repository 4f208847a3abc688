"""What a kernel is made of, read from its PTX (grader/kernels/ptx.py), and a CUDA C build's kernels with
their launches (grader/kernels/cuda_launches.py, grader/kernels/cuda_resources.py).

The bank-conflict walk is checked on hand-written PTX in the shape nvcc writes it, and, where nvcc
is installed, on the transpose solution's two tiles: the unpadded one's column reads conflict
32-way, the padded one's not at all, as the handout's table says.
"""

from __future__ import annotations

import shutil

import pytest

from grader.kernels import cuda_build, cuda_launches, cuda_resources, ptx
from grader.assignment.spec import REPO_ROOT

# The column read of a 32 x 32 float tile, `tile[tx][ty + j]`, as nvcc -O3 writes it (the transpose
# solution's PTX, trimmed): the address is tile + 128 * tx + 4 * ty (+ 4 * j as an offset).
COLUMN_READ = """
.visible .entry transpose_tile(
.param .u64 transpose_tile_param_0
)
{
.shared .align 4 .b8 tile[4096];
.loc	1 81 5
mov.u32 %r3, %tid.y;
mov.u32 %r5, %tid.x;
mov.u32 %r22, tile;
.loc	1 94 9
shl.b32 %r21, %r3, 7;
add.s32 %r23, %r22, %r21;
shl.b32 %r24, %r5, 2;
add.s32 %r6, %r23, %r24;
st.shared.f32 [%r6], %f17;
.loc	1 109 13
shl.b32 %r28, %r5, STRIDE_SHIFT;
add.s32 %r30, %r22, %r28;
shl.b32 %r31, %r3, 2;
add.s32 %r11, %r30, %r31;
ld.shared.f32 %f13, [%r11+32];
}
"""


def test_a_column_of_a_row_major_tile_lies_in_one_bank():
    found = ptx.facts(COLUMN_READ.replace("STRIDE_SHIFT", "7"))
    store, load = found.shared_accesses
    assert (store.kind, store.ways, store.stride, store.line) == ("store", 1, 4, 94)
    assert (load.kind, load.ways, load.stride, load.line) == ("load", 32, 128, 109)
    assert found.worst_conflict is load


def test_a_row_padded_by_one_word_steps_through_every_bank():
    padded = COLUMN_READ.replace("shl.b32 %r28, %r5, STRIDE_SHIFT;", "mul.lo.s32 %r28, %r5, 132;")
    found = ptx.facts(padded)
    assert [a.ways for a in found.shared_accesses] == [1, 1]
    assert found.shared_accesses[1].stride == 132
    assert found.worst_conflict is None


@pytest.mark.parametrize(("stride_words", "ways"), [(1, 1), (2, 2), (4, 4), (8, 8), (16, 16), (32, 32), (33, 1), (3, 1), (0, 1)])
def test_conflict_ways_of_a_strided_warp(stride_words, ways):
    # Lanes 4 * stride_words bytes apart: gcd(stride, 32) lanes share a bank; stride 0 is a broadcast.
    assert ptx.conflict_ways([4 * stride_words * lane for lane in range(32)], 4) == ways


def test_wide_accesses_are_served_in_phases():
    # 16-byte accesses of 32 adjacent lanes: four phases of 8 lanes, each 128 contiguous bytes.
    assert ptx.conflict_ways([16 * lane for lane in range(32)], 16) == 1
    # 8-byte accesses 256 bytes apart: 16 lanes a phase, all in banks 0 and 1.
    assert ptx.conflict_ways([256 * lane for lane in range(32)], 8) == 16


def test_addresses_from_loaded_data_are_not_judged():
    text = """
ld.global.u32 %r1, [%rd1];
ld.shared.f32 %f1, [%r1];
mov.u32 %r2, %tid.x;
and.b32 %r3, %r2, 15;
shl.b32 %r4, %r3, 2;
ld.shared.f32 %f2, [%r4];
"""
    found = ptx.facts(text)
    assert found.unfollowed_shared == 1  # the address came from memory
    assert [a.ways for a in found.shared_accesses] == [1]  # tid % 16: lanes 16 apart share a word (a broadcast)


def test_a_block_narrower_than_a_warp_puts_two_rows_in_it():
    text = """
mov.u32 %r1, %tid.x;
mov.u32 %r2, %tid.y;
shl.b32 %r3, %r2, 6;
shl.b32 %r4, %r1, 2;
add.s32 %r5, %r3, %r4;
ld.shared.f32 %f1, [%r5];
"""
    # A 16-wide block: lanes 16-31 are the next row, 64 bytes on: all 32 words distinct, 32 banks.
    assert ptx.facts(text, block_x=16).shared_accesses[0].ways == 1
    # Rows of 32 floats read by 16-wide blocks: the second row lands on the first row's banks.
    assert ptx.facts(text.replace("shl.b32 %r3, %r2, 6", "shl.b32 %r3, %r2, 7"), block_x=16).shared_accesses[0].ways == 2


@pytest.mark.parametrize("shared", [True, False])
def test_tensor_cores_and_load_widths(shared):
    """Counted alike whether shared memory's addresses are followed or only these lines are read."""
    text = """
@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
// ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ]; a comment, not a load
	@!%p2 ld.global.b32 { %r7 }, [ %rd1 + 0 ];  // guarded by a negated predicate
$L__BB0_1:
st.global.v4.b32 [ %rd1 + 0 ], { %r1, %r2, %r3, %r4 };
ld.global.nc.f32 %f1, [%rd2];
ld.global.L1::evict_last.v2.b32 { %r5, %r6 }, [ %rd3 + 0 ];
cp.async.cg.shared.global [ %r9 + 0 ], [ %rd4 + 0 ], 16;
cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd5, {%r2, %r3}], [%r4];
wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%f1}, %rd6, %rd7, 1, 1, 1, 0, 1;
mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f5, %f6, %f7, %f8};
"""
    found = ptx.facts(text, shared=shared)
    assert found.tensor_core_ops == 2
    assert (found.global_loads, found.wide_loads) == (6, 3)


def test_entries_split_a_module_into_its_kernels():
    module = ".version 9.0\n.visible .entry first(\n)\n{\nret;\n}\n.func helper()\n{\n}\n.visible .entry second(\n)\n{\n}\n"
    found = ptx.entries(module)
    assert list(found) == ["first", "second"]
    assert ".func" not in found["first"]


LAUNCHER = """
#define TILE 32
constexpr int ROWS = TILE / 4;   // 8
static const int THREADS = 2 * 128;
template <int PAD> __global__ void tiled(const float* in, float* out) { }
__global__ void flat(float* x) { }
static void launch_flat(float* x, int n) {
    flat<<<(n + THREADS - 1) / THREADS, THREADS>>>(x);
}
extern "C" int tiled_padded(const float* in, float* out, int rows, int cols) {
    dim3 block(TILE, ROWS);
    tiled<1><<<dim3(cols / TILE, rows / TILE), block, 64 * sizeof(float)>>>(in, out);
    return 0;
}
extern "C" int via_helper(float* x, int n) { launch_flat(x, n); return 0; }
extern "C" int unknown_block(float* x, int n, int threads) { flat<<<1, threads>>>(x); return 0; }
"""


def test_launches_are_read_from_the_source(tmp_path):
    (tmp_path / "k.cu").write_text(LAUNCHER)
    found = cuda_launches.read(tmp_path)
    [padded] = found["tiled_padded"]
    assert (padded.kernel, padded.threads, padded.block_x) == ("tiled<1>", 256, 32)
    assert padded.dynamic_shared is None  # sizeof(float) is not evaluated: unknown, not 0
    assert [(launch.kernel, launch.threads) for launch in found["via_helper"]] == [("flat", 256)]
    assert found["unknown_block"][0].threads is None
    assert cuda_launches.evaluate("(BM * BN) / (TM * TN)", {"BM": 128, "BN": 128, "TM": 8, "TN": 8}) == 256
    assert cuda_launches.evaluate("1 << 16", {}) == 65536
    assert cuda_launches.evaluate("n / 0", {"n": 1}) is None


@pytest.mark.skipif(cuda_build.nvcc() is None, reason="needs nvcc to build the transpose solution")
def test_the_transpose_solution_compiled_here():
    build = cuda_build.build(REPO_ROOT / "solutions" / "transpose" / "transpose.cu")
    assert build.resources is not None and build.resources.kernels, "cuobjdump read the library"
    [unpadded] = build.resources.of_launcher("transpose_smem")
    [padded] = build.resources.of_launcher("transpose_padded")
    assert unpadded.kernel.startswith("transpose_tiled_kernel<") and padded.kernel != unpadded.kernel
    assert (unpadded.threads, padded.threads) == (256, 256)
    assert (unpadded.conflicted, unpadded.worst_ways, unpadded.worst_stride, unpadded.worst_kind) == (4, 32, 128, "load")
    assert padded.shared_accesses == 8 and padded.conflicted == 0
    # 32 x 32 floats, and 32 x 33: the driver's reserved kilobyte is not the kernel's own.
    assert (unpadded.shared_bytes, padded.shared_bytes) == (4096, 4224)
    assert all(0 < k.registers <= 255 and k.spill_bytes == 0 for k in (unpadded, padded))


@pytest.mark.skipif(cuda_build.nvcc() is None, reason="needs nvcc to build the GELU solution")
def test_the_gelu_solution_loads_float4():
    build = cuda_build.build(REPO_ROOT / "solutions" / "gelu" / "gelu.cu")
    [kernel] = build.resources.of_launcher("gelu_cuda")
    assert kernel.wide_loads >= 1 and kernel.global_loads >= kernel.wide_loads


def test_demangled_names_keep_their_template_arguments():
    if shutil.which("c++filt") is None and shutil.which("cu++filt") is None:
        pytest.skip("needs c++filt")
    [name] = cuda_resources.demangle(["_Z22transpose_tiled_kernelILi1EEvPKfPfii"], None)
    assert name == "transpose_tiled_kernel<1>"
    assert cuda_resources._same_kernel("transpose_tiled_kernel<1>", "transpose_tiled_kernel<(int)1>")
    assert not cuda_resources._same_kernel("transpose_tiled_kernel<0>", "transpose_tiled_kernel<1>")
    assert cuda_resources._same_kernel("sgemm<BM, BN>", "sgemm<128, 128>")  # unresolved: the base name decides


def test_without_cuobjdump_a_build_has_no_kernels_to_describe(tmp_path, monkeypatch):
    monkeypatch.setattr(cuda_resources, "cuobjdump", lambda compiler: None)
    found = cuda_resources.read(tmp_path / "missing.so", tmp_path / "k.cu", None)
    assert found.kernels == [] and found.of_launcher("anything") == []
