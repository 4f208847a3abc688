"""What the course adds to a batch's outputs, gathered once the class is graded.

The batch hands `prepare` its students' gradebook entries; what comes back is applied to each
student's Grade (adjustments, notes) before the reports are written, adds columns to grades.csv and
sections to the class page, and writes the course's own files: similarity.csv, a leaderboard page
per GPU model under leaderboards/, and canvas.csv where course.toml names a Canvas roster (on the
CPU tier only when asked: advisory.py). What needs the TA before the grades are complete (entries
held back, an ambiguous roster, an advisory tier) heads the class page and the terminal (`attention`).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import adjustments, advisory, canvas, late, leaderboard, overrides, similarity
from grader.course.adjustments import StudentCourse
from grader.course.config import Course
from grader.course.gradebook import Entry
from grader.reporting.results import Grade
from grader.assignment.spec import REPO_ROOT, Assignment
from grader.reporting.text import csv_cell

SIMILARITY_CSV = "similarity.csv"
CANVAS_CSV = "canvas.csv"
LEADERBOARDS = "leaderboards"  # a folder: one page per GPU model
FILES = (SIMILARITY_CSV, CANVAS_CSV, LEADERBOARDS)  # what the batch writes beside the students' folders
# The contract's columns, then the language of the code compared: an assignment with Python and
# CUDA C parts compares each language apart, so a pair can have a row for each.
SIMILARITY_HEADER = ("assignment", "student_a", "student_b", "similarity", "language")


@dataclass
class Board:
    """One GPU model's standings: assignment -> [(pseudonym, geometric mean ratio, timed cases)], best first."""

    gpu: str
    standings: dict[str, list[tuple[str, float, int]]] = field(default_factory=dict)

    @property
    def file(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.gpu.lower()).strip("-") + ".html"


@dataclass
class CourseOutputs:
    course: Course
    students: dict[str, StudentCourse]
    review: similarity.Review
    boards: list[Board]
    notes: list[str] = field(default_factory=list)  # for the TA: the console and the class page
    attention: list[str] = field(default_factory=list)  # for the TA first: the top of the class page, the console
    flags: dict[str, list[str]] = field(default_factory=dict)  # student -> why a TA should look (the class page)
    advisory: bool = False  # graded on the CPU tier: advice, not grades (advisory.py)
    export_advisory: bool = False  # `batch --advisory`: canvas.csv even so, under advisory columns
    people: dict[str, tuple[str, ...]] = field(default_factory=dict)  # each student's names in a roster (a group's)

    def apply(self, grades: dict[str, Grade]) -> None:
        for student, grade in grades.items():
            mine = self.students.get(student, StudentCourse())
            grade.adjustments, grade.notes = list(mine.adjustments), list(mine.notes)


def prepare(course: Course, students: dict[str, list[Entry]], folders: dict[str, Path | None], submissions_dir: Path,
            submissions: list, assignments: list[Assignment], salt: str, connection,
            export_advisory: bool = False) -> CourseOutputs:  # fmt: skip
    """Overrides and late penalties per student, the similarity review and the leaderboards; what
    waits for the TA (entries held back at intake), and the tier's word where it is the CPU's."""
    forced = overrides.in_force(connection)
    times, unread = late.submission_times(submissions_dir, submissions, course) if course.due else ({}, [])
    per_student: dict[str, StudentCourse] = {}
    for student, entries in students.items():
        graded = {e.key.assignment: e.score for e in entries}
        lateness = {a: found for a in graded if (found := late.lateness(course, student, a, times)) is not None}
        per_student[student] = adjustments.for_student(student, graded, forced, lateness)
    result = CourseOutputs(course, per_student, _review(course, folders, assignments), [],
                           export_advisory=export_advisory, people={s.student: s.people for s in submissions})  # fmt: skip
    result.attention += list(dict.fromkeys(s.held for s in submissions if getattr(s, "held", "")))  # one a group
    for student, problem in unread:
        if student in students:
            result.flags.setdefault(student, []).append(problem)
        else:
            result.notes.append(problem)
    if result.review.skipped:
        result.notes.append(result.review.skipped)
    devices = {e.device for es in students.values() for e in es}
    result.advisory = advisory.is_advisory(devices)
    if result.advisory:  # every output says so: the class page, each report (grades.csv: grades_columns)
        result.attention.append(advisory.CLASS_WARNING)
        for mine in per_student.values():
            mine.notes.append(advisory.STUDENT_NOTE)
    if course.leaderboard and salt:
        result.boards = leaderboards(students, salt)
        names = {student: leaderboard.pseudonym(student, salt) for student in students}
        shown = {row[0] for board in result.boards for rows in board.standings.values() for row in rows}
        for student, name in names.items():
            if name in shown:
                per_student[student].notes.append(f"Your name on the class leaderboard: {name}")
    elif course.leaderboard and "cuda" in devices:
        result.notes.append("leaderboard skipped: pseudonyms need the course's secret salt, and none was given")
    return result


