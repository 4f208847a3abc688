"""Calibration of the transpose assignment on a GPU: the figures of its handout's Calibration section.

Not a test and not the grade. It times the solution's three launchers (solutions/transpose/transpose.cu,
built with nvcc as the grader builds it) against the device-to-device copy they are graded against
(`x.clone()`), at the benchmark shapes of assignment.toml, with the grader's own protocol
(grader/child/timing.py: interleaved CUDA events, the L2 evicted by reading before every call, fresh
inputs for every call, every timed output checked against the copy's). For each shape it prints each
kernel's median time, GB/s (one read and one write of the matrix) and share of the copy, the credit
that share would earn under each part's tiers, and whether the ladder holds: each kernel earns its own
part's full credit and falls short of the next part's. Run it from the repository root on an H100 or
H200:

    .venv/bin/python tools/calibrate_transpose.py [--json FILE] [--rounds N] [--shapes 8192x8192 ...]
    tools/gpu_session.sh calibrate-transpose          # the same, logged under gpu-logs/

The known-wrong submission tests/submissions/transpose/padding_on_wrong_dimension has the unpadded
tile's layout exactly (rows of 32 words), so transpose_smem's figures stand for it: its expectation,
too_slow, holds only where transpose_smem's share is below transpose_padded's full-credit edge.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grader.assignment import cases  # noqa: E402
from grader.kernels import cuda_build
from grader.child import timing  # noqa: E402
from grader.child.launcher import CudaEntry  # noqa: E402
from grader.assignment.loading import load_assignment  # noqa: E402
from grader.assignment.spec import Assignment, Case, Part

ASSIGNMENT = ROOT / "assignments" / "transpose"
SOLUTION = ROOT / "solutions" / "transpose" / "transpose.cu"
HARNESS = "calibration::harness"


def benchmark_cases(assignment: Assignment, shapes: list[str] | None) -> list[Case]:
    """The shapes to time: those named on the command line, or every part's benchmarks."""
    if shapes:
        return [Case(shape=tuple(int(d) for d in s.split("x")), dtype="float32") for s in shapes]
    found: list[Case] = []
    for part in assignment.parts:
        found += [case for case in part.benchmarks if case not in found]
    return found


def one_round(assignment: Assignment, part: Part, library: Path, case: Case) -> dict:
    """One round of the grader's protocol for one part's launcher against the copy."""
    entry = CudaEntry(assignment, part, library)
    baseline = cases.function(assignment, part.baseline)

    def make_inputs(seed: int) -> dict:
        return cases.make_inputs(assignment, part, case, seed, "cuda")

    measured = timing.measure(lambda fn, **kw: fn(**kw), entry, baseline, make_inputs, part.performance,
                              part.tolerance_for(case.dtype), HARNESS)  # fmt: skip
    wrong = [check.detail for check in measured.checks if not check.agrees]
    if wrong:
        raise RuntimeError(f"{part.entry} at {case.label}: {len(wrong)} timed outputs differ from the copy's: "
                           f"{wrong[0]}")  # fmt: skip
    return {"kernel_ms": statistics.median(measured.student.event_ms),
            "copy_ms": statistics.median(measured.baseline.event_ms)}  # fmt: skip


def row(assignment: Assignment, part: Part, case: Case, rounds: list[dict]) -> dict:
    """A kernel's figures at one shape over the rounds: medians, the range of its share of the copy,
    and the credit that share earns under every part's tiers."""
    matrix = torch.empty(case.shape, dtype=cases.DTYPES[case.dtype], device="meta")
    nbytes = cases.traffic(assignment, part, {"x": matrix})["bytes"]
    shares = [r["copy_ms"] / r["kernel_ms"] for r in rounds]
    kernel_ms = statistics.median(r["kernel_ms"] for r in rounds)
    copy_ms = statistics.median(r["copy_ms"] for r in rounds)
    return {
        "shape": "x".join(map(str, case.shape)), "kernel": part.entry, "kernel_us": kernel_ms * 1e3,
        "kernel_gbps": nbytes / (kernel_ms * 1e-3) / 1e9, "copy_us": copy_ms * 1e3,
        "copy_gbps": nbytes / (copy_ms * 1e-3) / 1e9, "share_min": min(shares), "share_max": max(shares),
        "credit": {p.name: p.performance.credit_for(min(shares)) for p in assignment.parts},
    }  # fmt: skip


