"""The grader's witness on the GPU (grader/witness): with the child's guard switched off, standing for
student code in full control of its process, a forged report, work done by numpy on the host and
cuBLAS called through ctypes still lose their points, and the reference solutions keep theirs (each
timed ratio the events tell checked against the witness's). Run with `make test-gpu`."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from conftest import requires_gpu
from grader.grading import Settings, grade_submission
from grader.assignment.loading import load_assignments
from grader.witness import build

pytestmark = [pytest.mark.gpu, requires_gpu]
HERE = Path(__file__).parent
UNGUARDED = sorted(HERE.glob("unguarded/*/*/expect.toml"))
# The witness's attacks; the others (`witness = false`) are caught by other evidence the child cannot rewrite.
ATTACKS = [e for e in UNGUARDED if tomllib.loads(e.read_text()).get("witness", True)] + [
    HERE / "submissions/vector_add/cublas_through_ctypes/expect.toml"]
REWRITES = HERE / "unguarded/vector_add/rewrites_its_outputs_file"


def unguarded(submission: Path, assignment: str):
    settings = Settings(device="cuda", unguarded=True, witness=True)
    return grade_submission(submission, load_assignments([assignment]), settings)


def test_the_witness_builds_here():
    found = build.library()
    assert isinstance(found, build.Library), found
    assert "R:" in found.callbacks and "D:" in found.callbacks


# Measured on an H200 (2026-11-28): forges_the_report lost every point to the witness; cuBLAS through
# ctypes and the numpy round trip (then without its float32 detour, so numpy crashed on bfloat16)
# lost every point but not every one by the witness's verdict. The cuBLAS run is not understood yet.
UNSETTLED = {"cublas_through_ctypes": "an H200 run gave some case a verdict other than the witness's; cause not found"}


@pytest.mark.parametrize("expect", [pytest.param(e, marks=pytest.mark.xfail(reason=UNSETTLED[e.parent.name], strict=False))
                                    if e.parent.name in UNSETTLED else e for e in ATTACKS],
                         ids=lambda p: p.parent.name)  # fmt: skip
def test_an_attack_loses_its_points_with_the_guard_off(expect):
    folder = expect.parent
    result = unguarded(folder, folder.parent.name)
    graded = [t for t in result.tests if t.kind == "correctness"]
    assert graded and not any(t.passed for t in graded), [(t.name, t.reason) for t in graded]
    # The attack on forbidden work is named by the witness, whatever the child says.
    reason = "forbidden_op" if folder.name == "cublas_through_ctypes" else tomllib.loads(expect.read_text())["reason"]
    assert {t.reason for t in graded} == {reason}, [(t.name, t.reason, t.output[:200]) for t in graded]
    assert all("witness" in t.output for t in graded), [(t.name, t.output[:300]) for t in graded]


def test_outputs_rewritten_in_the_memory_file_they_cross_in_are_tampering_with_the_guard_off():
    """A thread of the submission's writes zeros over the memory file a GPU child's outputs cross in
    (kept_file.py), again and again: every output it reached after the harness fingerprinted it is
    tampering, the fingerprint's word, and none is judged a wrong result on the zeros."""
    result = unguarded(REWRITES, "vector_add")
    failed = [t for t in result.tests if t.kind in ("correctness", "performance") and t.graded and not t.passed]
    listed = "\n".join(f"{t.name}: {t.reason}: {t.output}" for t in failed)
    cases = [t for t in failed if t.kind == "correctness"]
    assert cases, "the thread rewrote no output before it was read"
    assert all(t.reason == "tampering" and "rewrote the file" in t.output for t in cases), listed
    # A part whose cases failed is not timed, and says why.
    assert all(t.reason == "tampering" and "correctness must pass first" in t.output for t in failed
               if t.kind == "performance"), listed  # fmt: skip


def test_the_solution_keeps_every_point_with_the_guard_off(repo):
    result = unguarded(repo / "solutions", "vector_add")
    failures = [f"{t.name}: {t.reason}: {t.output[:300]}" for t in result.tests if not t.passed]
    assert not failures, failures
    speed = [t for t in result.tests if t.kind == "performance"]
    assert speed and all(t.metrics["student_ms"] > 0 for t in speed)
