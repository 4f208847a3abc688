"""When each student submitted, and what lateness costs under the course's policy.

A submission's time comes from Gradescope's export (`:created_at:` of each submission in
submission_metadata.yml) or from a CSV beside the submissions with a `student` and a
`submitted_at` column (and, optionally, an `assignment` column for a time per assignment). A
folder's own timestamps are never used: copying or unpacking a class changes them. Where no time
is known, no penalty is taken and the report says so, never silently.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from grader.course import intake
from grader.course.config import Course, CourseError, parse_time

EVERY = "*"  # a time that holds for every assignment of the submission
# Gradescope writes nine digits of fraction and a space before the offset; fromisoformat wants neither.
_GRADESCOPE_TIME = re.compile(r"^(\S+ \d\d:\d\d:\d\d)(?:\.(\d+))?\s*([+-]\d\d:?\d\d|Z|UTC)?$")


@dataclass(frozen=True)
class Lateness:
    """One student's standing against one assignment's deadline."""

    due: datetime  # the student's own, any extension included
    extended: bool
    submitted: datetime | None  # None: no time is known
    source: str  # where the time came from
    days: int  # days late, a part day counting whole; 0 when on time
    share: float  # of the points earned, taken

    def text(self, points_taken: float) -> str:
        due = f"due {self.due.isoformat(sep=' ', timespec='minutes')}" + (" (extended)" if self.extended else "")
        if self.submitted is None:
            return f"Late policy: no submission time is known ({due}): no penalty was taken."
        when = f"submitted {self.submitted.isoformat(sep=' ', timespec='minutes')} ({self.source})"
        if not self.days:
            return f"On time: {when}, {due}."
        taken = "every point (past the cut-off)" if self.share >= 1 else f"{100 * self.share:.0f}% of the points earned"
        cost = f"-{points_taken:.2f} points" if points_taken > 0 else "no points were earned, so none were taken"
        return f"Late by {self.days} day(s): {when}, {due}; {taken}: {cost}."


def gradescope_time(value: object) -> datetime | None:
    """`:created_at:` as PyYAML reads it (a datetime) or as Gradescope writes it (text)."""
    if isinstance(value, datetime):
        return value
    found = _GRADESCOPE_TIME.match(str(value).strip())
    if not found:
        return None
    stamp, fraction, offset = found.groups()
    text = stamp + (f".{fraction[:6]}" if fraction else "") + ("+00:00" if offset in ("Z", "UTC") else offset or "")
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


Times = dict[str, dict[str, tuple[datetime, str]]]  # student -> assignment (or EVERY) -> (time, its source)


def submission_times(directory: Path, submissions: list, course: Course) -> tuple[Times, list[tuple[str, str]]]:
    """student -> assignment (or EVERY) -> (time, where it came from); and what could not be read,
    for the TA, as (the student it costs, or '', why): a table or a row that cannot be read costs
    the students it names their time (no penalty is taken, and their report says no time is
    known), never the batch."""
    times: dict[str, dict[str, tuple[datetime, str]]] = {}
    problems: list[tuple[str, str]] = []
    metadata = directory / intake.GRADESCOPE_METADATA
    if metadata.is_file():
        found = intake._gradescope_metadata(metadata)  # the one reader of Gradescope's YAML
        for submission in submissions:
            created = gradescope_time(found.get(submission.source.name, {}).get(":created_at"))
            if created is not None:
                times.setdefault(submission.student, {})[EVERY] = (created, "Gradescope")
    students = {s.student for s in submissions}
    for table in sorted(directory.glob("*.csv")):
        if table.is_symlink() or not table.is_file():  # a student's folder called mallory.csv is a submission
            continue
        try:
            for row, where in _time_rows(table):
                student = row["student"].strip()  # exactly as the batch names the student (identity.py)
                if student not in students:
                    continue
                try:
                    when = parse_time(row["submitted_at"], course.time_zone, where)
                except CourseError as error:
                    problems.append((student, f"{error}: no submission time is taken from it"))
                    continue
                times.setdefault(student, {})[(row.get("assignment") or "").strip() or EVERY] = (when, table.name)
        except (OSError, csv.Error) as error:
            problems.append(("", f"{table}: cannot be read as a table of submission times ({error}): no time is "
                                 "taken from it"))  # fmt: skip
    return times, problems


def _time_rows(table: Path):
    """The rows of a CSV that has `student` and `submitted_at` columns (other CSVs are not ours)."""
    with table.open(newline="", encoding="utf-8-sig", errors="replace") as file:
        reader = csv.DictReader(file)
        if not {"student", "submitted_at"} <= set(reader.fieldnames or []):
            return
        for line, row in enumerate(reader, start=2):
            if (row.get("student") or "").strip() and (row.get("submitted_at") or "").strip():
                yield row, f"{table}: line {line}"


def lateness(course: Course, student: str, assignment: str, times: dict) -> Lateness | None:
    """The student's lateness on the assignment; None where the course sets no deadline for it."""
    due = course.due_for(student, assignment)
    if due is None:
        return None
    mine = times.get(student, {})
    submitted, source = mine.get(assignment) or mine.get(EVERY) or (None, "")
    if submitted is None:
        return Lateness(due[0], due[1], None, "", 0, 0.0)
    days, share = course.late.share_taken(submitted - due[0])
    return Lateness(due[0], due[1], submitted.astimezone(due[0].tzinfo), source, days, share)