def _review(course: Course, folders: dict[str, Path | None], assignments: list[Assignment]) -> similarity.Review:
    if not course.similarity:
        return similarity.Review(skipped="similarity review is turned off in course.toml")
    return similarity.review(folders, assignments, REPO_ROOT / "starter", course.threshold, course.references,
                             course.boilerplate)  # fmt: skip


def leaderboards(students: dict[str, list[Entry]], salt: str) -> list[Board]:
    boards: dict[str, Board] = {}
    for student, entries in students.items():
        for entry in entries:
            if entry.device != "cuda" or (found := leaderboard.geometric_mean_ratio(entry.tests)) is None:
                continue
            gpu = leaderboard.gpu_model(entry.tests, entry.environment)
            rows = boards.setdefault(gpu, Board(gpu)).standings.setdefault(entry.key.assignment, [])
            rows.append((leaderboard.pseudonym(student, salt), round(found[0], 4), found[1]))
    for board in boards.values():
        for rows in board.standings.values():
            rows.sort(key=lambda row: (-row[1], row[0]))
    return sorted(boards.values(), key=lambda b: b.gpu)


def grades_columns(outputs: CourseOutputs | None, assignments: list[Assignment]) -> list[tuple[str, str, str]]:
    """The extra columns of grades.csv: (header, assignment, what) for each assignment with a deadline
    (days late, points taken) and each with an override in force."""
    if outputs is None:
        return []
    columns = []
    for a in assignments:
        if a.name in outputs.course.due:
            columns += [(f"{a.name}_days_late", a.name, "days"), (f"{a.name}_late_points", a.name, "taken")]
        if any(a.name in s.overridden for s in outputs.students.values()):
            columns.append((f"{a.name}_override", a.name, "override"))
    return columns + ([(advisory.TIER_COLUMN, "", "tier")] if outputs.advisory else [])


def grades_cell(outputs: CourseOutputs, student: str, assignment: str, what: str) -> str:
    mine = outputs.students.get(student, StudentCourse())
    if what == "tier":
        return advisory.TIER_CELL
    if what == "override":
        return f"{mine.overridden[assignment]:g}" if assignment in mine.overridden else ""
    days, taken = mine.late.get(assignment, (None, 0.0))
    if what == "days":
        return "no time known" if days is None else str(days)
    return f"{taken:.4g}"


def write_files(out: Path, outputs: CourseOutputs, grades: dict[str, Grade], assignments: list[Assignment]) -> None:
    """similarity.csv, the leaderboard pages and canvas.csv."""
    with (out / SIMILARITY_CSV).open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(SIMILARITY_HEADER)
        for pair in outputs.review.pairs:
            writer.writerow([pair.assignment, csv_cell(pair.student_a), csv_cell(pair.student_b),
                             f"{pair.similarity:.3f}", pair.language])
    write_leaderboards(out / LEADERBOARDS, outputs.boards)
    (out / CANVAS_CSV).unlink(missing_ok=True)  # never a stale export beside this batch's grades
    if outputs.course.canvas_roster is None:
        return
    if outputs.advisory and not outputs.export_advisory:
        outputs.attention.append(advisory.CANVAS_REFUSED)
        return
    write_canvas(out / CANVAS_CSV, outputs, grades, assignments)


def write_canvas(path: Path, outputs: CourseOutputs, grades: dict[str, Grade], assignments: list[Assignment]) -> None:
    """canvas.csv: each roster row that one student's name matches exactly, with their final points;
    an ambiguous row stays empty and heads the class page (canvas.py)."""
    course = outputs.course
    points = {s: {a.name: g.assignment_score(a.name) for a in assignments} for s, g in grades.items()}
    headers = {a.name: course.canvas_columns.get(a.name, a.name) for a in assignments}
    if outputs.advisory:
        headers = {a: advisory.canvas_header(a) for a in headers}
    most = {a.name: a.points_possible() for a in assignments}
    unmatched, errors = canvas.write_import(course.canvas_roster, course.canvas_match, path, points, outputs.people,
                                            headers, most)  # fmt: skip
    outputs.attention += errors
    if unmatched:
        outputs.notes.append(f"canvas.csv: no roster row for {len(unmatched)} student(s): {', '.join(unmatched)}")


def similar_pairs(review: similarity.Review) -> str:
    """How many pairs of students to review, counted once however many languages matched."""
    pairs = {(p.assignment, p.student_a, p.student_b) for p in review.pairs}
    rows = f", {len(review.pairs)} rows: Python and CUDA C apart" if len(review.pairs) > len(pairs) else ""
    return f"similar pairs for review: {len(pairs)}{rows}"


def write_leaderboards(folder: Path, boards: list[Board]) -> None:
    from grader.reporting import report  # the one Jinja2 environment of every page

    folder.mkdir(exist_ok=True)
    for stale in folder.glob("*.html"):
        stale.unlink()
    template = report.templates().get_template("leaderboard.html.j2")
    for board in boards:
        (folder / board.file).write_text(template.render(board=board))
