"""What a student may read of their gradings, under the course's rules.

- Late: a submission's time is the server's clock when it was accepted; days late and the
  penalty are the course's late policy (course/late.py), as for a batch.
- Hidden cases stay hidden (reporting/hidden.py) until the assignment's due time and every
  extension of it have passed: then every student sees them whole. The staff always do.
- Which submission counts, per assignment ([service] counts): "last", the last graded one made on
  time (or, where none was, the last one); or "best", the one with the most points after its late
  penalty (the later of two equal). A TA's override applies to the counted one.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from grader.course import adjustments, late
from grader.course.config import Course
from grader.course.gradebook import Entry
from grader.course.overrides import Override
from grader.reporting import hidden
from grader.reporting.results import Grade, possible
from grader.service.queue import Row

CLOCK = "the submission service's clock"


@dataclass(frozen=True)
class Graded:
    """A row and the grade the gradebook holds for it (None until it is graded)."""

    row: Row
    entry: Entry | None

    def lateness(self, course: Course) -> late.Lateness | None:
        times = {self.row.student: {self.row.assignment: (self.row.submitted, CLOCK)}}
        return late.lateness(course, self.row.student, self.row.assignment, times)

    def late_days(self, course: Course) -> int:
        found = self.lateness(course)
        return found.days if found else 0

    def points(self, course: Course, override: Override | None = None) -> float | None:
        return None if self.entry is None else round(self.grade(course, override, staff=True).score, 4)

    def max_points(self) -> float | None:
        return None if self.entry is None else round(possible(self.entry.tests), 4)

    def grade(self, course: Course, override: Override | None = None, staff: bool = False,
              now: datetime | None = None) -> Grade:  # fmt: skip
        """The Grade as its reader may see it: late penalty (and `override`) applied; for a student,
        hidden cases redacted until they are revealed."""
        entry, row = self.entry, self.row
        assert entry is not None, "only a graded row has a grade"
        lateness = self.lateness(course)
        forced = {(row.student, row.assignment): override} if override else {}
        mine = adjustments.for_student(row.student, {row.assignment: entry.score}, forced,
                                       {row.assignment: lateness} if lateness else {})  # fmt: skip
        tests = entry.tests
        shown = staff or revealed(course, row.assignment, now or datetime.now(row.submitted.tzinfo))
        if shown and not staff:
            tests = [dataclasses.replace(test, hidden=False) for test in tests]
        grade = Grade(f"submission {row.id}", tests, dict(entry.environment), entry.seconds, mine.adjustments)
        return grade if shown else hidden.for_student(grade)


def revealed(course: Course, assignment: str, now: datetime) -> bool:
    """Whether the assignment's hidden cases may be shown: its due time and every extension are past."""
    if assignment not in course.due:
        return False
    dues = [course.due[assignment]] + [course.due_for(e.student, assignment)[0] for e in course.extensions
                                       if e.assignment in (None, assignment)]  # fmt: skip
    return now >= max(dues)


def counted(gradings: list[Graded], rule: str, course: Course) -> dict[str, Graded]:
    """assignment -> the graded submission that counts, under `rule` ("last" or "best")."""
    chosen: dict[str, Graded] = {}
    for graded in sorted((g for g in gradings if g.entry is not None), key=lambda g: g.row.seq):
        current = chosen.get(graded.row.assignment)
        if current is None or _better(graded, current, rule, course):
            chosen[graded.row.assignment] = graded
    return chosen


def _better(later: Graded, current: Graded, rule: str, course: Course) -> bool:
    if rule == "best":
        return later.points(course) >= current.points(course)
    on_time = later.late_days(course) == 0
    return on_time or current.late_days(course) > 0  # a late one never replaces one made on time


def deadline(course: Course, student: str, assignment: str, now: datetime) -> str:
    """The assignment's deadline as the student stands now: time left, or days late and the late
    days left before the cut-off."""
    found = course.due_for(student, assignment)
    if found is None:
        return "no deadline"
    due, extended = found
    when = f"due {due.isoformat(sep=' ', timespec='minutes')}" + (" (extended)" if extended else "")
    policy = course.late
    if now <= due + policy.grace:
        left = due - now
        return f"{when}: {left.days} day(s) {left.seconds // 3600} h left"
    days = -(-(now - due) // timedelta(days=1))
    text = f"{when}: {days} day(s) late now ({100 * min(policy.per_day * days, policy.limit):.0f}% of the points taken)"
    if policy.cutoff_days is not None:
        left = policy.cutoff_days - (now - due) / timedelta(days=1)
        text += f"; late days left before the cut-off: {math.floor(left)}" if left > 0 else "; past the cut-off: no points"
    return text
