"""course.toml: what a course decides around the grade, in one file that `batch --course` names.

    [course]
    salt_file = "secret/salt.txt"      # the course's secret (inputs, pseudonyms); relative to this file
    time_zone = "America/New_York"     # of due times written without an offset (default UTC)

    [late]                             # omit for no penalty (lateness is still shown)
    per_day = 0.10                     # share of the points earned taken per day late, a part day counting whole
    limit = 0.50                       # at most this share in all
    cutoff_days = 7                    # later than this many days: zero points
    grace_minutes = 5                  # this late still counts as on time

    [assignments.NAME]                 # NAME: an assignment's folder name
    due = "2026-10-02 23:59"           # or 2026-10-02T23:59:00-04:00, or a TOML date-time
    canvas_column = "Lab 2 (482113)"   # the Canvas gradebook column (default: the assignment's name)

    [[extensions]]
    student = "alice@example.edu"
    assignment = "NAME"                # omit: every assignment
    days = 2                           # or due = "2026-10-05 12:00"

    [similarity]
    threshold = 0.5                    # flag a pair at or above this similarity (0..1)
    references = ["../fall-2025/submissions"]   # earlier terms: a folder per student, laid out like starter/
    boilerplate = []                   # given code besides starter/ that every student may share

    [leaderboard]
    enabled = true

    [canvas]
    roster = "canvas-roster.csv"       # Canvas's gradebook export: batch writes canvas.csv to import
    match = "SIS Login ID"             # the roster's column that holds each student's name exactly

    [names]                            # entries whose names read alike are held back until mapped here
    "Bob.zip" = "bob"                  # the entry (its name in the submissions folder) = its student
    "_bob" = ""                        # "": nobody's (listed on the class page, graded for no one)

    [service]                          # the submission service (`serve`): grader/service/rules.py reads it
    students = "students.csv"          # who may submit (a `student` column)

Every error names the file, the table and the key (toml_table.Table).
"""

from __future__ import annotations

import os

import tomllib
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from grader.assignment.toml_table import SpecError, Table
from grader.course import canvas, identity

# A flagged pair's similarity at least: independent solutions here reach 0.26, disguised copies 0.78
# (tests/test_course.py measures both; the staff guide's "Similarity review" gives the table).
DEFAULT_THRESHOLD = 0.5


class CourseError(ValueError):
    """course.toml is missing or malformed: a usage error of the batch."""


