"""What a teaching assistant reads after a batch, rendered as they read it: the class table in a
terminal of 80 and of 120 columns, the class page in headless Chromium at 1280 px, similarity.csv
and its count. The class is made up here from the assignments' own parts (a real batch's pages
are test_course_batch.py's): four students on the CPU tier, one who did most parts and a bonus,
one who handed in the starter, one whose CUDA files are missing, one who worked on softmax.

`GRADER_WRITE_DOCS=1` writes the class page's screenshot into docs/ (docs/students.md's and
docs/staff.md's pictures); otherwise the test checks that it is there."""

from __future__ import annotations

import csv
import io
import os
import re

import pytest
from rich.console import Console

from grader.assignment.loading import load_assignments
from grader.assignment.spec import REPO_ROOT
from grader.course import outputs, similarity
from grader.course.config import Course
from grader.course.gradebook import Entry, Key
from grader.reporting import class_table, summary
from grader.reporting.results import TestResult
from test_report_browser import _chromium, _pillow, measure, screenshot

CPU = {"device": "cpu", "tier": "CPU (Triton interpreter)"}
WRITE_DOCS = os.environ.get("GRADER_WRITE_DOCS") == "1"
SCREENSHOT = REPO_ROOT / "docs" / "class-summary.png"
PLANS = {  # what each student did: part -> the reason its CPU-tier cases earn (the rest: the starter's stub)
    "alice": {"add": "ok", "softmax": "ok", "gelu": "ok", "bias_gelu_scale": "ok", "matmul": "ok",
              "matmul_bt": "wrong_result", "forward": "ok", "forward_causal": "ok", "backward": "ok"},
    "bob": {},
    "carol": {"add": "ok", "gelu_cuda": "missing_file", "matmul_naive": "missing_file", "matmul_smem": "missing_file",
              "matmul_reg": "missing_file", "transpose_naive": "missing_file", "transpose_smem": "missing_file",
              "transpose_padded": "missing_file"},
    "dave": {"add": "ok", "softmax": "nan_or_inf"},
}  # fmt: skip


def _tests(assignment, plan: dict[str, str]) -> list[TestResult]:
    """One assignment's CPU-tier tests: a build, the cases the CPU tier runs (a CUDA C part's all
    need a GPU once its file compiled), each benchmark not graded."""
    tests = []
    for part in assignment.parts:
        outcome, name = plan.get(part.name, "not_implemented"), f"{assignment.name}/{part.name}"
        build = "missing_file" if outcome == "missing_file" else "ok"
        tests.append(TestResult(assignment.name, part.name, "build", f"{name}: load {part.file}", build, 0.0, 0.0, "",
                                bonus=part.bonus))  # fmt: skip
        cases = part.cases if part.is_cuda else [c for c in part.cases if c.runs_on("cpu")]
        for case in cases:
            reason = "no_gpu" if part.is_cuda and outcome != "missing_file" else outcome
            share = part.correctness_points / len(cases)
            tests.append(TestResult(assignment.name, part.name, "correctness", f"{name}: {case.dtype} {case.label}",
                                    reason, share if reason == "ok" else 0.0, share, reason, bonus=part.bonus))  # fmt: skip
        for case in part.benchmarks:
            tests.append(TestResult(assignment.name, part.name, "performance", f"{name}: speed {case.label}", "no_gpu",
                                    0.0, part.performance_points / len(part.benchmarks), "", bonus=part.bonus))  # fmt: skip
    return tests


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    """The class's outputs, as `batch` writes them, and each student's Grade."""
    out = tmp_path_factory.mktemp("class")
    assignments = load_assignments()
    students = {student: [Entry(Key(student, a.name, f"{student}-{a.name}", "v"), "cpu", _tests(a, plan), CPU, 9.0,
                                "now") for a in assignments] for student, plan in PLANS.items()}  # fmt: skip
    return out, summary.write_outputs(out, students, {}, assignments), assignments


