"""`grade` on a GPU grades a submission's assignments side by side (overlap.py).

How many start at once is set by the GPU's memory (each assignment's `gpu_memory_gib` plus what
no cap counts), as many as fit; the gradings themselves are the usual ones, in processes of their
own, and give the verdicts that one after another gives. Who waits for whom on the GPU is
test_gpu_lock.py's; the wall time on a GPU is in docs/measurements.md.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader.running import cpu_share, early_workers, overlap
from grader.grading import Settings, grade_assignment
from grader.assignment.loading import load_assignments
from grader.assignment.spec import REPO_ROOT


def _a(name: str, gib: float):
    return SimpleNamespace(name=name, gpu_memory_gib=gib)


@pytest.mark.parametrize("running, pending, gpu_gib, starts", [
    ([], [("flash_attention", 32), ("softmax", 32)], 10.0, "flash_attention"),  # alone, any fits
    ([("flash_attention", 32)], [("softmax", 32), ("matmul", 8)], 79.2, "softmax"),
    ([("flash_attention", 32), ("softmax", 32)], [("gelu", 10), ("matmul", 8)], 78.0, "matmul"),  # gelu waits
    ([("flash_attention", 32), ("softmax", 32), ("matmul", 8)], [("gelu", 10)], 79.2, None),
    # an H100: five fit (the largest of them first), where largest first started three
    ([], [("flash_attention", 32), ("softmax", 32), ("gelu", 10), ("transpose", 10), ("vector_add", 10),
          ("matmul", 8)], 79.6, "flash_attention"),
    ([("flash_attention", 32)], [("softmax", 32), ("gelu", 10), ("transpose", 10), ("vector_add", 10),
                                 ("matmul", 8)], 79.6, "gelu"),
])  # fmt: skip
def test_a_grading_starts_when_its_cap_fits_beside_the_running_ones(running, pending, gpu_gib, starts):
    found = overlap._next([_a(*p) for p in pending], {i: _a(*r) for i, r in enumerate(running)}, gpu_gib)
    assert (found.name if found else None) == starts


def test_side_by_side_gives_the_verdicts_of_one_after_another(solutions):
    assignments = load_assignments(["vector_add", "transpose"])
    alone = solutions.grade_all([a.name for a in assignments])  # one after another, once a run (conftest.Solutions)
    side = overlap.grade_side_by_side(REPO_ROOT / "solutions", assignments, Settings(device="cpu", parallel=2), 80.0,
                                      grade_assignment)  # fmt: skip
    assert sorted(side) == ["transpose", "vector_add"]
    overlap.join_workers()
    assert not multiprocessing.active_children(), "every worker ended once joined"
    together = [t for a in assignments for t in side[a.name][0]]
    assert [(t.name, t.reason, t.score) for t in together] == [(t.name, t.reason, t.score) for t in alone.tests]
    for name, (_, phases) in side.items():
        assert phases["start"] > 0, f"{name}: its phases came back from its process"


def _imported_grading() -> bool:
    import sys

    return {"torch", "triton", "grader.judging.verdicts", "grader.running.isolation"} <= set(sys.modules)


def _threads_seen() -> tuple[str, int]:
    import os

    import torch

    return os.environ.get("OMP_NUM_THREADS", ""), torch.get_num_threads()


def _leave_a_mark_at_exit(mark: str, quickly: bool) -> None:
    """A worker's initializer: an exit handler of its own (as torch registers at its import), then
    early_workers' hook where `quickly`."""
    import atexit
    from pathlib import Path

    atexit.register(Path(mark).touch)
    if quickly:
        early_workers.end_quickly()


def test_a_worker_ends_without_the_exit_handlers_registered_before_its_hook(tmp_path):
    """What early_workers' initializer registers last skips the interpreter's teardown: a handler
    registered before it (torch's, Triton's) never runs, and the worker still ends, with its results sent."""
    for quickly in (False, True):
        mark = tmp_path / f"ran-{quickly}"
        pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_leave_a_mark_at_exit, initargs=(str(mark), quickly))  # fmt: skip
        with pool:
            assert pool.submit(int, "7").result(timeout=300) == 7
        assert mark.exists() != quickly, f"quickly={quickly}: the handler registered first ran: {mark.exists()}"


