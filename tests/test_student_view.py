"""What a student reads, rendered as they read it: `make grade`, as written, in a fresh checkout
whose starter/ holds the work of a student who began with softmax (the row maximum forgotten) and
a CUDA transpose (that copies instead), every other stub as it came; its terminal at 80 and at 120
columns, and its report.html in headless Chromium at 1280 px.

`GRADER_WRITE_DOCS=1` writes what the student sees into docs/: the terminal at 80 columns into
docs/students.md (between its `make grade` markers) and the report's screenshot, docs/report.png;
otherwise the test checks that they are there and say what `make grade` says today."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from conftest import SUBMISSIONS, fresh_checkout, known_wrong
from grader.assignment.loading import load_assignments
from grader.assignment.spec import REPO_ROOT
from test_report_browser import _chromium, _pillow, measure, screenshot

WRITE_DOCS = os.environ.get("GRADER_WRITE_DOCS") == "1"
STUDENTS_MD = REPO_ROOT / "docs" / "students.md"
SCREENSHOT = REPO_ROOT / "docs" / "report.png"
BLOCK = re.compile(r"(<!-- make grade at 80 columns: tests/test_student_view.py -->\n```\n)(.*?)(```\n)", re.S)
WORKED_ON = {"softmax": "no_max_subtraction", "transpose": "naive_stores_in_input_order"}
ADVICE = "Keep its argument in range: subtract the row's maximum before exp"  # how the overflow's diagnosis ends


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A fresh checkout with the student's work in starter/, and `make grade`'s output at 80 and
    at 120 columns (the second grading finds the first one's kernels)."""
    root, env = fresh_checkout(tmp_path_factory.mktemp("checkout"))
    for assignment, bug in WORKED_ON.items():
        work = known_wrong(SUBMISSIONS / assignment / bug, tmp_path_factory.mktemp("work")) / assignment
        shutil.rmtree(root / "starter" / assignment)
        shutil.copytree(work, root / "starter" / assignment)
    said = {}
    for width in (120, 80):  # 80 last: its report.html is the one kept
        done = subprocess.run(["make", "grade"], cwd=root, env={**env, "COLUMNS": str(width)}, capture_output=True,
                              text=True, timeout=1200)  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        said[width] = done.stdout
    return root, said


def _graded_output(stdout: str) -> str:
    """What `make grade` printed after make's own echo of the command it ran, as the terminal
    shows it (Rich pads a table's lines with spaces that no one sees)."""
    text = stdout.split("\n", 1)[1] if stdout.startswith(".venv/bin/python") else stdout
    return "".join(line.rstrip() + "\n" for line in text.splitlines())


@pytest.mark.parametrize("width", [80, 120])
def test_make_grade_fits_the_terminal_and_says_the_student_s_part_first_and_whole(checkout, width):
    """Issue 54: the first thing to fix was cut ("Likely cause: NaN or Inf ap [...]"), a CUDA part
    nothing checked read `passed`, and the parts not started were said before the one worked on."""
    _, said = checkout
    text = _graded_output(said[width])
    assert all(len(line) <= width for line in text.splitlines()), f"wider than {width} columns:\n{text}"
    assert "[...]" not in text and "…" not in text, text
    words = set(text.split())
    for assignment in load_assignments():
        for part in assignment.parts:
            assert {assignment.name, part.name} <= words, f"{assignment.name}/{part.name} broken or missing:\n{text}"
    joined = " ".join(text.split())
    assert ADVICE in joined, f"the advice was cut:\n{text}"
    rows = [line.split() for line in text.splitlines() if re.match(r"  \S", line)]  # a part's row: indented
    assert rows[0][0] == "softmax", "the part worked on heads the table"
    assert all(row[1:3] == ["not", "graded"] for row in rows if row[0].startswith("transpose_")), rows
    untouched = joined.find("not_implemented in ")
    assert joined.index("nan_or_inf softmax/softmax") < untouched or untouched < 0


def test_students_md_shows_make_grade_at_80_columns_as_it_prints_today(checkout):
    """docs/students.md carries the terminal of that student's `make grade` at 80 columns, made by
    this test. What a machine changes (nvcc or not: a CUDA stub is then not graded rather than
    not_implemented) may differ; the lines about the student's softmax may not."""
    _, said = checkout
    live = _graded_output(said[80])
    if WRITE_DOCS:
        STUDENTS_MD.write_text(BLOCK.sub(lambda m: m[1] + live + m[3], STUDENTS_MD.read_text()))
    found = BLOCK.search(STUDENTS_MD.read_text())
    assert found, "docs/students.md has no `make grade` block: run this test with GRADER_WRITE_DOCS=1"
    shown = found[2]
    assert all(len(line) <= 80 for line in shown.splitlines()) and "[...]" not in shown and "…" not in shown
    softmax = [line for line in live.splitlines() if "softmax" in line]
    assert softmax and all(line in shown.splitlines() for line in softmax), (
        "docs/students.md's `make grade` is stale: run this test with GRADER_WRITE_DOCS=1")
    assert ADVICE in " ".join(shown.split())


def test_the_report_shows_the_worked_on_assignment_on_the_first_screen(checkout, tmp_path):
    """Issue 54: report.html put softmax 10,300 px down a 14,800 px page, after 63 identical
    not_implemented blocks. At 1280 x 800: softmax's section starts on the first screen or just
    below, each other case that failed alike is folded, the assignments not started take a line
    each, folded, and the page ends within three screens."""
    chromium = _chromium()
    root, _ = checkout
    page = root / "results" / "report.html"
    found = measure(chromium, page, "{softmax: document.getElementById('softmax').getBoundingClientRect().top, "
                    "height: document.documentElement.scrollHeight, open: [...document.querySelectorAll("
                    "'details.not-started')].filter(d => d.open).length, stubs: [...document.querySelectorAll("
                    "'details.not-started')].map(d => d.getBoundingClientRect().height)}")  # fmt: skip
    assert found["softmax"] < 1000, found
    assert found["stubs"] and found["open"] == 0 and max(found["stubs"]) < 40, found
    assert found["height"] < 3 * 800, f"the page runs to {found['height']} px: what is below the third screen?"
    shot = tmp_path / "report.png"
    screenshot(chromium, page, shot, 1280, found["height"])
    if WRITE_DOCS:
        SCREENSHOT.write_bytes(shot.read_bytes())
    assert SCREENSHOT.is_file(), "docs/report.png is missing: run this test with GRADER_WRITE_DOCS=1"
    assert _pillow().open(SCREENSHOT).size[0] == 1280
