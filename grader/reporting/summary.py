"""What a batch leaves for the teaching assistant: a report per student, grades.csv, a class page, a table.

Everything is rebuilt from gradebook entries, so a resumed run writes the same files as a run that
was never interrupted. The class page (grader/reporting/templates/summary.html.j2) answers what a TA asks
first: how the scores spread, which parts the class found hard, what went wrong most often, and
which submissions a person should look at (crashes, hangs, rule-breaking, copies).
"""

from __future__ import annotations

import csv
import hashlib
import math
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from grader.running import sandbox, stack
from grader.judging import reasons
from grader.course import intake
from grader.reporting import class_table, glance, report
from grader.course import outputs as course_outputs
from grader.course.outputs import CourseOutputs
from grader.course.gradebook import Entry
from grader.reporting.results import Grade
from grader.reporting.results_json import write_json
from grader.assignment.spec import REPO_ROOT, Assignment
from grader.reporting.text import csv_cell

REVIEW_REASONS = reasons.REVIEW  # the code broke the process or the rules, not just the numbers
HISTOGRAM_BINS = 10
EMPTY_HASH = hashlib.sha256().hexdigest()  # an assignment folder with no files in it


def student_grade(student: str, entries: list[Entry]) -> Grade:
    tests = [t for e in entries for t in e.tests]
    environment = dict(entries[0].environment) if entries else {}
    environment["submission_hashes"] = {e.key.assignment: e.key.submission_hash for e in entries}
    phases = [e.environment["phases"] for e in entries if e.environment.get("phases")]
    if phases:
        environment["phases"] = "; ".join(phases)
    return Grade(student, tests, environment, sum(e.seconds for e in entries))


def write_outputs(out: Path, students: dict[str, list[Entry]], problems: dict[str, str],
                  assignments: list[Assignment], course: CourseOutputs | None = None) -> dict[str, Grade]:  # fmt: skip
    """Write every per-student and class-wide file; returns each student's Grade. `course`, where
    given, adds each student's adjustments and notes, grades.csv's late and override columns, the
    class page's similar pairs and leaderboards, and the course's own files (course/outputs.py)."""
    grades = {student: student_grade(student, entries) for student, entries in students.items()}
    if course is not None:
        course.apply(grades)
    for student, grade in grades.items():
        write_json(grade, out / student / "results.json")
        report.write_html(grade, out / student / "report.html")
    write_grades_csv(out / "grades.csv", grades, assignments, course)
    page = class_summary(grades, students, problems, assignments)
    if course is not None:
        course_outputs.write_files(out, course, grades, assignments)
        page.update(course_page(course, page["flagged"]))
    (out / "summary.html").write_text(report.templates().get_template("summary.html.j2").render(**page))
    return grades


def course_page(course: CourseOutputs, flagged: list[dict]) -> dict:
    """The class page's course sections, and what needs the TA first at its top; each flagged pair
    also joins both students' review reasons, as does what the course found of a student."""
    why = {row["student"]: row["why"] for row in flagged}
    for student, flags in course.flags.items():
        why.setdefault(student, []).extend(flags)
    for item in course.review.uncompared:
        why.setdefault(item.student, []).append(f"{item.assignment}: not compared for similarity: {item.reason}")
    for pair in course.review.pairs:
        for me, other in ((pair.student_a, pair.student_b), (pair.student_b, pair.student_a)):
            if me in why or me in course.students:
                note = f"{pair.assignment}: {100 * pair.similarity:.0f}% similar to {other} (see Similar code)"
                why.setdefault(me, []).append(note)
    flagged[:] = [{"student": s, "why": w} for s, w in why.items() if w]
    boards = [{"gpu": b.gpu, "href": f"{course_outputs.LEADERBOARDS}/{b.file}"} for b in course.boards]
    return {"review": course.review, "leaderboards": boards, "course_notes": course.notes,
            "attention": course.attention}  # fmt: skip


def scores(grade: Grade, assignments: list[Assignment]) -> list[float]:
    """Each assignment's points, a course's adjustments (overrides, late penalties) included."""
    return [grade.assignment_score(a.name) for a in assignments]


def write_grades_csv(path: Path, grades: dict[str, Grade], assignments: list[Assignment],
                     course: CourseOutputs | None = None) -> None:  # fmt: skip
    """student, one column per assignment, total; then, where a course sets them, each assignment's
    days late and points taken, and whether an override is in force (course/outputs.py)."""
    extra = course_outputs.grades_columns(course, assignments)
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["student", *(a.name for a in assignments), "total", *(c[0] for c in extra)])
        for student, grade in grades.items():
            points = scores(grade, assignments)
            cells = [course_outputs.grades_cell(course, student, a, what) for _, a, what in extra]
            # The name is the one cell a student chose: it must open as text, never run as a formula.
            writer.writerow([csv_cell(student), *(round(p, 4) for p in points), round(sum(points), 4), *cells])


