"""A benchmark's figures from the child's raw timings, and what physics says of them: medians,
spread, bandwidth and throughput against the measured copy roofline, and timings too fast or with
host time the events did not see (`tampering`). The child's own accounts of where its seconds
went are shown bounded, never judged."""

from __future__ import annotations

import math
import statistics

from grader.judging import steadiness
from grader.messages.reports import HARNESS_PARTS, BenchReport

FLOOR_FRACTION = 0.5  # a time under half the memory roofline is not physics, it is tampering
COMPUTE_BOUND_INTENSITY = 10.0  # FLOPs per byte


def median(samples: list[float]) -> float:
    return statistics.median(samples) if samples else float("nan")


def _told_seconds(seconds: float) -> float:
    """A finite figure of the child's account of its own seconds, as shown: bounded, to the ms."""
    return round(min(max(seconds, 0.0), 1e5), 3)


def speed_metrics(report: BenchReport, traffic: dict) -> dict:
    """Medians, spread, achieved bandwidth and throughput, and the share of the copy roofline."""
    student, baseline = report.student, report.baseline
    student_ms = max(median(student.event_ms), 1e-6)
    baseline_ms = median(baseline.event_ms)
    nbytes, flops = traffic.get("bytes", 0), traffic.get("flops", 0)
    gbps = nbytes / (student_ms * 1e-3) / 1e9
    return {
        "student_ms": student_ms,
        "baseline_ms": baseline_ms,
        "ratio": baseline_ms / student_ms,
        "student_spread_ms": [min(student.event_ms), max(student.event_ms)],
        "baseline_spread_ms": [min(baseline.event_ms), max(baseline.event_ms)],
        "student_hidden_ms": median(student.hidden_ms),
        "baseline_hidden_ms": median(baseline.hidden_ms),
        "samples": len(student.event_ms),
        "remeasured": report.remeasured,
        "disturbed_retakes": report.disturbed_retakes,
        "retaken": list(report.retaken),
        "gated": report.gated,
        # The parent's own reading of the samples it was sent (steadiness.py).
        "student_disturbed": steadiness.disturbed_count(student.event_ms),
        "hidden_beyond_ms": steadiness.hidden_ms(student.hidden_ms, baseline.hidden_ms, student.event_ms),
        # The parent's own reading of every reference timing it was sent (steadiness.py).
        "reference_disturbed": steadiness.disturbed_count(baseline.event_ms),
        "bytes": nbytes,
        "flops": flops,
        "gbps": gbps,
        "baseline_gbps": nbytes / (baseline_ms * 1e-3) / 1e9,
        "tflops": flops / (student_ms * 1e-3) / 1e12,
        "baseline_tflops": flops / (baseline_ms * 1e-3) / 1e12,
        # Above this many FLOPs per byte the arithmetic units, not memory, set the pace on any
        # current GPU (an H200's ridge is ~164 in float16, ~12 in float32 without TF32).
        "compute_bound": bool(nbytes) and flops / nbytes > COMPUTE_BOUND_INTENSITY,
        "copy_gbps": report.copy_gbps or None,
        "roofline_share": gbps / report.copy_gbps if report.copy_gbps else None,
        "device_name": report.device_name,
        "warmup_s": [_told_seconds(x) for x in report.warmup_s[:2] if math.isfinite(x)] or None,  # shown
        "harness_s": {name: _told_seconds(x) for name in HARNESS_PARTS
                      if math.isfinite(x := report.harness_s.get(name, math.nan))} or None,  # fmt: skip  # shown
    }


def tampering(metrics: dict, witnessed: bool = False) -> str | None:
    """Timing that physics or the host's clock says was tampered with. Host time beyond the events
    takes points only where no witness recorded the child (the witness's record of every kernel
    is the evidence there: witness/judge.py) and after the child took the round again for it: a
    host that lost its core, or another process on the GPU, shows there too."""
    floor_ms = metrics["bytes"] / (metrics["copy_gbps"] * 1e9) * 1e3 if metrics.get("copy_gbps") else 0.0
    if metrics["student_ms"] < FLOOR_FRACTION * floor_ms:
        return (f"{metrics['student_ms']:.4f} ms is under half the time that moving {metrics['bytes']} bytes takes at "
                f"the device's measured copy bandwidth ({floor_ms:.4f} ms): the events did not time the real work")
    hidden = metrics.get("hidden_beyond_ms")
    if hidden is not None and not witnessed:
        rounds = 1 + sum("hidden" in why for why in metrics.get("retaken", []))
        return (f"the host waited {hidden:.3f} ms per call beyond what the CUDA events saw, in each of {rounds} "
                "round(s) timed with the GPU to this grading alone: work ran outside the timed stream (a side "
                "stream, or work left lazy)")  # fmt: skip
    return None
