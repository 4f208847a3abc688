"""The timing protocol's handling of a disturbed GPU, on the CPU with the GPU's clock replaced.

child/timing.py takes a round of timings again where torch's own timings in it say something else
used the GPU (steadiness.py), and the parent says so where the last round was disturbed too. The
CUDA events are replaced here by scripted times: what is tested is which samples are kept.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from pathlib import Path

import pytest
import torch

from conftest import requires_gpu

from grader.judging import steadiness
from grader.child import timing
from grader.judging.speed import speed_metrics, tampering
from grader.messages.reports import Activity, BenchReport, Timings
from grader.assignment.spec import Performance, Tolerance

REPS = 20
# A round of torch timings on an H100 as seen on 2026-11-25: steady within a few percent, one outlier.
STEADY = [0.0627 * (1 + 0.01 * (i % 3)) for i in range(REPS - 1)] + [0.0627 * 2.4]
# 2026-11-25, an H100 in a batch graded one student at a time: samples up to 26x the fastest.
DISTURBED = [0.0627] * (REPS - 6) + [0.0627 * 26] * 6


def _scripted(monkeypatch, rounds: list[list[float]], student_rounds: list[list[float]] | None = None,
              hidden_rounds: list[float] | None = None, gate: object = None):  # fmt: skip
    """Replace the GPU: each timed call returns the next scripted time (the student's 0.1 ms unless
    `student_rounds` says otherwise; the student's host time beyond the events 0.01 ms unless
    `hidden_rounds` gives one per round), its output the right answer; returns the calls to settle()."""
    reference = iter([ms for one_round in rounds for ms in one_round])
    mine = iter([ms for one_round in student_rounds for ms in one_round]) if student_rounds else None
    hidden = iter([ms for ms in hidden_rounds for _ in range(REPS)]) if hidden_rounds else None
    settled = []

    def timed_call(call, fn, inputs, flush, harness, gate=None):
        out = call(fn, **inputs)
        if fn is student:
            return (next(mine) if mine else 0.1), (next(hidden) if hidden else 0.01), out, 0
        return next(reference), 0.01, out, 0

    monkeypatch.setattr(timing, "_timed_call", timed_call)
    monkeypatch.setattr(timing, "_synchronize", lambda: None)
    monkeypatch.setattr(timing, "l2_flush_buffer", lambda device: torch.zeros(4))
    monkeypatch.setattr(timing, "settle", lambda flush: settled.append(flush))
    monkeypatch.setattr(timing, "_gate", lambda: gate)
    witnessed = type("Witnessed", (timing.marks.NoMarks,), {"recording": gate is not None})()
    monkeypatch.setattr(timing.marks, "current", lambda: witnessed)
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


def test_the_quick_norms_agree_with_the_exact_ones_and_give_way_where_they_cannot_hold():
    """timing._norms (float32 sums, three passes) against timing._finite_norms (float64, masks):
    the same figures within far less than CHECK_SLACK's room, in every dtype the assignments
    return; where a sum leaves float32's range, or a half type's difference overflows, or the
    output is not floating point, the quick path says so and the exact one decides."""
    generator = torch.Generator().manual_seed(0)
    theirs = torch.randn(1 << 16, generator=generator)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for size in (1e-4, 1e-2, 1.0):
            mine = theirs + size * torch.randn(theirs.shape, generator=generator)
            quick = timing._norms(mine.to(dtype), theirs.to(dtype))
            exact = timing._finite_norms(mine.to(dtype), theirs.to(dtype))
            assert quick is not None and exact is not None
            assert abs(quick[0] / quick[1] - exact[0] / exact[1]) <= 1e-3 * exact[0] / exact[1] + 1e-7, (dtype, size)
    huge = theirs * 1e20  # a sum of squares past float32's range
    assert timing._norms(huge, huge) is None and timing._finite_norms(huge, huge) == (0.0, pytest.approx(
        float(torch.linalg.vector_norm(huge.double()))))  # fmt: skip
    tolerance = Tolerance(rtol=1e-3, atol=1e-5, norm=1e-3)
    assert timing.agrees(huge.clone(), huge, tolerance) == (True, "")
    opposite = torch.full((8,), 60000.0, dtype=torch.float16)
    assert timing._norms(-opposite, opposite) is None, "a float16 difference past 65504"
    assert not timing.agrees(-opposite, opposite, tolerance)[0]
    counts = torch.arange(100)
    assert timing._norms(counts, counts) is None and timing.agrees(counts.clone(), counts, tolerance) == (True, "")


def _report(m: timing.Measured) -> BenchReport:
    return BenchReport(m.student, m.baseline, Activity(), m.checks, disturbed_retakes=m.disturbed_retakes,
                       retaken=m.retaken, gated=m.gated)  # fmt: skip


def test_a_round_disturbed_for_the_student_alone_is_taken_again(monkeypatch):
    """Issue 51's softmax: the student's samples spread from 0.011 to 0.947 ms while torch's were
    steady, and their median graded. Such a round is taken again, and the steady one grades."""
    spread = [0.011] * (REPS // 2) + [0.5] * (REPS // 2)
    _scripted(monkeypatch, [STEADY, STEADY], student_rounds=[spread, [0.011] * REPS])
    m = _measure()
    assert m.retaken == ["student"] and m.disturbed_retakes == 0
    assert m.student.event_ms == [0.011] * REPS, "the disturbed round's samples were kept"


def test_a_student_whose_every_round_varies_is_graded_on_its_last_with_the_spread_shown(monkeypatch):
    spread = [0.011] * (REPS // 2) + [0.5] * (REPS // 2)
    _scripted(monkeypatch, [STEADY] * timing.ROUND_ATTEMPTS, student_rounds=[spread] * timing.ROUND_ATTEMPTS)
    m = _measure()
    assert m.retaken == ["student"] * (timing.ROUND_ATTEMPTS - 1)
    metrics = speed_metrics(_report(m), {"bytes": 1, "flops": 1})
    assert metrics["student_disturbed"] == REPS // 2 and metrics["student_spread_ms"] == [0.011, 0.5]


def test_host_time_the_events_missed_asks_for_a_retake_and_takes_points_only_unwitnessed(monkeypatch):
    """Four gradings on one H200 cost honest solutions points: the host waited 0.27-0.56 ms beyond
    the events. A round that shows it is taken again; one that clears grades; where it held in
    every round, it takes points only where no witness recorded the child."""
    _scripted(monkeypatch, [STEADY, STEADY], hidden_rounds=[0.6, 0.01])
    m = _measure()
    assert m.retaken == ["hidden"]
    assert tampering(speed_metrics(_report(m), {"bytes": 1, "flops": 1})) is None

    _scripted(monkeypatch, [STEADY] * timing.ROUND_ATTEMPTS, hidden_rounds=[0.6] * timing.ROUND_ATTEMPTS)
    m = _measure()
    metrics = speed_metrics(_report(m), {"bytes": 1, "flops": 1})
    assert "in each of 3 round(s)" in tampering(metrics)
    assert tampering(metrics, witnessed=True) is None, "host time took points where the witness had the evidence"


class _GivingUpGate:
    """A gate whose call waited for the GPU on its first timed call (the student's `.item()`)."""

    def __init__(self):
        self.calls = 0

    def gave_up(self) -> bool:
        self.calls += 1
        return self.calls == 1


def test_a_gate_that_gave_up_times_the_round_again_without_one(monkeypatch):
    _scripted(monkeypatch, [STEADY, STEADY], gate=_GivingUpGate())
    m = _measure()
    assert m.retaken == ["gate"] and m.gate is None and not m.gated
    assert len(m.student.event_ms) == REPS


def test_a_witnessed_child_times_behind_the_gate(monkeypatch):
    class Steady:
        def gave_up(self) -> bool:
            return False

    _scripted(monkeypatch, [STEADY], gate=Steady())
    m = _measure()
    assert m.gated and not m.retaken


def test_the_gate_compiles_for_the_gpu_the_course_grades_on():
    """The gate is Triton of the harness's own (a loop on a volatile load and the GPU's clock):
    it compiles for the target here, without a GPU, and its launches are never logged as a
    submission's (hooks.HARNESS_FILES)."""
    import triton

    from grader.child import gate, hooks
    from grader.child.target import TARGET

    source = triton.compiler.ASTSource(fn=gate._held, signature={"flag": "*i32", "timeout_ns": "i64"}, constexprs={})
    ptx = triton.compile(source, target=TARGET.gpu_target(), options={"num_warps": 1}).asm["ptx"]
    assert "ld.volatile.global" in ptx and "%globaltimer" in ptx
    log = hooks.LaunchLog(Path(gate.__file__).parent)
    with log:
        log.record(gate._held)
    assert log.entries() == []


def _gated_measure(fn, monkeypatch, gated: bool) -> timing.Measured:
    """The timing of `fn` against torch's sum on a GPU, behind the gate or a busy wait."""
    witnessed = type("Witnessed", (timing.marks.NoMarks,), {"recording": gated})()
    monkeypatch.setattr(timing.marks, "current", lambda: witnessed)
    perf = Performance(repetitions=10, tiers=((100.0, 1.0),))

    def make(seed: int) -> dict:
        generator = torch.Generator(device="cuda").manual_seed(seed)
        return {name: torch.randn(1 << 22, device="cuda", generator=generator) for name in ("x", "y")}

    return timing.measure(lambda f, **kw: f(**kw), fn, lambda x, y: x + y, make, perf, Tolerance(1e-5, 1e-9, 1e-6),
                          "grader::harness:gate-test")  # fmt: skip


@requires_gpu
@pytest.mark.gpu
def test_a_host_that_pauses_while_it_launches_costs_nothing_behind_the_gate(monkeypatch):
    """The host away for 3 ms between the start event and the call's launch (another grading on its
    core, a pause of Python's): behind a busy wait the events count it, behind the gate they do not."""
    def paused(x, y):
        time.sleep(0.003)
        return x + y

    behind_gate = statistics.median(_gated_measure(paused, monkeypatch, True).student.event_ms)
    behind_spin = statistics.median(_gated_measure(paused, monkeypatch, False).student.event_ms)
    assert behind_gate < 0.5 < 2.0 < behind_spin, (behind_gate, behind_spin)


@requires_gpu
@pytest.mark.gpu
def test_a_call_that_waits_for_the_gpu_is_timed_without_the_gate(monkeypatch):
    def waits(x, y):
        out = x + y
        float(out[0])  # the host waits for the GPU: behind a closed gate, until the gate gives up
        return out

    m = _gated_measure(waits, monkeypatch, True)
    assert m.retaken == ["gate"] and not m.gated and m.gate is None
    assert statistics.median(m.student.event_ms) < 5.0, "the gate's wait was counted"


def test_every_call_of_torch_s_reference_is_marked_for_the_witness(monkeypatch):
    """A backward's reference runs its kernels on autograd's own thread: unmarked, its warm-up
    calls were work of a thread other than the harness's outside every call, and the witness
    called every benchmark of the child tampered with (FlashAttention's, on an H200)."""
    _scripted(monkeypatch, [STEADY])
    opened = []

    class Recorder(timing.marks.NoMarks):
        @contextlib.contextmanager
        def window(self, role: str = "student"):
            opened.append(role)
            yield len(opened)
            opened.append(None)

    recorder = Recorder()
    monkeypatch.setattr(timing.marks, "current", lambda: recorder)
    unmarked = []

    def reference(x):
        if not opened or opened[-1] != "baseline":
            unmarked.append(x)
        return x * 2

    perf = Performance(repetitions=REPS, tiers=((100.0, 1.0),))
    timing.measure(lambda fn, **kw: fn(**kw), student, reference, lambda seed: {"x": torch.ones(8)}, perf,
                   Tolerance(1e-5, 1e-5, 1e-5), "harness")  # fmt: skip
    assert not unmarked, f"{len(unmarked)} call(s) of the reference ran outside a window of the witness"


def test_the_harness_accounts_for_its_repetitions_by_what_they_did(monkeypatch):
    """The child's account of its benchmark's host seconds (shown, never judged): a repetition's
    fresh inputs, its timed calls and its checks, each summed over the repetitions."""
    _scripted(monkeypatch, [STEADY])
    perf = Performance(repetitions=REPS, tiers=((100.0, 1.0),))

    def slow_inputs(seed):
        time.sleep(0.01)
        return {"x": torch.ones(8)}

    m = timing.measure(lambda fn, **kw: fn(**kw), student, baseline, slow_inputs, perf, Tolerance(1e-5, 1e-5, 1e-5),
                       "harness")  # fmt: skip
    assert set(m.harness_s) == {"inputs", "calls", "checks"}
    assert m.harness_s["inputs"] >= REPS * 0.01, "each repetition's inputs, and not the warm-up's"
    assert m.harness_s["inputs"] > m.harness_s["calls"] + m.harness_s["checks"] > 0


def _scripted_settle(monkeypatch, batch_ms) -> tuple[float, list]:
    """settle() against a scripted GPU: batch k takes batch_ms(k) ms of GPU time, and the host's
    clock advances by as much. Gives the seconds settle() said and the batches it ran."""
    clock, batches = [0.0], []

    def batch(flush) -> float:
        batches.append(batch_ms(len(batches)))
        clock[0] += batches[-1] / 1e3
        return batches[-1]

    monkeypatch.setattr(timing, "_perf_counter", lambda: clock[0])
    monkeypatch.setattr(timing, "_synchronize", lambda: None)
    monkeypatch.setattr(timing, "settle_batch", batch)
    return timing.settle(torch.zeros(4)), batches


def test_a_gpu_already_up_to_speed_settles_for_the_least_time_only(monkeypatch):
    spent, batches = _scripted_settle(monkeypatch, lambda k: 0.6)
    assert timing.SETTLE_MIN_S <= spent < timing.SETTLE_MIN_S + 0.001, spent
    assert len(batches) == pytest.approx(timing.SETTLE_MIN_S / 0.6e-3, abs=1)


def test_a_gpu_whose_clocks_rise_settles_until_its_batches_stop_getting_faster(monkeypatch):
    """Batches twice as slow at first, coming down to speed over about 120 ms (200 batches): the
    settle goes on past its least time, and stops only once they are within 2% of full speed."""
    ramp = lambda k: 0.6 * (2.0 - min(k, 200) / 200)  # noqa: E731
    spent, batches = _scripted_settle(monkeypatch, ramp)
    assert timing.SETTLE_MIN_S < spent < timing.SETTLE_S, spent
    assert batches[-1] < 0.6 * 1.02, f"the settle stopped while a batch took {batches[-1]:.3f} ms, not 0.6"


def test_a_noisy_gpu_at_speed_settles_for_the_least_time(monkeypatch):
    spent, _ = _scripted_settle(monkeypatch, lambda k: 0.6 * (1.0 + 0.05 * (k % 3 == 0)))
    assert timing.SETTLE_MIN_S <= spent < timing.SETTLE_MIN_S + 0.001, spent


def test_a_gpu_still_speeding_up_is_settled_for_the_most_time_then_timed(monkeypatch):
    """Coming down to speed over about 0.45 s (500 batches), every window of batches 1.6% or more
    faster than the one before: never steady, while the settle lasts."""
    spent, _ = _scripted_settle(monkeypatch, lambda k: 0.6 * (2.0 - min(k, 500) / 500))
    assert timing.SETTLE_S <= spent < timing.SETTLE_S + 0.002, spent
