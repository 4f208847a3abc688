"""The GPU tier: compiled Triton, bfloat16 and long-row cases, timing. Run with `make test-gpu`.

Skipped with a stated reason on a machine without a CUDA GPU.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import grade, known_wrong, requires_gpu
from test_reference_submissions import bonus
from test_wrong_submissions import assert_diagnoses, assert_passes, expectations, gpu_reasons, in_scope
from grader.reporting.results_json import write_json
from grader.assignment.loading import assignment_names, load_assignments

pytestmark = [pytest.mark.gpu, requires_gpu]


@pytest.fixture(scope="module")
def solutions_grade(repo):
    result = grade(repo / "solutions", assignment_names(), device="cuda")
    if os.environ.get("GPU_RESULTS_DIR"):  # keep the figures of this run, for a handout's Calibration
        write_json(result, Path(os.environ["GPU_RESULTS_DIR"]) / "solutions.json")
    return result


def test_solutions_earn_every_point_on_the_gpu(solutions_grade):
    failures = [f"{t.name}: {t.reason}: {t.output}" for t in solutions_grade.tests if not t.passed]
    assert not failures, "\n".join(failures)
    assert solutions_grade.score == pytest.approx(solutions_grade.max_score + bonus(solutions_grade.tests))


def test_gpu_tier_runs_the_large_cases_and_times_every_benchmark(solutions_grade):
    labels = {t.name for t in solutions_grade.tests}
    assert any("1024x100000" in name for name in labels), "the long-row case runs on the GPU tier"
    speed = [t for t in solutions_grade.tests if t.kind == "performance"]
    assert speed and all(t.metrics.get("student_ms", 0) > 0 for t in speed)
    repetitions = {(a.name, p.name): p.performance.repetitions for a in load_assignments() for p in a.parts
                   if p.benchmarks}  # fmt: skip
    for test in speed:
        # Every repetition timed, twice as many where a result near a tier edge was measured again.
        wanted = repetitions[test.assignment, test.part] * (2 if test.metrics["remeasured"] else 1)
        assert test.metrics["samples"] == wanted, (test.name, test.metrics["samples"], wanted)
        assert test.metrics["copy_gbps"] > 500, "the copy roofline was measured on the device"


def test_starter_on_the_gpu_is_not_implemented_and_not_timed(repo):
    result = grade(repo / "starter", assignment_names(), device="cuda")
    assert result.score == 0
    assert all(t.reason == "not_implemented" for t in result.tests if t.kind in ("correctness", "performance"))


@pytest.mark.parametrize("folder, expect", [pytest.param(f, e, id=f"{f.parent.name}/{f.name}") for f, e in expectations()])
def test_bug_earns_its_reason_on_the_gpu(folder, expect, tmp_path):
    reasons = gpu_reasons(expect)
    result = grade(known_wrong(folder, tmp_path), [folder.parent.name], device="cuda",
                   timeout_s=expect.get("gpu_timeout_s", expect.get("timeout_s")), parts=expect.get("parts"))  # fmt: skip
    failed = [t for t in in_scope(result, expect) if t.kind in ("correctness", "performance") and not t.passed]
    if expect.get("tier") == "cpu":  # the bug is in cases only the CPU tier grades: the GPU's are right
        wrong = {t.name: f"{t.reason}: {t.output[:300]}" for t in failed if t.kind == "correctness"}
        assert not wrong, f"{folder.name} is wrong only in CPU-tier cases, yet the GPU failed {wrong}"
        return
    assert failed, f"{folder.name} passed every case on the GPU"
    wrong_reason = {t.name: f"{t.reason}: {t.output[:300]}" for t in failed if t.reason not in reasons}
    assert not wrong_reason, f"expected {sorted(reasons)}, got {wrong_reason}"
    assert reasons <= {t.reason for t in failed}, f"expected each of {sorted(reasons)}, got {sorted({t.reason for t in failed})}"
    graded = [t for t in in_scope(result, expect) if t.kind == "correctness" and t.graded]
    assert_passes(graded, expect.get("passes", []), every=False)
    assert_diagnoses([t for t in failed if t.kind == "correctness"], expect.get("gpu_diagnosis", expect.get("diagnosis")),
                     tuple(expect.get("gpu_may_diagnose", ())))  # fmt: skip
