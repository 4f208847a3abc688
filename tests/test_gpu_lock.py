"""Workers sharing a GPU: correctness phases overlap, a timing phase runs alone and is not starved.

The lock is flock(2) on files, so its rules hold between processes and between separate opens in
one process alike: threads stand in for workers here. The GPU itself is not needed to check who
waits for whom; whether ratios hold while others compile is a measurement for a GPU.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from grader import batch
from grader.gpu_lock import ENVIRONMENT, GpuLock
from grader.grading import AssignmentGrading, Phases, _Budget


def _hold(lock: GpuLock, how: str, log: list, name: str, entered: threading.Event, release: threading.Event):
    with getattr(lock, how)() as waited:
        log.append(f"{name} in")
        log.append(waited)
        entered.set()
        release.wait(10)
    log.append(f"{name} out")


def _start(lock, how, log, name):
    entered, release = threading.Event(), threading.Event()
    thread = threading.Thread(target=_hold, args=(lock, how, log, name, entered, release), daemon=True)
    thread.start()
    return thread, entered, release


def test_correctness_phases_overlap_and_a_timing_phase_waits_for_them(tmp_path):
    lock, log = GpuLock(tmp_path, "0"), []
    first, first_in, first_go = _start(GpuLock(tmp_path, "0"), "shared", log, "A")
    second, second_in, second_go = _start(GpuLock(tmp_path, "0"), "shared", log, "B")
    assert first_in.wait(5) and second_in.wait(5), "two correctness phases hold one GPU at once"
    timing, timing_in, timing_go = _start(lock, "exclusive", log, "T")
    assert not timing_in.wait(0.3), "a timing phase started while correctness phases ran"
    first_go.set()
    second_go.set()
    assert timing_in.wait(5)
    timing_go.set()
    for thread in (first, second, timing):
        thread.join(5)
    assert log[log.index("T in") + 1] >= 0.3, "the timing phase does not say it waited"


def test_a_waiting_timing_phase_goes_before_correctness_phases_that_come_after_it(tmp_path):
    log = []
    reader, reader_in, reader_go = _start(GpuLock(tmp_path, "0"), "shared", log, "A")
    assert reader_in.wait(5)
    timing, timing_in, timing_go = _start(GpuLock(tmp_path, "0"), "exclusive", log, "T")
    time.sleep(0.2)  # the timing phase is waiting now, holding the turnstile
    late, late_in, late_go = _start(GpuLock(tmp_path, "0"), "shared", log, "C")
    assert not late_in.wait(0.3), "a new correctness phase slipped past a waiting timing phase"
    reader_go.set()
    assert timing_in.wait(5) and not late_in.is_set()
    timing_go.set()
    assert late_in.wait(5)
    late_go.set()
    for thread in (reader, timing, late):
        thread.join(5)


def test_each_gpu_has_its_own_lock(tmp_path):
    log = []
    timing, timing_in, timing_go = _start(GpuLock(tmp_path, "0"), "exclusive", log, "T0")
    other, other_in, other_go = _start(GpuLock(tmp_path, "1"), "exclusive", log, "T1")
    assert timing_in.wait(5) and other_in.wait(5), "timing on GPU 1 waited for GPU 0"
    timing_go.set()
    other_go.set()


@pytest.mark.parametrize("phase, held", [("correctness", "shared"), ("timing", "exclusive")])
def test_a_grading_holds_the_lock_per_phase_and_waiting_costs_no_time_limit(tmp_path, phase, held):
    lock = GpuLock(tmp_path, "0")
    grading = SimpleNamespace(settings=SimpleNamespace(gpu_lock=lock), device="cuda", budget=_Budget(60.0),
                              phases=Phases(start=0.0, build=0.0, correctness=0.0, timing=0.0))  # fmt: skip
    log = []
    blocker, blocker_in, blocker_go = _start(GpuLock(tmp_path, "0"), "exclusive", log, "other student's timing")
    assert blocker_in.wait(5)
    deadline = grading.budget.deadline
    threading.Timer(0.4, blocker_go.set).start()
    with AssignmentGrading.gpu(grading, phase):
        log.append("mine")
    blocker.join(5)
    assert grading.phases["waiting"] >= 0.3, "it did not wait for the other student's timing"
    assert grading.budget.deadline - deadline == pytest.approx(grading.phases["waiting"])
    cpu = SimpleNamespace(settings=SimpleNamespace(gpu_lock=lock), device="cpu", budget=_Budget(60.0), phases=Phases())
    with AssignmentGrading.gpu(cpu, phase):
        pass
    assert "waiting" not in cpu.phases, "the CPU tier has no GPU to wait for"


def test_only_workers_that_share_a_gpu_are_given_its_lock(tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    alone = batch.worker_specs("cuda", 2, tmp_path)
    assert all(ENVIRONMENT not in spec["options"]["env"] for spec in alone.values())
    shared = batch.worker_specs("cuda", 4, tmp_path)
    envs = [spec["options"]["env"] for spec in shared.values()]
    assert [env["CUDA_VISIBLE_DEVICES"] for env in envs] == ["0", "1", "0", "1"]
    assert all(env[ENVIRONMENT] == str(tmp_path) for env in envs)
    monkeypatch.setenv(ENVIRONMENT, str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert GpuLock.from_environment().gpu == tmp_path / "gpu-1.lock"
    monkeypatch.delenv(ENVIRONMENT)
    assert GpuLock.from_environment() is None
