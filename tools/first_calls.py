"""Each correctness case's first and second call, in a plain process (no sandbox, guard or witness).

    python tools/first_calls.py ASSIGNMENT [--cache DIR] [--json out.json]

Calls the solution's entry point for every GPU-tier case of ASSIGNMENT, twice each, in the order the
grader runs them, with Triton's cache in DIR (default: a new folder, so the first run compiles), and
prints each call's host seconds (synchronized). Run it twice with one --cache: the second run's
first calls are what Triton and CUDA cost a warm grading's correctness child for each new kernel,
without the grader's harness, to set beside the cases' `seconds` in a grading's results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignment")
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.environ["TRITON_CACHE_DIR"] = str(args.cache or tempfile.mkdtemp(prefix="first-calls-"))
    began = time.perf_counter()
    import torch

    from grader.assignment import cases
    from grader.assignment.loading import load_assignments
    from grader.child.submission import entry_point, load_module

    assignment = load_assignments([args.assignment])[0]
    imported = time.perf_counter() - began
    torch.cuda.init()
    torch.empty(1, device="cuda")
    cuda_s = time.perf_counter() - began - imported
    rows = []
    for part in assignment.parts:
        if part.is_cuda:
            continue
        path = REPO / "solutions" / assignment.name / part.file
        entry = entry_point(load_module(path, f"solution_{part.name}"), path, part.entry)
        for index, case in enumerate(part.cases):
            if not case.runs_on("cuda"):
                continue
            inputs = cases.make_inputs(assignment, part, case, cases.seed_for(assignment, part, "case", index), "cuda")
            torch.cuda.synchronize()
            times = []
            for _ in range(2):
                start = time.perf_counter()
                entry(**inputs)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - start)
            rows.append({"part": part.name, "case": index, "first_s": times[0], "second_s": times[1]})
            print(f"{part.name:>18} {index:3d}  first {times[0] * 1e3:8.1f} ms  second {times[1] * 1e3:7.1f} ms")
    total = sum(r["first_s"] for r in rows)
    print(f"imports {imported:.2f} s, CUDA's start {cuda_s:.2f} s, first calls {total:.2f} s in all")
    if args.json:
        args.json.write_text(json.dumps({"imports_s": imported, "cuda_s": cuda_s, "calls": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
