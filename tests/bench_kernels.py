"""`make bench`: your kernels against torch's at the sizes the grader times, with pytest-benchmark.

Each run is saved under .benchmarks/ and compared with the previous one (`--benchmark-autosave
--benchmark-compare`), so you see what your last change did. It is a tool for you, not the
grade: the grade's timing protocol (interleaved runs, L2 flushed, outputs checked) is in
grader/child/timing.py. It needs a GPU: the interpreter's speed says nothing about a kernel's.

    make bench                       # starter/ (your working copy)
    make bench SUBMISSION=path/to/dir
    .venv/bin/python -m pytest tests/bench_kernels.py --submission DIR -k softmax
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

pytest.importorskip("pytest_benchmark", reason="make bench needs pytest-benchmark: .venv/bin/pip install pytest-benchmark")

from grader.assignment import cases  # noqa: E402
from grader.kernels import cuda_build
from grader.child.launcher import CudaEntry  # noqa: E402
from grader.child.submission import SubmissionError, entry_point, load_module  # noqa: E402
from grader.assignment.loading import load_assignments  # noqa: E402

pytestmark = [
    pytest.mark.student,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="benchmarks need a CUDA GPU"),
]


def synchronized_clock() -> float:
    """The clock pytest-benchmark reads: it waits for the GPU first, so a round ends when the
    kernels it launched have finished, not when Python has queued them."""
    torch.cuda.synchronize()
    return time.perf_counter()


def _benchmarks():
    for assignment in load_assignments():
        for part in assignment.parts:
            for index, case in enumerate(part.benchmarks):
                shape = "x".join(map(str, case.shape))
                yield pytest.param(assignment, part, index, id=f"{assignment.name}-{part.name}-{case.dtype}-{shape}")


def _student(submission: Path, assignment, part):
    source = submission / assignment.name / part.file
    if part.is_cuda:
        built = cuda_build.build(source)
        if built.library is None:
            pytest.skip(f"{part.file}: {built.message}")
        return CudaEntry(assignment, part, built.library)
    try:
        return entry_point(load_module(source, f"bench_{assignment.name}_{part.name}"), source, part.entry)
    except SubmissionError as error:
        pytest.skip(f"{part.file}: {error.message}")


@pytest.mark.parametrize("who", ["yours", "torch"])
@pytest.mark.parametrize("assignment, part, index", list(_benchmarks()))
@pytest.mark.benchmark(timer=synchronized_clock, min_rounds=20, warmup=True)
def test_speed(benchmark, submission_dir, assignment, part, index, who):
    case = part.benchmarks[index]
    inputs = cases.make_inputs(assignment, part, case, cases.seed_for(assignment, part, "bench", index), "cuda")
    function = _student(submission_dir, assignment, part) if who == "yours" else cases.function(assignment, part.baseline)
    try:
        function(**inputs)  # compile (and autotune) outside the timed rounds
    except NotImplementedError:
        pytest.skip(f"{part.entry} is not implemented yet")
    benchmark.group = f"{assignment.name}/{part.name} {case.dtype} {'x'.join(map(str, case.shape))}"
    benchmark.extra_info["bytes"] = cases.traffic(assignment, part, inputs).get("bytes", 0)
    benchmark(function, **inputs)
