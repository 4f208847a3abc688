"""Calibration of the matmul assignment on a GPU, with the grader's own timing protocol.

Not a test and not the grade. Two parts, run in this order (`--part` picks one):
- `matmul_bt`: the solution's block-pointer kernel for a @ b.T (autotuned, as graded) against
  torch.matmul(a, b.T) at 4096^3 in float16 and bfloat16, in TFLOP/s and as a ratio to cuBLAS:
  the figures its tiers are set from. Beside it, for the handout's lesson, two variants at one
  fixed tile: b loaded as stored and transposed in the kernel (tl.trans), and pointer arithmetic
  that reads b.T with consecutive threads along N, its unit stride hidden from the compiler
  (uncoalesced: each thread's 2 bytes in a sector of their own).
- `matmul`: each tile shape of the solution's descriptor kernel, fixed (no autotuner), against
  cuBLAS. It answers which tile the solution should use for a product too small to fill the GPU
  with large tiles (1000^3 has 64 tiles of 128 x 128 for 132 SMs), where the autotuner's own
  timings are close to noise.

Run it from the repository root on a GPU:

    .venv/bin/python tools/calibrate_matmul.py [--part matmul_bt|matmul|all] [--json FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "solutions" / "matmul"))
sys.path.insert(0, str(ROOT))
import matmul as solution  # noqa: E402

from grader.child import timing  # noqa: E402
from grader.assignment.spec import Performance, Tolerance  # noqa: E402

SIZES = (1000, 1024, 2048, 4096)
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
# (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages)
TILES = [
    (128, 256, 64, 8, 3), (128, 128, 64, 8, 4), (128, 128, 64, 4, 4), (128, 64, 64, 4, 4),
    (64, 128, 64, 4, 4), (64, 64, 64, 4, 4), (128, 64, 32, 4, 5), (64, 128, 32, 4, 5),
    (64, 64, 128, 4, 3), (128, 128, 32, 8, 5), (64, 64, 32, 4, 6), (128, 64, 64, 8, 4),
]
PROTOCOL = Performance(repetitions=40, tiers=((1.0, 1.0),), borderline=0.0)


def fixed(block_m: int, block_n: int, block_k: int, warps: int, stages: int):
    """The solution's descriptor kernel with one tile shape, no autotuning."""

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty((m, n), device=a.device, dtype=a.dtype)
        a_desc = TensorDescriptor.from_tensor(a, [block_m, block_k])
        b_desc = TensorDescriptor.from_tensor(b, [block_k, block_n])
        c_desc = TensorDescriptor.from_tensor(c, [block_m, block_n])
        grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
        solution.matmul_tma_kernel[grid](a_desc, b_desc, c_desc, m, n, k, 8 * a.element_size(), BLOCK_M=block_m,
                                         BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=8, num_warps=warps,
                                         num_stages=stages)  # fmt: skip
        return c

    return run


def inputs_maker(size: int, dtype: torch.dtype):
    def make(seed: int) -> dict:
        generator = torch.Generator(device="cuda").manual_seed(seed)
        return {"a": torch.randn(size, size, generator=generator, device="cuda", dtype=dtype),
                "b": torch.randn(size, size, generator=generator, device="cuda", dtype=dtype)}  # fmt: skip

    return make


def ratio(student, make, baseline=torch.matmul) -> tuple[float, float, float]:
    """cuBLAS's median time over the student's, and both medians in microseconds."""
    measured = timing.measure(lambda fn, **kw: fn(**kw), student, baseline, make, PROTOCOL,
                              Tolerance(1e-1, 1e-1, 1e-1), "calibration::harness")  # fmt: skip
    mine, theirs = statistics.median(measured.student.event_ms), statistics.median(measured.baseline.event_ms)
    return theirs / mine, mine * 1e3, theirs * 1e3


# --- matmul_bt: the solution and two variants of the handout's lesson -----------------------------


@triton.jit
def bt_transposed_in_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_bk, stride_cm,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """b's tile loaded as it lies, (BLOCK_N, BLOCK_K) along b's rows, then tl.trans for the dot."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a_tiles = tl.make_block_ptr(a_ptr, (M, K), (stride_am, 1), (pid_m * BLOCK_M, 0), (BLOCK_M, BLOCK_K), (1, 0))
    b_tiles = tl.make_block_ptr(b_ptr, (N, K), (stride_bn, stride_bk), (pid_n * BLOCK_N, 0), (BLOCK_N, BLOCK_K), (1, 0))
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_tiles, boundary_check=(0, 1), padding_option="zero")
        b = tl.load(b_tiles, boundary_check=(0, 1), padding_option="zero")
        accumulator = tl.dot(a, tl.trans(b), accumulator)
        a_tiles, b_tiles = tl.advance(a_tiles, (0, BLOCK_K)), tl.advance(b_tiles, (0, BLOCK_K))
    c_tiles = tl.make_block_ptr(c_ptr, (M, N), (stride_cm, 1), (pid_m * BLOCK_M, pid_n * BLOCK_N), (BLOCK_M, BLOCK_N),
                                (1, 0))  # fmt: skip
    tl.store(c_tiles, accumulator.to(c_ptr.dtype.element_ty), boundary_check=(0, 1))


@triton.jit(do_not_specialize=["stride_bk"])
def bt_uncoalesced(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_bk, stride_cm, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """Pointer arithmetic, b's tile as (BLOCK_N, BLOCK_K) with a stride along K the compiler may not
    take for 1: it gives each thread one element and lines the threads of a warp up along N, so a
    warp's 32 loads of 2 bytes each land K * 2 bytes apart (compiled for sm_90, Triton 3.6)."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k + offs_k)[None, :],
                    mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K), other=0.0)  # fmt: skip
        b = tl.load(b_ptr + offs_n[:, None] * stride_bn + (k + offs_k)[None, :] * stride_bk,
                    mask=(offs_n[:, None] < N) & ((k + offs_k)[None, :] < K), other=0.0)  # fmt: skip
        accumulator = tl.dot(a, tl.trans(b), accumulator)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, accumulator.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


