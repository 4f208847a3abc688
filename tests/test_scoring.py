"""Speed verdicts from raw timings: tiers of credit, borderline re-measurement, tampering.

The GPU produces the samples; the arithmetic that turns them into a grade runs anywhere, so it
is tested here with made-up samples.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from grader.judging import verdicts as judging
from grader.messages.reports import Activity, BenchReport, Followup, Observation, Returned, Timings
from grader.reporting.results import Grade, TestResult, summary_line
from grader.reporting.results_json import gradescope
from grader.assignment.loading import load_assignments
from grader.assignment.spec import Part, Performance

pytestmark = pytest.mark.student

PERF = Performance(repetitions=40, tiers=((0.80, 1.0), (0.60, 0.6), (0.40, 0.3)))


@pytest.mark.parametrize("ratio, credit", [(1.3, 1.0), (0.80, 1.0), (0.79, 0.6), (0.6, 0.6), (0.45, 0.3), (0.39, 0.0)])
def test_credit_follows_the_tiers(ratio, credit):
    assert PERF.credit_for(ratio) == credit


@pytest.mark.parametrize("ratio, borderline", [(0.81, True), (0.77, True), (0.70, False), (1.2, False), (0.41, True)])
def test_results_near_a_tier_edge_are_measured_again(ratio, borderline):
    assert PERF.is_borderline(ratio) is borderline


def _outcome(student_ms: float, baseline_ms: float, student_hidden: float = 0.02, baseline_hidden: float = 0.02):
    return BenchReport(Timings([student_ms] * 40, [student_hidden] * 40), Timings([baseline_ms] * 40, [baseline_hidden] * 40),
                       Activity(), copy_gbps=4000.0)  # fmt: skip


TRAFFIC = {"bytes": 400_000_000, "flops": 100_000_000}  # 0.1 ms at 4000 GB/s


def test_honest_timing_gives_ratio_bandwidth_and_roofline_share():
    metrics = judging.speed_metrics(_outcome(0.125, 0.150), TRAFFIC)
    assert metrics["ratio"] == pytest.approx(1.2)
    assert metrics["gbps"] == pytest.approx(3200.0)
    assert metrics["roofline_share"] == pytest.approx(0.8)
    assert judging.tampering(metrics) is None


def test_the_warm_ups_seconds_are_shown_as_the_child_said_them_within_reason():
    """The child's own account of its warm-up (where a first benchmark's time goes) is untrusted data:
    shown bounded, finite and at most two figures; a child that sends none shows none."""
    honest, hostile = _outcome(0.125, 0.150), _outcome(0.125, 0.150)
    honest.warmup_s = [1.23456, 0.5]
    hostile.warmup_s = [float("nan"), -3.0, 1e300, 7.0]
    assert judging.speed_metrics(honest, TRAFFIC)["warmup_s"] == [1.235, 0.5]
    assert judging.speed_metrics(hostile, TRAFFIC)["warmup_s"] == [0.0]
    assert judging.speed_metrics(_outcome(0.125, 0.150), TRAFFIC)["warmup_s"] is None


def test_where_the_harness_spent_its_seconds_is_shown_by_known_names_within_reason():
    """The child's account of a benchmark's host seconds by what they did (messages/reports.py
    HARNESS_PARTS) is untrusted data too: only the names the harness uses, each bounded and finite."""
    honest, hostile = _outcome(0.125, 0.150), _outcome(0.125, 0.150)
    honest.harness_s = {"inputs": 0.25, "calls": 1.23456, "checks": 0.5, "profile": 0.1}
    hostile.harness_s = {"inputs": float("nan"), "calls": -2.0, "checks": 1e300, "<script>": 9.0}
    assert judging.speed_metrics(honest, TRAFFIC)["harness_s"] == {"inputs": 0.25, "calls": 1.235, "checks": 0.5,
                                                                   "profile": 0.1}  # fmt: skip
    assert judging.speed_metrics(hostile, TRAFFIC)["harness_s"] == {"calls": 0.0, "checks": 1e5}
    assert judging.speed_metrics(_outcome(0.125, 0.150), TRAFFIC)["harness_s"] is None


def test_a_time_under_the_memory_roofline_is_tampering():
    metrics = judging.speed_metrics(_outcome(0.01, 0.15), TRAFFIC)  # 40 TB/s: not physics
    assert "copy bandwidth" in judging.tampering(metrics)


def test_work_hidden_from_the_events_is_tampering():
    metrics = judging.speed_metrics(_outcome(0.06, 0.15, student_hidden=0.9), TRAFFIC)
    assert "outside the timed stream" in judging.tampering(metrics)


def test_launch_overhead_alone_is_not_tampering():
    # A Python-side launch costs some tens of microseconds more host time than torch's.
    metrics = judging.speed_metrics(_outcome(0.12, 0.15, student_hidden=0.06, baseline_hidden=0.02), TRAFFIC)
    assert judging.tampering(metrics) is None


def test_a_compute_bound_benchmark_is_reported_in_tflops():
    matmul = {"bytes": 100_663_296, "flops": 137_438_953_472}  # 4096^3 in float16
    metrics = judging.speed_metrics(_outcome(0.187, 0.180), matmul)
    assert metrics["compute_bound"] and metrics["tflops"] == pytest.approx(735, rel=1e-2)
    assert not judging.speed_metrics(_outcome(0.125, 0.150), TRAFFIC)["compute_bound"]


def test_hidden_time_counts_only_beyond_the_reference_s_own():
    # A slow host: both calls show 0.3 ms that the events did not see. Nothing is hidden.
    metrics = judging.speed_metrics(_outcome(0.12, 0.15, student_hidden=0.30, baseline_hidden=0.30), TRAFFIC)
    assert judging.tampering(metrics) is None
    metrics = judging.speed_metrics(_outcome(0.12, 0.15, student_hidden=0.56, baseline_hidden=0.30), TRAFFIC)
    assert "outside the timed stream" in judging.tampering(metrics)


def test_a_long_call_may_not_hide_a_large_share_of_its_work():
    # 1 ms on the events and 0.8 ms more on the host clock: the events missed 44% of the work.
    # (An honest call's host-only time is a constant, the reference's own; it does not grow.)
    metrics = judging.speed_metrics(_outcome(1.0, 1.2, student_hidden=0.82), TRAFFIC)
    assert "outside the timed stream" in judging.tampering(metrics)
    metrics = judging.speed_metrics(_outcome(1.0, 1.2, student_hidden=0.40), TRAFFIC)
    assert judging.tampering(metrics) is None


def test_a_shown_baseline_is_reported_beside_the_grade_and_a_missing_one_says_why():
    gelu = {p.name: p for p in load_assignments(["gelu"])[0].parts}["gelu"]
    report = _outcome(0.125, 0.150)
    assert judging.shown_metrics(dataclasses.replace(gelu, shown=None), report, 0.125) is None
    report.shown = Timings([0.100] * 10, [0.0] * 10)
    shown = judging.shown_metrics(gelu, report, 0.125)
    assert shown == {"label": "torch.compile", "ms": 0.100, "ratio": pytest.approx(0.8)}
    assert judging.shown_text(shown) == "against torch.compile (0.1000 ms) 0.80x, shown, not graded"
    failed = _outcome(0.125, 0.150)
    failed.shown_error = "BackendCompilerFailed: no C compiler"
    assert judging.shown_metrics(gelu, failed, 0.125) == {"label": "torch.compile", "error": failed.shown_error}
    forged = _outcome(0.125, 0.150)
    forged.shown = Timings([float("nan")] * 10, [0.0] * 10)  # the child's numbers are checked, not trusted
    assert "error" in judging.shown_metrics(gelu, forged, 0.125)


def _test(score: float, max_score: float, bonus: bool = False) -> TestResult:
    return TestResult("a", "p", "correctness", "a/p: case", "ok" if score else "wrong_result", score, max_score, "",
                      bonus=bonus)  # fmt: skip


def test_bonus_points_add_to_the_score_but_not_to_the_points_possible():
    earned = Grade("s", [_test(5.0, 5.0), _test(3.0, 3.0, bonus=True)], {}, 1.0)
    assert (earned.score, earned.max_score) == (8.0, 5.0)
    assert summary_line(earned).startswith("Score 5.00 of 5.00, plus 3.00 bonus points (8.00 in all)")
    missed = Grade("s", [_test(5.0, 5.0), _test(0.0, 3.0, bonus=True)], {}, 1.0)
    assert (missed.score, missed.max_score) == (5.0, 5.0), "a missed bonus costs nothing"
    assert "bonus" in gradescope(earned)["tests"][1]["tags"]


def _memory_part(factor: float | None) -> Part:
    spec = load_assignments(["flash_attention"])[0].parts[0]
    return dataclasses.replace(spec, peak_memory=factor)


def _followup(allocated: int) -> Followup:
    return Followup(0, Observation(Returned("tensor", "Tensor")), allocated)


SLACK = judging.MEMORY_SLACK_BYTES


@pytest.mark.parametrize("allocated, reason", [(1_000, "ok"), (16_000 + SLACK, "ok"), (200_000, "out_of_memory")])
def test_peak_memory_beyond_the_part_s_multiple_is_out_of_memory(allocated, reason):
    inputs = {"q": torch.zeros(1000), "k": torch.zeros(1000), "causal": True}  # 8000 bytes of tensors
    verdict = judging.memory(_memory_part(2.0), inputs, 4000, _followup(allocated), "cpu")
    # Allowed: 2 x (8000 + 4000) = 24000 bytes at the peak, inputs included, and the allocator's slack.
    assert (verdict.reason if verdict else None) == reason
    assert verdict.metrics == {"peak_bytes": 8_000 + allocated, "allowed_bytes": 24_000.0 + SLACK}
    assert judging.memory(_memory_part(None), inputs, 4000, _followup(10**9), "cpu") is None


def test_a_few_small_buffers_do_not_fail_a_tiny_case_by_the_allocator_s_rounding():
    """A 1 x 1 x 1 x 64 attention that keeps its row statistics for a backward: 1408 bytes at the
    peak against 1024 of inputs and output, where torch's allocator rounds each block to 512."""
    inputs = {"q": torch.zeros(64, dtype=torch.float16), "k": torch.zeros(64, dtype=torch.float16),
              "v": torch.zeros(64, dtype=torch.float16)}  # fmt: skip
    verdict = judging.memory(_memory_part(2.0), inputs, 128, _followup(1408 - 384), "cuda")
    assert verdict.ok, verdict.message


def test_memory_figures_are_printed_in_units_that_show_them():
    assert [judging.size(n) for n in (512, 1408, 98_304, 3_355_443, 1_610_612_736)] == \
        ["512 B", "1.4 KiB", "96.0 KiB", "3.2 MiB", "1.50 GiB"]  # fmt: skip
    inputs = {"q": torch.zeros(1000), "k": torch.zeros(1000)}
    verdict = judging.memory(_memory_part(2.0), inputs, 4000, _followup(200_000), "cpu")
    assert "203.1 KiB at the peak" in verdict.message, verdict.message
