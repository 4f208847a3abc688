"""The timing protocol's handling of a disturbed GPU, on the CPU with the GPU's clock replaced.

child/timing.py takes a round of timings again where torch's own timings in it say something else
used the GPU (steadiness.py), and the parent says so where the last round was disturbed too. The
CUDA events are replaced here by scripted times: what is tested is which samples are kept.
"""

from __future__ import annotations

import torch

from grader.judging import steadiness
from grader.child import timing
from grader.judging.verdicts import speed_metrics
from grader.messages.reports import Activity, BenchReport, Timings
from grader.assignment.spec import Performance, Tolerance

REPS = 20
# A round of torch timings on an H100 as seen on 2026-11-25: steady within a few percent, one outlier.
STEADY = [0.0627 * (1 + 0.01 * (i % 3)) for i in range(REPS - 1)] + [0.0627 * 2.4]
# 2026-11-25, an H100 in a batch graded one student at a time: samples up to 26x the fastest.
DISTURBED = [0.0627] * (REPS - 6) + [0.0627 * 26] * 6


def _scripted(monkeypatch, rounds: list[list[float]]):
    """Replace the GPU: each timed call returns the next scripted time (the student's always
    0.1 ms), its output the right answer; returns the calls to settle()."""
    reference = iter([ms for one_round in rounds for ms in one_round])
    settled = []

    def timed_call(call, fn, inputs, flush, harness):
        out = call(fn, **inputs)
        return (0.1 if fn is student else next(reference)), 0.01, out, 0

    monkeypatch.setattr(timing, "_timed_call", timed_call)
    monkeypatch.setattr(timing, "_synchronize", lambda: None)
    monkeypatch.setattr(timing, "l2_flush_buffer", lambda device: torch.zeros(4))
    monkeypatch.setattr(timing, "settle", lambda flush: settled.append(flush))
    return settled


def student(x):
    return x * 2


def baseline(x):
    return x * 2


def _measure() -> timing.Measured:
    perf = Performance(repetitions=REPS, tiers=((100.0, 1.0),))  # no ratio near an edge: one round
    return timing.measure(lambda fn, **kw: fn(**kw), student, baseline, lambda seed: {"x": torch.ones(8)}, perf,
                          Tolerance(1e-5, 1e-5, 1e-5), "harness")  # fmt: skip


def test_a_steady_round_with_an_outlier_is_kept():
    assert not steadiness.disturbed(STEADY)
    assert steadiness.disturbed(DISTURBED)


def test_a_round_disturbed_by_something_else_on_the_gpu_is_taken_again(monkeypatch):
    settled = _scripted(monkeypatch, [DISTURBED, STEADY])
    m = _measure()
    assert m.disturbed_retakes == 1 and len(settled) == 1, "the GPU was not settled before the round was taken again"
    assert m.baseline.event_ms == STEADY, "the disturbed round's samples were kept"
    assert len(m.student.event_ms) == len(m.student.hidden_ms) == REPS
    # Every timed call's output was checked, those of the round thrown away too.
    assert len(m.checks) == 2 * REPS and all(check.agrees for check in m.checks)


def test_a_gpu_disturbed_in_every_attempt_keeps_the_last_and_the_parent_says_so(monkeypatch):
    _scripted(monkeypatch, [DISTURBED] * timing.ROUND_ATTEMPTS)
    m = _measure()
    assert m.disturbed_retakes == timing.ROUND_ATTEMPTS - 1
    assert m.baseline.event_ms == DISTURBED
    report = BenchReport(m.student, m.baseline, Activity(), m.checks, disturbed_retakes=m.disturbed_retakes)
    metrics = speed_metrics(report, {"bytes": 1, "flops": 1})
    assert metrics["reference_disturbed"] == 6 and metrics["disturbed_retakes"] == 2


def test_the_parent_reads_disturbance_from_the_samples_not_from_the_child():
    """A child that says it retook nothing cannot hide a disturbed GPU from the parent."""
    report = BenchReport(Timings([0.1] * REPS, [0.0] * REPS), Timings(DISTURBED, [0.0] * REPS), Activity())
    assert speed_metrics(report, {"bytes": 1, "flops": 1})["reference_disturbed"] == 6


def test_the_timed_call_check_compares_where_torch_is_finite_and_by_the_norm():
    """timing.agrees, the check after every timed call: a NaN where torch's output is finite fails;
    one where torch's is NaN too is not compared; the norm-wise difference passes up to
    CHECK_SLACK times the tolerance's norm, and fails just above it."""
    tolerance = Tolerance(rtol=1e-3, atol=1e-5, norm=1e-3)
    theirs = torch.ones(1000)
    assert timing.agrees(theirs.clone(), theirs, tolerance) == (True, "")
    mine = theirs.clone()
    mine[7] = float("nan")
    ok, detail = timing.agrees(mine, theirs, tolerance)
    assert not ok and detail.startswith("NaN or Inf where torch's output")
    both = theirs.clone()
    both[7] = float("nan")
    assert timing.agrees(mine, both, tolerance)[0]
    allowed = timing.CHECK_SLACK * tolerance.norm  # relative to the norm of torch's output, sqrt(1000)
    assert timing.agrees(theirs + 0.99 * allowed, theirs, tolerance)[0]
    ok, detail = timing.agrees(theirs + 1.01 * allowed, theirs, tolerance)
    assert not ok and detail.startswith("relative difference 0.00404 ")
    assert timing.agrees(theirs[:10], theirs, tolerance) == (False, "the output is not a tensor of the reference's shape")
