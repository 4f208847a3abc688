"""Calibration of the matmul assignment on a GPU: each tile shape of the solution's descriptor
kernel, fixed (no autotuner), timed against cuBLAS with the grader's own protocol.

Not a test and not the grade. It answers which tile the solution should use for a product too
small to fill the GPU with large tiles (1000^3 has 64 tiles of 128 x 128 for 132 SMs), where the
autotuner's own timings are close to noise. Run it from the repository root on a GPU:

    .venv/bin/python tools/calibrate_matmul.py [--json FILE]
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
from triton.tools.tensor_descriptor import TensorDescriptor

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "solutions" / "matmul"))
sys.path.insert(0, str(ROOT))
import matmul as solution  # noqa: E402

from grader.child import timing  # noqa: E402
from grader.spec import Performance, Tolerance  # noqa: E402

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


def ratio(student, make) -> tuple[float, float]:
    """cuBLAS's median time over the student's, and the student's median in microseconds."""
    measured = timing.measure(lambda fn, **kw: fn(**kw), student, lambda a, b: torch.matmul(a, b), make, PROTOCOL,
                              Tolerance(1e-1, 1e-1, 1e-1), "calibration::harness")  # fmt: skip
    mine = statistics.median(measured.student.event_ms)
    return statistics.median(measured.baseline.event_ms) / mine, mine * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES, help="square sizes to time")
    parser.add_argument("--autotuned-only", action="store_true", help="the solution as it is, no fixed tiles")
    args = parser.parse_args()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    rows = []
    tiles = [] if args.autotuned_only else TILES
    for size, (name, dtype) in itertools.product(args.sizes, DTYPES.items()):
        make = inputs_maker(size, dtype)
        first = make(size)
        expected = torch.matmul(first["a"].double(), first["b"].double())
        line = [f"{size}^3 {name:8}"]
        for label, fn in [("autotuned", solution.matmul)] + [("x".join(map(str, t)), fixed(*t)) for t in tiles]:
            try:
                error = ((fn(**first).double() - expected).norm() / expected.norm()).item()
                speed, micros = ratio(fn, make) if error < 1e-2 else (0.0, 0.0)
            except Exception as failure:  # a tile that does not fit in shared memory, say
                speed, micros, error = 0.0, 0.0, float("nan")
                print(f"  {label}: {type(failure).__name__}: {str(failure)[:100]}")
            rows.append({"size": size, "dtype": name, "tile": label, "ratio": speed, "us": micros, "error": error})
            line.append(f"{label} {speed:.2f}x {micros:.1f}us")
        print(" | ".join(line), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
