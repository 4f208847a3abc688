"""Calibration of the flash_attention assignment on a GPU: the figures its handout records.

Not a test and not the grade (the grade's protocol is grader/child/timing.py, run by `make test-gpu`):
this times the reference solution against each of SDPA's backends with Triton's own
`do_bench` (median of CUDA-event timings, L2 cleared between calls), reports TFLOP/s, and
measures the solution's peak memory at N = 16384. Run it from the repository root on a GPU:

    .venv/bin/python tools/calibrate_flash_attention.py [--json FILE]

FLOPs are the assignment's own count (reference.py): 4 N^2 D per head forward, half of it
causal; 14 N^2 D for a forward plus backward.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "solutions" / "flash_attention"))
sys.path.insert(0, str(ROOT / "assignments" / "flash_attention"))
import flash_attention as solution  # noqa: E402
import reference  # noqa: E402

BATCH, HEADS, SEQ = 4, 32, 4096
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def inputs(d: int, dtype: torch.dtype, causal: bool, grad: bool = False, n: int = SEQ, b: int = BATCH,
           h: int = HEADS) -> dict:  # fmt: skip
    make = reference.attention_grad_inputs if grad else reference.attention_inputs
    generator = torch.Generator(device="cuda").manual_seed(1234)
    return {**make((b, h, n, d), dtype, "contiguous", generator, "cuda"), "causal": causal}


def median_ms(fn) -> float:
    fn()  # compile and autotune outside the timing
    torch.cuda.synchronize()
    return triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median")


def sdpa_forward(backend):
    def run(q, k, v, causal):
        with sdpa_kernel(backend):
            return sdpa(q, k, v, is_causal=causal)

    return run


def sdpa_backward(backend):
    def run(q, k, v, do, causal):
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        with sdpa_kernel(backend):
            return torch.autograd.grad(sdpa(*leaves, is_causal=causal), leaves, do)

    return run


def forward_rows() -> list[dict]:
    rows = []
    for d in (64, 128):
        for name, dtype in DTYPES.items():
            for causal in (False, True):
                args = inputs(d, dtype, causal)
                flops = reference.attention_traffic(**args)["flops"]
                row = {"part": "forward", "d": d, "dtype": name, "causal": causal}
                row["solution_ms"] = median_ms(lambda: solution.flash_attention(**args))
                for label, backend in BACKENDS.items():
                    try:
                        row[f"{label}_ms"] = median_ms(lambda: sdpa_forward(backend)(**args))
                    except RuntimeError as error:  # a backend this build or GPU lacks
                        row[f"{label}_ms"] = None
                        print(f"  {label} unavailable: {str(error)[:120]}")
                rows.append(finish(row, flops))
    return rows


def backward_rows() -> list[dict]:
    rows = []
    for d in (64, 128):
        for causal in (False, True):
            args = inputs(d, torch.bfloat16, causal, grad=True)
            flops = reference.attention_grad_traffic(**args)["flops"]
            row = {"part": "backward", "d": d, "dtype": "bfloat16", "causal": causal}
            row["solution_ms"] = median_ms(lambda: solution.flash_attention_backward(**args))
            for label, backend in BACKENDS.items():
                try:
                    row[f"{label}_ms"] = median_ms(lambda: sdpa_backward(backend)(**args))
                except RuntimeError as error:
                    row[f"{label}_ms"] = None
                    print(f"  {label} unavailable: {str(error)[:120]}")
            rows.append(finish(row, flops))
    return rows


def finish(row: dict, flops: int) -> dict:
    """TFLOP/s of each, and each backend's time over the solution's (above 1: the solution is faster)."""
    for who in ("solution", *BACKENDS):
        ms = row[f"{who}_ms"]
        row[f"{who}_tflops"] = flops / (ms * 1e-3) / 1e12 if ms else None
        if who != "solution":
            row[f"vs_{who}"] = ms / row["solution_ms"] if ms else None
    print(f"{row['part']:8} D={row['d']:3} {row['dtype']:8} causal={row['causal']!s:5} "
          f"solution {row['solution_ms']:.3f} ms {row['solution_tflops']:.0f} TFLOP/s | "
          + " | ".join(f"{b} {row[f'{b}_tflops'] or 0:.0f} TFLOP/s, x{row[f'vs_{b}'] or 0:.2f}" for b in BACKENDS),
          flush=True)  # fmt: skip
    return row


def memory_rows() -> list[dict]:
    """Peak memory of one call beyond its inputs, over the bytes of q, k, v (and do) and the output."""
    rows = []
    for grad in (False, True):
        args = inputs(64, torch.float16, False, grad=grad, n=16384, b=1, h=1)
        call = solution.flash_attention_backward if grad else solution.flash_attention
        call(**args)  # compile and autotune first: their buffers are not the call's
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out = call(**args)
        torch.cuda.synchronize()
        allocated = torch.cuda.max_memory_allocated() - base
        given = sum(t.numel() * t.element_size() for t in args.values() if isinstance(t, torch.Tensor))
        output = out.numel() * out.element_size()
        row = {"part": "backward" if grad else "forward", "n": 16384, "allocated_bytes": allocated,
               "inputs_bytes": given, "output_bytes": output, "peak_over_io": (given + allocated) / (given + output)}
        print(f"memory {row['part']:8} N=16384 D=64: allocated {allocated / 2**20:.1f} MiB, "
              f"peak {row['peak_over_io']:.2f}x the bytes of inputs and output", flush=True)
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write every row here")
    args = parser.parse_args()
    device = torch.cuda.get_device_name()
    print(f"{device}, torch {torch.__version__}, triton {triton.__version__}, B={BATCH} H={HEADS} N={SEQ}")
    rows = memory_rows() + forward_rows() + backward_rows()
    if args.json:
        args.json.write_text(json.dumps({"device": device, "torch": torch.__version__, "triton": triton.__version__,
                                         "rows": rows}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
