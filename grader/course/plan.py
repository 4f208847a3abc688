"""What a batch grades, and what it takes from the gradebook as it stands.

A batch's class outputs are always written from the whole gradebook: every assignment it holds a
grade of for this tier (and those asked for now), for every student of the class. `--assignment`,
`--student` and `--regrade` only choose what is graded now: each other (student, assignment) keeps
the grade stored for the files handed in, or else the student's latest. So a regrade of one
student's one assignment rewrites grades.csv, canvas.csv and similarity.csv as a full rerun would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import grader
from grader.assignment.loading import assignment_names, load_assignments
from grader.assignment.spec import Assignment
from grader.course.gradebook import Entry, Gradebook, Key
from grader.course.intake import Submission
from grader.reporting.results import TestResult


@dataclass(frozen=True)
class Task:
    submission: Submission
    assignment: Assignment
    key: Key


def class_assignments(asked: list[Assignment], book: Gradebook, device: str) -> list[Assignment]:
    """The assignments asked for and every other one the gradebook holds grades of on this tier,
    in the grader's order (assignment_names)."""
    stored = {row[0] for row in book.connection.execute("SELECT DISTINCT assignment FROM grades WHERE device = ?",
                                                         (device,))}  # fmt: skip
    chosen = {a.name: a for a in asked}
    if others := sorted(stored & set(assignment_names()) - set(chosen)):
        chosen.update({a.name: a for a in load_assignments(others)})
    return [chosen[name] for name in assignment_names() if name in chosen]


def refused_tests(assignment: Assignment, problem: str, device: str) -> list[TestResult]:
    """A refused archive loses the assignment's points, each test saying why. What this tier grades for
    nobody (speed on the CPU, parts whose cases are all GPU-tier) stays `no_gpu`, as for everyone."""
    tests = []
    for part in assignment.parts:
        cases_here = any(case.runs_on(device) for case in part.cases)
        rows = [
            ("build", f"load {part.file}", True, 0.0),
            ("correctness", "correctness", cases_here, part.correctness_points),
        ]
        if part.benchmarks:
            rows.append(("performance", "speed", device == "cuda", part.performance_points))
        for kind, name, graded_here, points in rows:
            tests.append(TestResult(assignment.name, part.name, kind, f"{assignment.name}/{part.name}: {name}",
                                    "missing_file" if graded_here else "no_gpu", 0.0, points, problem))  # fmt: skip
    return tests


def tasks(submissions: list[Submission], assignments: list[Assignment]) -> list[Task]:
    return [
        Task(s, a, Key(s.student, a.name, s.content_hash(a.name), grader.__version__))
        for s in submissions
        for a in assignments
    ]


def resume(planned: list[Task], book: Gradebook, device: str, regrade: bool,
           chosen: Callable[[str, str], bool] = lambda student, assignment: True) -> tuple[dict[Key, Entry], list[Task]]:  # fmt: skip
    """What the gradebook already holds, and what is left to grade (everything chosen, with
    --regrade). A (student, assignment) not `chosen` (`--student` or `--assignment` name others) is
    not graded: its stored grade for these files, or else its latest, stands."""
    entries: dict[Key, Entry] = {}
    pending = []
    for task in planned:
        mine = chosen(task.key.student, task.key.assignment)
        entry = None if regrade and mine else book.lookup(task.key, device)
        if entry is None and task.submission.folder is None:  # a refused submission: nothing to run
            tests = refused_tests(task.assignment, task.submission.problem, device)
            machine = {"device": device, "tier": "none: the archive was refused", "grader_version": grader.__version__}
            entry = book.record(task.key, device, tests, machine, 0.0)
        if entry is None and not mine:
            if (entry := book.latest(task.key.student, task.key.assignment, device)) is None:
                continue  # never graded, and not asked for now
        if entry is None:
            pending.append(task)
        else:
            entries[task.key] = entry
    return entries, pending