def test_a_gpu_grade_starts_its_workers_as_the_command_begins_and_they_import_the_grader(tmp_path, monkeypatch):
    node = tmp_path / "nvidiactl"
    node.touch()
    monkeypatch.setattr(early_workers.os, "cpu_count", lambda: 16)
    for argv in (["grade", "--device", "cpu"], ["grade", "--device=cpu"], ["batch", "x"],
                 ["grade", "--assignment", "gelu"]):  # fmt: skip
        early_workers.start(argv, str(node))
        assert early_workers.take(1) is None, f"{argv}: no side-by-side grading, no workers"
    early_workers.start(["grade", "--submission", "s"], str(tmp_path / "no-such-node"))
    assert early_workers.take(1) is None, "no NVIDIA driver: the CPU tier, no workers"
    early_workers.start(["grade", "--assignment", "gelu", "--assignment=softmax", "--device", "cuda"], str(node))
    assert early_workers.take(3) is None, "two assignments named: two workers, too few for three"
    pool = early_workers.take(2)
    assert pool is not None and early_workers.take(2) is None, "taken once"
    with pool:
        assert pool.submit(_imported_grading).result(timeout=300), "the initializer imported the grader"
        # Its libraries loaded with the grading's share of the cores (cpu_share.py), not a thread per core.
        share = cpu_share.threads(2)
        assert pool.submit(_threads_seen).result(timeout=300) == (str(share), share)
    early_workers.start(["grade"], str(node))  # every assignment of the course: one worker each
    early_workers.close()
    assert early_workers.take(1) is None, "closed: none left to take"


def test_side_by_side_grades_in_the_workers_started_ahead(monkeypatch):
    """grade_side_by_side takes the early pool (it is not left idle beside a second one), tells it
    to end once every grade is in, without waiting for its workers' end, and join_workers waits."""
    used, shut = [], []

    class Pool:
        def shutdown(self, wait=True):
            shut.append(wait)

        def submit(self, fn, *args):
            used.append(args[0].name)
            from concurrent.futures import Future

            future = Future()
            future.set_result(([], {}))
            return future

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(early_workers, "take", lambda size: Pool())
    side = overlap.grade_side_by_side(REPO_ROOT / "solutions", [_a("gelu", 1), _a("softmax", 1)],
                                      Settings(device="cuda", parallel=2), 80.0, grade_assignment)  # fmt: skip
    assert sorted(used) == ["gelu", "softmax"] and sorted(side) == ["gelu", "softmax"]
    assert shut == [False] and [manager for _, manager in overlap._ending] == [None]
    overlap.join_workers()
    assert not overlap._ending


def _ends_slowly(assignment, submission, settings):
    """A worker's grading that returns at once, and whose process then takes 2 s to end, writing
    a file as it does (as a worker whose assignment's folder is still being removed)."""
    import atexit
    import time

    def end() -> None:
        time.sleep(2.0)
        (Path(settings.owner) / f"{assignment.name}.ended").touch()

    atexit.register(end)
    return [], {}


def test_the_results_do_not_wait_for_the_workers_to_end(tmp_path, monkeypatch):
    """grade_side_by_side returns once every grade is in, while its workers still end, and
    join_workers waits for them. Collected at its return, the pool's weakref callback took the lock
    its manager thread holds while it joins the workers on Python 3.12 and later (the GPU image's;
    3.11 joins them outside it): the return waited for their end (0.45 s of a warm GPU grade on an
    H200, between the last verdict and the results)."""
    monkeypatch.setattr(early_workers, "take", lambda size: None)  # a pool of its own, spawned here
    settings = Settings(device="cuda", parallel=2, owner=str(tmp_path))
    side = overlap.grade_side_by_side(REPO_ROOT / "solutions", [_a("gelu", 1), _a("softmax", 1)], settings, 80.0,
                                      _ends_slowly)  # fmt: skip
    assert sorted(side) == ["gelu", "softmax"]
    assert not list(tmp_path.glob("*.ended")), "the results waited for a worker to end"
    overlap.join_workers()
    assert sorted(p.name for p in tmp_path.glob("*.ended")) == ["gelu.ended", "softmax.ended"]
