"""From a student's autograded points to their final points: a TA's override first, then the late penalty.

An override replaces what the tests gave; the late penalty is a share of the points after that, so
a regrade or an override never forgives lateness by accident (an extension in course.toml does).
Each step becomes an `Adjustment` that the report, results.json and grades.csv show.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.course.late import Lateness
from grader.course.overrides import Override
from grader.reporting.results import Adjustment


@dataclass
class StudentCourse:
    """What the course adds to one student's grade."""

    adjustments: list[Adjustment] = field(default_factory=list)
    late: dict[str, tuple[int | None, float]] = field(default_factory=dict)  # assignment -> (days late, points taken)
    overridden: dict[str, float] = field(default_factory=dict)  # assignment -> the points a TA set
    notes: list[str] = field(default_factory=list)


def override_adjustment(override: Override, graded: float) -> Adjustment:
    text = (f"{override.assignment}: set to {override.points:g} points by course staff ({override.made_at}; "
            f"the tests gave {graded:.2f}): {override.reason}")  # fmt: skip
    return Adjustment(override.assignment, "override", override.points - graded, text)


def late_adjustment(assignment: str, lateness: Lateness, points: float) -> tuple[Adjustment, float]:
    """The penalty on `points` (never below zero points) and the points it takes."""
    taken = max(points, 0.0) * lateness.share
    text = f"{assignment}: {lateness.text(taken)}"
    return Adjustment(assignment, "late", -taken if taken else 0.0, text), taken


def for_student(student: str, graded: dict[str, float], overrides: dict[tuple[str, str], Override],
                lateness: dict[str, Lateness]) -> StudentCourse:  # fmt: skip
    """`graded`: the tests' points per assignment; `lateness`: per assignment with a deadline."""
    course = StudentCourse()
    for assignment, points in graded.items():
        if (override := overrides.get((student, assignment))) is not None:
            course.adjustments.append(override_adjustment(override, points))
            points = course.overridden[assignment] = override.points
        if (late := lateness.get(assignment)) is not None:
            adjustment, taken = late_adjustment(assignment, late, points)
            course.adjustments.append(adjustment)
            course.late[assignment] = (late.days if late.submitted is not None else None, taken)
    return course