BT_TILE = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4}


def bt_variant(kernel):
    """One of the variants above at BT_TILE, as `fn(a, b)`."""

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        (m, k), n = a.shape, b.shape[0]
        c = torch.empty((m, n), device=a.device, dtype=a.dtype)
        grid = (triton.cdiv(m, BT_TILE["BLOCK_M"]), triton.cdiv(n, BT_TILE["BLOCK_N"]))
        kernel[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), b.stride(1), c.stride(0), **BT_TILE)
        return c

    return run


def calibrate_bt(sizes: list[int], rows: list) -> None:
    """The solution's matmul_bt and the two variants against torch.matmul(a, b.T)."""
    variants = [("solution (autotuned)", solution.matmul_bt),
                ("tl.trans in the kernel", bt_variant(bt_transposed_in_kernel)),
                ("uncoalesced pointers", bt_variant(bt_uncoalesced))]  # fmt: skip
    for size, (name, dtype) in itertools.product(sizes, DTYPES.items()):
        make = inputs_maker(size, dtype)  # b drawn as (N, K): the part's layout
        first = make(size)
        expected = torch.matmul(first["a"].double(), first["b"].double().T)
        flops = 2 * size**3
        for label, fn in variants:
            try:
                error = ((fn(**first).double() - expected).norm() / expected.norm()).item()
                timed = error < 1e-2
                speed, micros, cublas = ratio(fn, make, lambda a, b: torch.matmul(a, b.T)) if timed else (0, 0, 0)
            except Exception as failure:
                speed, micros, cublas, error = 0.0, 0.0, 0.0, float("nan")
                print(f"  {label}: {type(failure).__name__}: {str(failure)[:100]}")
            tflops, cublas_tflops = (flops / (us * 1e-6) / 1e12 if us else 0.0 for us in (micros, cublas))
            rows.append({"part": "matmul_bt", "size": size, "dtype": name, "variant": label, "ratio": speed,
                         "us": micros, "tflops": tflops, "cublas_us": cublas, "cublas_tflops": cublas_tflops,
                         "error": error})  # fmt: skip
            print(f"matmul_bt {size}^3 {name:8} {label:24} {speed:.3f}x cuBLAS  {micros:8.1f} us  {tflops:6.1f} "
                  f"TFLOP/s  (cuBLAS {cublas:.1f} us, {cublas_tflops:.1f} TFLOP/s)  error {error:.1e}", flush=True)


def calibrate_tiles(sizes: list[int], tiles: list, rows: list) -> None:
    """The matmul solution, autotuned, and its descriptor kernel at each tile, against cuBLAS."""
    for size, (name, dtype) in itertools.product(sizes, DTYPES.items()):
        make = inputs_maker(size, dtype)
        first = make(size)
        expected = torch.matmul(first["a"].double(), first["b"].double())
        line = [f"{size}^3 {name:8}"]
        for label, fn in [("autotuned", solution.matmul)] + [("x".join(map(str, t)), fixed(*t)) for t in tiles]:
            try:
                error = ((fn(**first).double() - expected).norm() / expected.norm()).item()
                speed, micros, _ = ratio(fn, make) if error < 1e-2 else (0.0, 0.0, 0.0)
            except Exception as failure:  # a tile that does not fit in shared memory, say
                speed, micros, error = 0.0, 0.0, float("nan")
                print(f"  {label}: {type(failure).__name__}: {str(failure)[:100]}")
            rows.append({"part": "matmul", "size": size, "dtype": name, "tile": label, "ratio": speed, "us": micros,
                         "error": error})  # fmt: skip
            line.append(f"{label} {speed:.2f}x {micros:.1f}us")
        print(" | ".join(line), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--part", choices=("all", "matmul_bt", "matmul"), default="all")
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES, help="square sizes to time (matmul)")
    parser.add_argument("--bt-sizes", type=int, nargs="+", default=[4096], help="square sizes to time (matmul_bt)")
    parser.add_argument("--autotuned-only", action="store_true", help="the solution as it is, no fixed tiles")
    args = parser.parse_args()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    rows = []
    if args.part in ("all", "matmul_bt"):
        calibrate_bt(args.bt_sizes, rows)
    if args.part in ("all", "matmul"):
        calibrate_tiles(args.sizes, [] if args.autotuned_only else TILES, rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