def class_summary(grades: dict[str, Grade], students: dict[str, list[Entry]], problems: dict[str, str],
                  assignments: list[Assignment]) -> dict:  # fmt: skip
    """The data of the class page. Every score is out of the class's scale (bonus apart), the same
    for every student and every row."""
    scale = class_table.Scale.of(grades, assignments)
    count = max(len(grades), 1)
    # The richest description of the machine (a refused archive's entry has only the device).
    environment = max((e.environment for entries in students.values() for e in entries), key=len, default={})
    return {
        "students": len(grades),
        "assignments": [a.name for a in assignments],
        "scale": scale,
        "mean": sum(g.score - g.bonus_score for g in grades.values()) / count,
        "mean_bonus": sum(g.bonus_score for g in grades.values()) / count,
        "histogram": histogram([g.score - g.bonus_score for g in grades.values()], scale.most),
        "parts": pass_rates(grades),
        "reasons": common_reasons(grades),
        "flagged": flagged(grades, students, problems, assignments),
        "rows": [{"student": s, "scores": scores(g, assignments), "score": g.score, "bonus": g.bonus_score}
                 for s, g in grades.items()],  # fmt: skip
        "environment": environment,
        "warning": stack.warning(environment),
        "unsandboxed": next((w for entries in students.values() for e in entries
                             if (w := sandbox.warning(e.environment))), ""),  # fmt: skip
        "written": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def histogram(totals: list[float], top: float) -> list[dict]:
    """The scores in bins of a round width (1, 2, 2.5 or 5 times a power of ten), at most
    HISTOGRAM_BINS of them from 0 to `top`, so that each edge is a short label ("20", "2.5")."""
    rough = (top or 1.0) / HISTOGRAM_BINS
    power = 10.0 ** math.floor(math.log10(rough))
    width = next(power * m for m in (1, 2, 2.5, 5, 10) if power * m >= rough - 1e-9)
    counts = [0] * max(1, math.ceil(round((top or 1.0) / width, 6)))
    for total in totals:
        at = int(total / width + 1e-9)  # 39.999999 points of float sums are 40
        counts[min(max(at, 0), len(counts) - 1)] += 1  # a full score lands in the last bin
    return [{"low": i * width, "high": (i + 1) * width, "count": c} for i, c in enumerate(counts)]


def pass_rates(grades: dict[str, Grade]) -> list[dict]:
    """Per part: how many students passed it among those it was graded for (glance.py's status),
    and the mean points out of the part's points (a bonus part's own, said as bonus)."""
    parts: dict[tuple[str, str], dict] = {}
    for grade in grades.values():
        for line in glance.parts(grade):
            empty = {"assignment": line.assignment, "part": line.part, "bonus": line.bonus, "students": 0,
                     "graded": 0, "passed": 0, "points": 0.0, "max_score": 0.0}  # fmt: skip
            row = parts.setdefault((line.assignment, line.part), empty)
            row["students"] += 1
            row["graded"] += line.status != "not graded"
            row["passed"] += line.status == "passed"
            row["points"] += line.score
            row["max_score"] = max(row["max_score"], sum(t.max_score for t in line.tests))
    for row in parts.values():
        row["rate"] = row["passed"] / row["graded"] if row["graded"] else None
        row["mean"] = row["points"] / row["students"]
    order = dict.fromkeys((t.assignment, t.part) for grade in grades.values() for t in grade.tests)
    return [parts[key] for key in order]  # in the order the parts were graded


def common_reasons(grades: dict[str, Grade], limit: int = 10) -> list[dict]:
    """The failure reasons that cost the class points, by the number of students they hit."""
    students, tests = Counter(), Counter()
    for grade in grades.values():
        failed = [t.reason for t in grade.tests if t.graded and not t.passed and t.kind != "build"]
        tests.update(failed)
        students.update(set(failed))
    return [{"reason": r, "students": n, "tests": tests[r], "hint": report.HINTS.get(r, "")}
            for r, n in students.most_common(limit)]  # fmt: skip


def flagged(grades: dict[str, Grade], students: dict[str, list[Entry]], problems: dict[str, str],
            assignments: list[Assignment]) -> list[dict]:  # fmt: skip
    """Submissions a person should look at, each with every reason it was flagged."""
    why: dict[str, list[str]] = {s: [problems[s]] if problems.get(s) else [] for s in grades}
    for student, grade in grades.items():
        for (assignment, part), reasons in _review_reasons(grade).items():
            why[student].append(f"{assignment}/{part}: {', '.join(sorted(reasons))}")
    for student, others in identical(students, assignments).items():
        why[student].extend(others)
    return [{"student": s, "why": w} for s, w in why.items() if w]


def _review_reasons(grade: Grade) -> dict[tuple[str, str], set[str]]:
    found: dict[tuple[str, str], set[str]] = {}
    for test in grade.tests:
        if test.reason in REVIEW_REASONS:
            found.setdefault((test.assignment, test.part), set()).add(test.reason)
    return found


def identical(students: dict[str, list[Entry]], assignments: list[Assignment]) -> dict[str, list[str]]:
    """Students whose assignment folder is byte-for-byte another's (the untouched starter aside)."""
    starter = intake.Submission("starter", REPO_ROOT / "starter", REPO_ROOT / "starter")
    ignored = {EMPTY_HASH} | {starter.content_hash(a.name) for a in assignments}
    owners: dict[tuple[str, str], list[str]] = {}
    for student, entries in students.items():
        for entry in entries:
            if entry.key.submission_hash not in ignored and not entry.key.submission_hash.startswith("archive:"):
                owners.setdefault((entry.key.assignment, entry.key.submission_hash), []).append(student)
    notes: dict[str, list[str]] = {}
    for (assignment, _), group in owners.items():
        for student in group if len(group) > 1 else []:
            others = ", ".join(s for s in group if s != student)
            notes.setdefault(student, []).append(f"{assignment}: identical to {others}")
    return notes
