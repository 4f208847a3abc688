"""course.toml's [service] table, and the roster of who may submit.

    [service]
    students = "students.csv"   # who may submit: a CSV with a `student` column (relative to course.toml)
    per_hour = 10               # submissions a student may make per assignment in any hour
    max_upload_mb = 20          # the largest upload, in MiB
    counts = "last"             # which submission counts: "last" (the last before the deadline) or "best"
    staff = ["ta-alice"]        # names whose tokens see every submission and the class page

A student's name must be one the batch can use as a folder name, exactly as written (the batch's
identity rules: grader/course/identity.py), and no two may read alike, so that the gradebook, the
TA's batch and `override` name them alike. Every error names the file, the table and the key.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from grader.assignment.toml_table import SpecError, Table
from grader.course.config import Course, CourseError
from grader.course import identity

COUNTS = ("last", "best")


@dataclass(frozen=True)
class Rules:
    students: tuple[str, ...]
    staff: tuple[str, ...] = ()
    per_hour: int = 10
    max_upload_mb: float = 20.0
    counts: str = "last"

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 2**20)


def load(course: Course) -> Rules:
    """The service's rules from `course`; CourseError where course.toml has no usable [service]."""
    if course.path is None or not course.service:
        raise CourseError(f"{course.path or 'course.toml'}: the service needs a [service] table naming its "
                          "students (students = \"students.csv\")")  # fmt: skip
    table = Table(course.service, course.path, "service")
    try:
        roster = course.path.parent / table.get("students", str, "the path of a CSV with a `student` column")
        rules = Rules(students=read_roster(roster, table), staff=_staff(table),
                      per_hour=table.positive("per_hour", int, 10), max_upload_mb=table.positive("max_upload_mb", default=20.0),
                      counts=table.choice("counts", COUNTS, "last"))  # fmt: skip
        table.finish()
    except SpecError as error:
        raise CourseError(str(error)) from None
    if clash := set(rules.students) & set(rules.staff):
        raise CourseError(f"{course.path}: [service] key 'staff': {', '.join(sorted(clash))} also in the students' list")
    return rules


def _staff(table: Table) -> tuple[str, ...]:
    names = table.get("staff", list, "a list of names", [])
    if not all(isinstance(name, str) and _safe(name) for name in names):
        raise table.fail("staff", "a list of names, each one a folder name (no separator, no leading dot)")
    return tuple(names)


def _safe(name: str) -> bool:
    return bool(name) and not identity.unsafe(name) and not identity.too_long(name)


def read_roster(path: Path, table: Table) -> tuple[str, ...]:
    """The `student` column of `path`, each name checked; SpecError naming the line of a bad one."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as file:
            reader = csv.DictReader(file)
            if "student" not in (reader.fieldnames or []):
                raise table.fail("students", f"a CSV with a `student` column ({path} has {reader.fieldnames})")
            names = [((row.get("student") or "").strip(), line) for line, row in enumerate(reader, start=2)]
    except (OSError, UnicodeDecodeError) as error:
        raise table.fail("students", f"a readable CSV file ({path}: {error})") from None
    seen: dict[str, str] = {}  # collision key -> the name that gave it
    for name, line in names:
        alike = seen.get(identity.collision_key(name))
        if not _safe(name) or alike is not None:
            why = (("there twice" if alike == name else f"read alike with {alike!r}") if alike is not None
                   else "not a folder name")  # fmt: skip
            raise table.fail("students", f"one student per line, each a folder name that reads like no other ({path}, "
                             f"line {line}: {name!r} is {why})")  # fmt: skip
        seen[identity.collision_key(name)] = name
    return tuple(name for name, _ in names)
