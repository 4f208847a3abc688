"""The batch's time left (grader/course/eta.py) on a class whose assignments cost different times:
a schedule of two workers played against a clock of its own, and the estimate read after each task."""

from __future__ import annotations

import pytest

from grader.assignment.loading import load_assignments
from grader.course import eta
from grader.course.gradebook import Gradebook, Key

# Seconds each assignment's task took in a CPU-tier batch of students who had worked on some of
# it (the starter's parts fail fast, a worked-on part runs its cases through the interpreter).
SECONDS = {"flash_attention": 16.0, "gelu": 12.0, "matmul": 20.0, "softmax": 9.0, "transpose": 3.0, "vector_add": 4.0}
STUDENTS = 4


def _schedule(tasks: list[str], workers: int) -> list[tuple[float, str, float]]:
    """When each task finishes and what it took, the workers taking the tasks in order as each
    comes free (as Dask hands out a batch's tasks), every other student a little slower."""
    free = [0.0] * workers
    done = []
    for index, assignment in enumerate(tasks):
        worker = free.index(min(free))
        seconds = SECONDS[assignment] * (1.2 if index // len(SECONDS) % 2 else 1.0)
        free[worker] += seconds
        done.append((free[worker], assignment, seconds))
    return sorted(done)


def test_the_time_left_holds_when_the_cheap_tasks_finish_first():
    """Issue 54: a batch said 1:20 left at 2 of 24 and took 3:02: the tasks done first were the
    cheap ones, and the rate of tasks finished promised the same of the costly ones."""
    names = sorted(SECONDS, key=SECONDS.get)  # the cheap ones handed out first
    assert sorted(names) == sorted(a.name for a in load_assignments()), "a new assignment: give it a time here"
    limits = {a.name: a.cpu_timeout_s for a in load_assignments()}
    tasks = [name for _ in range(STUDENTS) for name in names]
    finished = _schedule(tasks, workers=2)
    end = finished[-1][0]
    now = [0.0]
    estimate = eta.Estimate(tasks, 2, limits, clock=lambda: now[0])
    assert estimate.remaining() is None, "nothing is known before the first task finishes"
    misses, naive = [], []  # relative errors after each task
    for count, (at, assignment, seconds) in enumerate(finished, 1):
        now[0] = at
        estimate.finished(assignment, seconds)
        if (truth := end - at) > 0:  # two tasks may finish together at the end
            misses.append(abs(estimate.remaining() - truth) / truth if truth > 10 else 0.0)  # the last seconds: any
            naive.append(abs((len(finished) - count) * at / count - truth) / truth)  # tasks left at the rate so far
    assert naive[1] > 0.5, "the schedule's cheap tasks come first, as in the issue"
    assert misses[1] < 0.1 and max(misses[1:]) < 0.4, [round(m, 2) for m in misses]
    assert estimate.remaining() == 0.0


def test_an_assignment_graded_before_starts_from_its_time_then(tmp_path):
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        for student, seconds in (("a", 10.0), ("b", 14.0), ("c", 0.0)):  # c: a refused archive, no time
            book.record(Key(student, "matmul", "h", "v"), "cpu", [], {}, seconds)
        book.record(Key("a", "matmul", "h2", "v"), "cuda", [], {}, 99.0)
        known = book.mean_seconds("cpu")
    assert known == {"matmul": pytest.approx(12.0)}
    now = [0.0]
    estimate = eta.Estimate(["matmul", "matmul", "softmax"], 1, {"matmul": 900, "softmax": 180}, known, lambda: now[0])
    assert estimate.remaining() is None, "softmax has no time yet, measured or stored"
    now[0] = 18.0
    estimate.finished("matmul", 18.0)
    # The second matmul starts now and costs 18 s (measured here); softmax 18 / 900 of its 180 s limit.
    assert estimate.remaining() == pytest.approx(18.0 + 3.6)