@pytest.mark.parametrize("width", [80, 120])
def test_the_class_table_fits_the_terminal_on_one_scale(klass, width):
    """Issue 54: an "of" column that differed per student (a missing CUDA file is graded on the
    CPU tier, so its points joined that student's "of") and read "46.00 of 40.00" where bonus
    points counted; at 80 columns the headers read "stude… flash… softm…"."""
    out, grades, assignments = klass
    console = Console(file=io.StringIO(), width=width, record=True)
    class_table.print_class_table(grades, assignments, console)
    text = console.export_text()
    assert all(len(line) <= width for line in text.splitlines()), text
    assert "…" not in text and " of " not in text.splitlines()[-len(grades) - 1], "no cut word, no per-student of"
    said = " ".join(text.split())
    scale = class_table.Scale.of(grades, assignments)
    assert f"points of {scale.most:.2f}; bonus points (up to {scale.bonus:.2f}) come on top" in said
    with (out / "grades.csv").open() as file:
        totals = {row["student"]: row["total"] for row in csv.DictReader(file)}
    for student, total in totals.items():  # each row's total is grades.csv's, bonus counted in it
        row = next(line.split() for line in text.splitlines() if line.startswith(student + " "))
        assert float(row[-2]) == pytest.approx(float(total)) and float(row[-1]) == grades[student].bonus_score
    headers = next(line.split() for line in text.splitlines() if line.startswith("student "))
    if width == 120:
        assert headers == ["student", *(a.name for a in assignments), "total", "bonus"]
    else:
        assert headers == ["student", "total", "bonus"] and "Each assignment's points: grades.csv" in said


def test_the_class_page_says_its_scale_once_and_a_bonus_part_out_of_its_own_points(klass):
    """Issue 54: "mean score 22.00 of 57.00" (the largest "of" of any student) and "mean points
    1.50 / 0.00" for a bonus part; a CUDA part nothing graded here read a 0% pass rate."""
    out, grades, assignments = klass
    page = summary.class_summary(grades, {}, {}, assignments)
    scale = page["scale"]
    assert scale.most == pytest.approx(sum(scale.by_assignment.values()))
    assert {round(g.max_score, 4) for g in grades.values()} == {scale.most}, "every student on the one scale"
    rows = {(r["assignment"], r["part"]): r for r in page["parts"]}
    backward = rows[("flash_attention", "backward")]
    assert backward["bonus"] and backward["max_score"] > 0 and backward["rate"] == 0.25
    assert rows[("transpose", "transpose_naive")]["graded"] == 1, "graded only where the file was missing"
    assert rows[("transpose", "transpose_smem")]["rate"] == 0.0
    html = (out / "summary.html").read_text()
    assert f"Every score is out of {scale.most:.2f} points" in html
    assert re.search(r"\d+\.\d\d / \d+\.\d\d bonus</td>", html) and "/ 0.00" not in html


def test_the_class_page_in_a_browser_keeps_its_labels_apart(klass, tmp_path):
    """Issue 54: the histogram's range labels ran together. The class page at 1280 px: each label
    of the score axis clear of the next, and nothing wider than the window."""
    chromium = _chromium()
    out, _, _ = klass
    page = out / "summary.html"
    labels = measure(chromium, page, "[...document.querySelectorAll('svg.histogram text.edge')].map(t => {"
                     "const r = t.getBoundingClientRect(); return [t.textContent, r.left, r.right]; })")
    assert len(labels) >= 5, labels
    for (left, _, end), (right, start, _) in zip(labels, labels[1:]):
        assert start - end >= 4, f"labels {left!r} and {right!r} run together: {labels}"
    assert measure(chromium, page, "document.documentElement.scrollWidth") <= 1280
    shot = tmp_path / "class-summary.png"
    screenshot(chromium, page, shot)
    if WRITE_DOCS:
        SCREENSHOT.write_bytes(shot.read_bytes())
    image = _pillow()
    assert SCREENSHOT.is_file(), "docs/class-summary.png is missing: run this test with GRADER_WRITE_DOCS=1"
    assert image.open(SCREENSHOT).size[0] == 1280


def _pair(language: str, share: float) -> similarity.Pair:
    return similarity.Pair("matmul", language, "alice", "ally", share, (), ())


def test_similarity_csv_names_each_rows_language_and_the_terminal_counts_pairs_of_students(klass, tmp_path):
    """Issue 6 of 54: a pair whose Python and CUDA C both matched had two rows and no language
    column, and the terminal counted 7 pairs where 5 were distinct."""
    _, grades, assignments = klass
    review = similarity.Review(pairs=[_pair("python", 0.9), _pair("cuda", 0.7),
                                      similarity.Pair("softmax", "python", "bob", "dave", 0.6, (), ())])  # fmt: skip
    course = outputs.CourseOutputs(Course(path=None), {}, review, [])
    outputs.write_files(tmp_path, course, grades, assignments)
    with (tmp_path / "similarity.csv").open() as file:
        rows = list(csv.reader(file))
    assert rows[0][:4] == ["assignment", "student_a", "student_b", "similarity"], "the contract's columns first"
    assert rows[0][4:] == ["language"] and [row[4] for row in rows[1:]] == ["python", "cuda", "python"]
    assert outputs.similar_pairs(review) == "similar pairs for review: 2, 3 rows: Python and CUDA C apart"