@dataclass(frozen=True)
class LatePolicy:
    per_day: float = 0.0  # share of the earned points taken per day late
    limit: float = 1.0  # the most that per_day may take in all
    cutoff_days: float | None = None  # later than this: every point taken
    grace: timedelta = timedelta(0)

    def share_taken(self, late_by: timedelta) -> tuple[int, float]:
        """Days late (a part day counts whole; 0 when on time) and the share of the points taken."""
        if late_by <= self.grace:
            return 0, 0.0
        days = -(-late_by // timedelta(days=1))  # ceiling division of timedeltas
        if self.cutoff_days is not None and late_by > timedelta(days=self.cutoff_days):
            return days, 1.0
        return days, min(self.per_day * days, self.limit)


@dataclass(frozen=True)
class Extension:
    student: str
    assignment: str | None  # None: every assignment
    days: float = 0.0
    due: datetime | None = None  # a new due time, which wins over days


@dataclass(frozen=True)
class Course:
    path: Path | None  # None: no course.toml, every default
    salt_file: Path | None = None
    time_zone: ZoneInfo = ZoneInfo("UTC")
    late: LatePolicy = LatePolicy()
    due: dict[str, datetime] = field(default_factory=dict)  # assignment -> due time (aware)
    canvas_columns: dict[str, str] = field(default_factory=dict)
    extensions: tuple[Extension, ...] = ()
    similarity: bool = True
    threshold: float = DEFAULT_THRESHOLD
    references: tuple[Path, ...] = ()
    boilerplate: tuple[Path, ...] = ()
    leaderboard: bool = True
    canvas_roster: Path | None = None
    canvas_match: str = ""  # the roster's column compared with each student's name, exactly
    names: dict[str, str] = field(default_factory=dict)  # [names]: entry -> student ("" for nobody)
    service: dict = field(default_factory=dict)  # [service] as written; grader/service/rules.py checks it

    def due_for(self, student: str, assignment: str) -> tuple[datetime, bool] | None:
        """The student's due time for the assignment and whether an extension moved it; None: no deadline."""
        if assignment not in self.due:
            return None
        due, extended = self.due[assignment], False
        for extension in self.extensions:
            if extension.student == student and extension.assignment in (None, assignment):  # exactly: identity.py
                due = max(due, extension.due or due + timedelta(days=extension.days))  # never shortens
                extended = True
        return due, extended


def read_course_salt(course: Course | None) -> str:
    """The salt from the file course.toml names ('' where it names none), read as every salt file
    is (salt.read_salt: never one a child of the grader could read). GRADER_SALT in the
    environment is refused whichever file is used."""
    from grader.course import salt

    if course is None or course.salt_file is None:
        return ""
    try:
        salt.from_environment({k: v for k, v in os.environ.items() if k != salt.FILE_VARIABLE})
        return salt.read_salt(course.salt_file)
    except salt.SaltError as error:
        raise CourseError(f"{course.path}: [course] salt_file: {error}") from None


def parse_time(value: object, zone: ZoneInfo, where: str) -> datetime:
    """An aware datetime from a TOML date-time or an ISO 8601 string; without an offset, in `zone`."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise CourseError(f"{where}: expected a time such as '2026-10-02 23:59' or "
                              f"'2026-10-02T23:59:00-04:00', got {value!r}") from None  # fmt: skip
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime.combine(value, datetime.max.time().replace(microsecond=0))  # a bare date: its last second
    if not isinstance(value, datetime):
        raise CourseError(f"{where}: expected a date-time, got {value!r}")
    return value if value.tzinfo else value.replace(tzinfo=zone)


def _zone(table: Table, default: ZoneInfo) -> ZoneInfo:
    name = table.get("time_zone", str, "an IANA time zone such as 'Europe/Paris'", None)
    if name is None:
        return default
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise table.fail("time_zone", "an IANA time zone such as 'Europe/Paris' (tzdata has no such zone)") from None


def _late(table: Table) -> LatePolicy:
    share = "a share of the points between 0 and 1"
    policy = LatePolicy(per_day=table.get("per_day", (int, float), share, 0.0),
                        limit=table.get("limit", (int, float), share, 1.0),
                        cutoff_days=table.get("cutoff_days", (int, float), "a number of days", None),
                        grace=timedelta(minutes=table.get("grace_minutes", (int, float), "minutes", 0)))  # fmt: skip
    for key, value in (("per_day", policy.per_day), ("limit", policy.limit)):
        if not 0 <= value <= 1:
            raise table.fail(key, share)
    table.finish()
    return policy


def _paths(table: Table, key: str, base: Path) -> tuple[Path, ...]:
    items = table.get(key, list, "a list of folder paths", [])
    if not all(isinstance(item, str) for item in items):
        raise table.fail(key, "a list of folder paths")
    paths = tuple((base / item).resolve() for item in items)
    if missing := [str(p) for p in paths if not p.is_dir()]:
        raise table.fail(key, f"folders that exist (not found: {', '.join(missing)})")
    return paths


def load_course(path: Path, known: list[str]) -> Course:
    """Read course.toml; `known` are the assignments the grader has (a due time for another is an error)."""
    try:
        return _load(path, known)
    except SpecError as error:
        raise CourseError(str(error)) from None


def _load(path: Path, known: list[str]) -> Course:
    try:
        root = Table(tomllib.loads(path.read_text()), path, "")
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise CourseError(f"--course {path}: cannot be read as TOML: {error}") from None
    base = path.parent
    head = root.table("course") if "course" in root.data else Table({}, path, "course")
    zone = _zone(head, ZoneInfo("UTC"))
    salt = head.get("salt_file", str, "a file path", None)
    head.finish()
    due, columns = {}, {}
    for name, data in root.get("assignments", dict, "a table of assignments", {}).items():
        table = Table(data if isinstance(data, dict) else {}, path, f"assignments.{name}")
        if name not in known:
            raise CourseError(f"{path}: [assignments.{name}]: no such assignment; known: {', '.join(known)}")
        if "due" in table.data:
            table.used.add("due")
            due[name] = parse_time(table.data["due"], _zone(table, zone), f"{path}: [assignments.{name}] key 'due'")
        columns[name] = table.get("canvas_column", str, "the Canvas column's header", name)
        table.finish()
    extensions = tuple(_extension(t, known, zone) for t in root.tables("extensions", []))
    late = _late(root.table("late")) if "late" in root.data else LatePolicy()
    similar = root.table("similarity") if "similarity" in root.data else Table({}, path, "similarity")
    board = root.table("leaderboard") if "leaderboard" in root.data else Table({}, path, "leaderboard")
    canvas = root.table("canvas") if "canvas" in root.data else Table({}, path, "canvas")
    roster, match = _roster(canvas, base)
    course = Course(path=path, salt_file=(base / salt).resolve() if salt else None, time_zone=zone, late=late,
                    due=due, canvas_columns=columns, extensions=extensions, similarity=similar.flag("enabled", True),
                    threshold=similar.get("threshold", (int, float), "a similarity between 0 and 1", DEFAULT_THRESHOLD),
                    references=_paths(similar, "references", base), boilerplate=_paths(similar, "boilerplate", base),
                    leaderboard=board.flag("enabled", True), canvas_roster=roster, canvas_match=match,
                    names=_names(Table(root.get("names", dict, "a table of entries and their students", {}), path,
                                       "names")),
                    service=root.get("service", dict, "a table (the submission service's)", {}))  # fmt: skip
    if not 0 < course.threshold <= 1:
        raise similar.fail("threshold", "a similarity in (0, 1]")
    for table in (similar, board, canvas, root):
        table.finish()
    return course


def _roster(table: Table, base: Path) -> tuple[Path | None, str]:
    """Canvas's roster and the column each student is found in, checked now: a roster the batch
    could not read would stop it after the grading."""
    name = table.get("roster", str, "the path of Canvas's gradebook export (CSV)", None)
    if name is None:
        return None, ""
    column = table.get("match", str, f"the roster's column that holds each student's name as the batch names them "
                                     f"(one of {', '.join(canvas.MATCHABLE)})")  # fmt: skip
    if column not in canvas.MATCHABLE:
        raise table.fail("match", f"one of {', '.join(canvas.MATCHABLE)}")
    roster = (base / name).resolve()
    try:
        canvas.read_roster(roster, column)
    except canvas.RosterError as error:
        raise table.fail("roster", f"Canvas's gradebook export ({error})") from None
    return roster, column


def _names(table: Table) -> dict[str, str]:
    """[names]: each entry of the submissions folder, by its name there, and the student it is
    (a name that can name a folder), or "" for nobody."""
    names = {}
    for entry in table.data:
        student = table.get(entry, str, "the student this entry is, as the batch is to name them, or \"\" for nobody")
        if student and (why := identity.unsafe(student)):
            raise table.fail(entry, f"a student name that can name a folder (this one {why})")
        names[entry] = student
    return names


def _extension(table: Table, known: list[str], zone: ZoneInfo) -> Extension:
    assignment = table.get("assignment", str, "an assignment's name", None)
    if assignment is not None and assignment not in known:
        raise table.fail("assignment", f"one of {', '.join(known)}")
    new_due = None
    if "due" in table.data:
        table.used.add("due")
        new_due = parse_time(table.data["due"], zone, f"{table.path}: [{table.where}] key 'due'")
    days = table.get("days", (int, float), "a number of days", 0.0)
    if new_due is None and days <= 0:
        raise table.fail("days", "a positive number of days, or a new 'due' time")
    extension = Extension(table.get("student", str, "the student's name as the batch names them"), assignment,
                          days, new_due)  # fmt: skip
    table.finish()
    return extension
