"""The small process that Nsight Compute wraps for `make profile`: one timed case of one part, once.

    python -m grader.child.profiled '{"assignment": DIR, "submission": DIR, "part": NAME, "index": I, "library": PATH}'

It loads the student's entry point (or, for a CUDA C part, the library the grader built), makes
the benchmark's inputs on the GPU, calls it twice unprofiled (Triton compiles and autotunes
there), then once between cudaProfilerStart and cudaProfilerStop: run under `ncu
--profile-from-start off`, only the kernels of that one call are profiled. No sandbox, no
guard, no grading: it is advice the student asks for on their own code, on their own machine
(grader/kernels/profiling.py). It prints one JSON line: {"ok": true} or {"ok": false, "error": "..."}.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

WARMUP_CALLS = 2  # the first compiles (and autotunes); the second runs what the profiled call will


def run(job: dict) -> None:
    import torch

    from grader.assignment import cases
    from grader.child.launcher import CudaEntry
    from grader.child.submission import entry_point, load_module
    from grader.assignment.loading import load_assignment

    assignment = load_assignment(Path(job["assignment"]))
    part = next(p for p in assignment.parts if p.name == job["part"])
    if part.is_cuda:
        entry = CudaEntry(assignment, part, Path(job["library"]))
    else:
        path = Path(job["submission"]) / assignment.name / part.file
        entry = entry_point(load_module(path, f"student_{assignment.name}_{part.name}"), path, part.entry)
    case = part.benchmarks[job["index"]]
    inputs = cases.make_inputs(assignment, part, case, cases.seed_for(assignment, part, "bench", job["index"]), "cuda")
    with torch.no_grad():
        for _ in range(WARMUP_CALLS):
            entry(**inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        entry(**inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


def main(argv: list[str]) -> int:
    try:
        run(json.loads(argv[0]))
    except Exception as error:  # the student's code, or a GPU that is not there: said, not raised
        print(json.dumps({"ok": False, "error": f"{type(error).__name__}: {error}"[:2000]}), flush=True)
        return 1
    print(json.dumps({"ok": True}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
