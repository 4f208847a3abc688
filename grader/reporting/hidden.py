"""Cases hidden until the deadline: graded like any other, shown to the student without their inputs.

A case marked `hidden` in assignment.toml (spec.py) keeps its shape, dtype, errors and
where-is-it-wrong map out of everything a student reads before the deadline: the HTML report and
the terminal table show "hidden case N" with its status and points only, and its Gradescope test
carries `visibility = "after_due_date"` (results.py), so Gradescope shows the full test once the
deadline has passed. results.json itself keeps everything, for the course staff.
"""

from __future__ import annotations

import dataclasses

from grader.reporting.results import Grade, TestResult

HIDDEN_OUTPUT = "A hidden case: its inputs and what went wrong are shown after the deadline."


def for_student(grade: Grade) -> Grade:
    """The grade as a student may read it before the deadline."""
    if not any(t.hidden for t in grade.tests):
        return grade
    counts: dict[tuple[str, str], int] = {}
    tests = []
    for test in grade.tests:
        if test.hidden:
            number = counts[(test.assignment, test.part)] = counts.get((test.assignment, test.part), 0) + 1
            test = _redacted(test, number)
        tests.append(test)
    return dataclasses.replace(grade, tests=tests)


def _redacted(test: TestResult, number: int) -> TestResult:
    name = f"{test.assignment}/{test.part}{' (bonus)' if test.bonus else ''}: hidden case {number}"
    return dataclasses.replace(test, name=name, output=HIDDEN_OUTPUT, metrics={})
