"""Tampering: the harness's objects rebound, results cached or aliased, work hidden from the timer.

The hostile submissions under submissions/ prove each check end to end (test_wrong_submissions.py,
and test_gpu.py on a GPU); these tests pin down the pieces: the snapshot that names a rebound
object, the verdicts on a second call's output, and, on a GPU, that a rebound timer changes no
measurement while work on a side stream still shows.
"""

from __future__ import annotations

import statistics
import time

import pytest
import torch

from conftest import SUBMISSIONS, grade, requires_gpu
from grader import cases, judging, timing
from grader.monitor import HarnessSnapshot
from grader.spec import REPO_ROOT, Performance, load_assignment

ASSIGNMENT = load_assignment(REPO_ROOT / "assignments" / "vector_add")
PART = ASSIGNMENT.parts[0]
CASE_INDEX = 1  # 97 float16 values: a CPU-tier case
CASE = PART.cases[CASE_INDEX]
SEED = 12345
OWN_LAUNCH = [{"kernel": "add_kernel", "file": "vector_add.py", "own": True}]


def test_snapshot_names_each_rebound_object_and_forgets_restored_ones(monkeypatch):
    snapshot = HarnessSnapshot.take()
    assert snapshot.changed() == []
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 1e-3)
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    monkeypatch.setattr(judging, "tampering", lambda metrics: None)
    assert snapshot.changed() == ["grader.judging.tampering", "time.perf_counter", "torch.cuda.Event.elapsed_time"]
    monkeypatch.undo()
    assert snapshot.changed() == []


def test_timing_holds_its_own_clocks(monkeypatch):
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    assert timing._perf_counter() > 0.0, "timing must keep the clock it found at import"


def _inputs(seed: int = SEED) -> dict:
    return cases.make_inputs(ASSIGNMENT, PART, CASE, seed, "cpu")


def _right(seed: int = SEED) -> torch.Tensor:
    return cases.reference_output(ASSIGNMENT, PART, _inputs(seed)).to(cases.DTYPES[CASE.dtype])


def _observed(tmp_path, name: str, out: torch.Tensor, **seen) -> dict:
    path = tmp_path / f"{name}.pt"
    torch.save(out, path)
    return {"output": {"type": "Tensor", "file": str(path)}, "modified_inputs": [], "aliases": [], **seen}


def _judge(outcome: dict) -> judging.Verdict:
    return judging.judge_case(ASSIGNMENT, PART, CASE, SEED, {"ops": [], "launches": OWN_LAUNCH, **outcome}, "cpu")


def _with_followup(tmp_path, second: torch.Tensor, **seen) -> dict:
    followup = {"seed": SEED + 1, **_observed(tmp_path, "second", second, **seen)}
    return {**_observed(tmp_path, "first", _right()), "followup": followup}


def test_an_honest_second_call_passes(tmp_path):
    verdict = _judge(_with_followup(tmp_path, _right(SEED + 1), same_as_first=False, reuses_first_output=False))
    assert verdict.ok, verdict.message


def test_the_first_output_again_on_new_inputs_is_a_cached_result(tmp_path):
    verdict = _judge(_with_followup(tmp_path, _right(), same_as_first=True, reuses_first_output=True))
    assert verdict.reason == "tampering" and "cached (by shape or by data_ptr())" in verdict.message


def test_a_right_output_in_the_first_output_s_memory_is_tampering(tmp_path):
    verdict = _judge(_with_followup(tmp_path, _right(SEED + 1), same_as_first=False, reuses_first_output=True))
    assert verdict.reason == "tampering" and "memory of the first call's output" in verdict.message


def test_a_wrong_second_output_that_is_not_the_first_keeps_its_own_reason(tmp_path):
    zeros = torch.zeros_like(_right())
    verdict = _judge(_with_followup(tmp_path, zeros, same_as_first=False, reuses_first_output=False))
    assert verdict.reason == "wrong_result" and verdict.message.startswith("on a second call")


def test_an_output_that_is_an_input_is_tampering_unless_the_input_changed(tmp_path):
    x = _inputs()["x"]
    assert _judge(_observed(tmp_path, "first", x, aliases=["x"])).reason == "tampering"
    changed = _observed(tmp_path, "first", _right(), aliases=["x"], modified_inputs=["x"])
    assert _judge(changed).reason == "input_modified"


def test_a_rebound_harness_object_outranks_every_other_verdict(tmp_path):
    patched = {"objects": ["torch.cuda.Event.elapsed_time"], "at_import": True}
    crashed = {"error": {"reason": "crash", "message": "RuntimeError"}, "patched": patched}
    verdict = _judge(crashed)
    assert verdict.reason == "tampering"
    assert "torch.cuda.Event.elapsed_time was replaced while your file was imported" in verdict.message


def test_a_tensor_subclass_as_the_result_is_tampering():
    verdict = _judge({"output": {"type": "Tensor subclass", "class": "LazySum"}})
    assert verdict.reason == "tampering" and "LazySum" in verdict.message


def _measure(student, n: int = 1 << 24) -> dict:
    pool = [{"x": torch.randn(n, device="cuda"), "y": torch.randn(n, device="cuda")} for _ in range(2)]
    perf = Performance(repetitions=10, pool=2, tiers=((0.8, 1.0),))
    return timing.measure(student, lambda x, y: x + y, pool, perf, keep_at=0)


@requires_gpu
@pytest.mark.gpu
def test_rebound_events_and_clocks_change_no_measurement(monkeypatch):
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 1e-3)
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    samples = _measure(lambda x, y: x + y)["samples"]["student"]
    # 16M float32 sums move 201 MB: tens of microseconds at the least, never the patched 1 us.
    assert statistics.median(samples["event_ms"]) > 0.01
    assert statistics.median(samples["hidden_ms"]) > -0.05, "the wall clock was the patched one"


@requires_gpu
@pytest.mark.gpu
def test_work_on_a_side_stream_shows_as_hidden_time():
    side = torch.cuda.Stream()

    def on_a_side_stream(x, y):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(30):  # about 2 ms of work the timed stream never sees
                out = x + y
        return out

    measured = _measure(on_a_side_stream)
    outcome = {**measured, "copy_gbps": timing.copy_bandwidth(torch.device("cuda"))}
    metrics = judging.speed_metrics(outcome, {"bytes": 3 * 4 * (1 << 24), "flops": 1 << 24})
    assert judging.tampering(metrics) is not None
    assert metrics["student_hidden_ms"] > 1.0, "the synchronized wall clock saw the side stream's work"


@requires_gpu
@pytest.mark.gpu
def test_an_illegal_address_is_a_crash_that_names_the_cuda_error():
    result = grade(SUBMISSIONS / "vector_add" / "illegal_address", ["vector_add"], device="cuda")
    failed = [t for t in result.tests if t.kind == "correctness" and not t.passed]
    assert failed and all(t.reason == "crash" for t in failed)
    assert "illegal memory access" in failed[0].output, failed[0].output