def ladder(assignment: Assignment, rows: list[dict]) -> list[str]:
    """Where the provisional tiers fail the ladder: a kernel short of its own part's full credit
    (at its slowest round), or the previous kernel already earning it (at its fastest)."""
    problems = []
    parts = assignment.parts
    for shape in dict.fromkeys(r["shape"] for r in rows):
        at = {r["kernel"]: r for r in rows if r["shape"] == shape}
        for before, part in zip((None, *parts[:-1]), parts):
            full = part.performance.tiers[0][0]
            slowest = at[part.entry]["share_min"]
            if slowest < full:
                problems.append(f"{shape}: {part.entry} at {slowest:.2f} is below its full credit ({full:.2f})")
            if before is not None and at[before.entry]["share_max"] >= full:
                problems.append(f"{shape}: {before.entry} at {at[before.entry]['share_max']:.2f} already earns "
                                f"{part.name}'s full credit ({full:.2f})")  # fmt: skip
    return problems


def print_table(rows: list[dict], copy_gbps: float) -> None:
    print(f"device-to-device copy, 1 GiB (the grader's roofline): {copy_gbps:.0f} GB/s")
    print(f"{'shape':>10} {'kernel':>17} {'us':>9} {'GB/s':>6} {'share of copy':>14} {'copy us':>8} {'copy GB/s':>9}"
          "  credit per part")  # fmt: skip
    for r in rows:
        share = f"{r['share_min']:.3f}-{r['share_max']:.3f}"
        credit = ", ".join(f"{name} {c:.1f}" for name, c in r["credit"].items())
        print(f"{r['shape']:>10} {r['kernel']:>17} {r['kernel_us']:9.1f} {r['kernel_gbps']:6.0f} {share:>14} "
              f"{r['copy_us']:8.1f} {r['copy_gbps']:9.0f}  {credit}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the protocol per kernel and shape")
    parser.add_argument("--shapes", nargs="+", help="ROWSxCOLS shapes to time instead of the benchmarks")
    args = parser.parse_args()
    assignment = load_assignment(ASSIGNMENT)
    shapes = benchmark_cases(assignment, args.shapes)
    built = cuda_build.build(SOLUTION)
    if built.library is None:
        print(f"calibrate_transpose: {SOLUTION.name} did not build ({built.reason}): {built.message}", file=sys.stderr)
        return 1
    print(f"built {SOLUTION.name} with nvcc for {cuda_build.architecture()} ({built.seconds:.1f} s; 0 = cached)")
    if not torch.cuda.is_available():
        print("calibrate_transpose: no CUDA GPU here (torch sees none), so nothing was timed. Run it on an H100 or "
              "H200: tools/gpu_session.sh calibrate-transpose", file=sys.stderr)  # fmt: skip
        return 2
    repetitions = assignment.parts[0].performance.repetitions
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{args.rounds} rounds of {repetitions} timed calls per kernel and shape")  # fmt: skip
    copy_gbps = timing.copy_bandwidth(torch.device("cuda"))
    rows = []
    for case in shapes:
        for part in assignment.parts:
            rounds = [one_round(assignment, part, built.library, case) for _ in range(args.rounds)]
            done = row(assignment, part, case, rounds)
            rows.append(done)
            print(f"  {case.label} {part.entry}: {done['share_min']:.3f}-{done['share_max']:.3f} of the copy",
                  flush=True)  # fmt: skip
    print_table(rows, copy_gbps)
    problems = ladder(assignment, rows)
    print("ladder under the tiers of assignment.toml: " + ("holds" if not problems else "BROKEN"))
    for problem in problems:
        print(f"  {problem}")
    if args.json:
        summary = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
                   "copy_gbps": copy_gbps, "rounds": args.rounds, "rows": rows,
                   "ladder_problems": problems}  # fmt: skip
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
