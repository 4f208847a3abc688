"""The course features in a real class batch (two CPU workers, vector_add only, real children).

The class: alice hands in the solution; ally a disguised copy of it (tests/course/disguised_copy:
names, function order and comments changed); tut the Triton tutorial's kernel from tests/corpus;
bob the untouched starter. course.toml sets a deadline, a late policy and an extension; a CSV
beside the submissions gives the submission times:

    alice  on time                     4.0
    ally   two days late (10% a day)   4.0 - 20% = 3.2
    tut    two days late, extended     4.0 (a three-day extension)
    bob    no time known               0.0, and the report says no penalty was taken

Then an override of ally's points and a `--regrade --student ally`: only ally is graded again, and
the override holds.
"""

from __future__ import annotations

import csv
import html
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed", reason="batch grading needs dask[distributed], which is not installed here")

from conftest import requires_gpu  # noqa: E402
from grader.cli import main  # noqa: E402
from grader.assignment.spec import REPO_ROOT  # noqa: E402
from test_batch import SALT, batch, grades_csv, rows  # noqa: E402

TESTS = Path(__file__).resolve().parent
COURSE = """
[course]
time_zone = "Europe/Paris"

[late]
per_day = 0.1
limit = 0.5
cutoff_days = 5

[assignments.vector_add]
due = "2026-09-15 23:59"

[[extensions]]
student = "tut"
days = 3
"""
TIMES = "student,submitted_at\nalice,2026-09-15 22:00\nally,2026-09-17 10:00\ntut,2026-09-17 10:00\n"
EXPECTED = {"alice": (4.0, "0", "0"), "ally": (3.2, "2", "0.8"), "tut": (4.0, "0", "0"), "bob": (0.0, "no time known", "0")}


def build_class(root: Path) -> Path:
    klass = root / "class"
    klass.mkdir()
    shutil.copytree(REPO_ROOT / "solutions" / "vector_add", klass / "alice" / "vector_add")
    shutil.copytree(TESTS / "course" / "disguised_copy", klass / "ally")
    shutil.copytree(TESTS / "corpus" / "triton_tutorial_vector_add" / "vector_add", klass / "tut" / "vector_add")
    shutil.copytree(REPO_ROOT / "starter" / "vector_add", klass / "bob" / "vector_add")
    (klass / "times.csv").write_text(TIMES)
    return klass


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    pytest.importorskip("copydetect", reason="the similarity review needs copydetect")
    root = tmp_path_factory.mktemp("course")
    klass = build_class(root)
    (root / "course.toml").write_text(COURSE)
    output = batch(klass, root / "out", "--course", str(root / "course.toml"))
    return klass, root / "out", root / "course.toml", output


def test_the_disguised_copy_is_the_one_flagged_pair(graded):
    _, out, _, output = graded
    with (out / "similarity.csv").open() as file:
        found = list(csv.reader(file))
    assert found[0] == ["assignment", "student_a", "student_b", "similarity", "language"]
    assert [row[:3] for row in found[1:]] == [["vector_add", "alice", "ally"]], found
    assert float(found[1][3]) >= 0.85 and found[1][4] == "python" and "similar pairs for review: 1" in output
    page = (out / "summary.html").read_text()
    flagged = page[page.index("Flagged for review"):page.index('<h2 id="similar">')]
    assert "similar to ally" in flagged and "similar to alice" in flagged and 'href="tut/report.html"' not in flagged


def test_late_extended_and_on_time_students_get_what_course_toml_says(graded):
    _, out, _, _ = graded
    table = grades_csv(out)
    assert list(next(iter(table.values()))) == ["student", "vector_add", "total", "vector_add_days_late",
                                                "vector_add_late_points", "tier"]  # fmt: skip (the CPU tier: advice)
    for student, (points, days, taken) in EXPECTED.items():
        row = table[student]
        assert (float(row["vector_add"]), row["vector_add_days_late"], row["vector_add_late_points"]) == (
            pytest.approx(points), days, taken), (student, row)  # fmt: skip
    reports = {s: (out / s / "report.html").read_text() for s in EXPECTED}
    assert "Late by 2 day(s)" in reports["ally"] and "-0.80 points" in reports["ally"]
    assert "On time" in reports["tut"] and "(extended)" in reports["tut"]
    assert "On time" in reports["alice"] and "(extended)" not in reports["alice"]
    assert "no submission time is known" in reports["bob"] and "no penalty" in reports["bob"]
    ally = json.loads((out / "ally" / "results.json").read_text())
    assert ally["score"] == pytest.approx(3.2) and "Late by 2 day(s)" in ally["output"]
    assert [a["kind"] for a in ally["extra_data"]["adjustments"]] == ["late"]


def test_an_override_survives_a_regrade_of_one_student_and_the_others_are_not_graded(graded):
    klass, out, course, _ = graded
    before = {r[0]: r for r in rows(out)}
    reason = "the copy was discussed with both students: half credit"
    assert main(["override", "--out", str(out), "ally", "vector_add", "--points", "2", "--reason", reason]) == 0
    assert grades_csv(out)["ally"]["vector_add"] == "1.6"  # 2 points, less the 20% late penalty
    assert grades_csv(out)["ally"]["vector_add_override"] == "2"
    assert reason in (out / "ally" / "report.html").read_text()
    time.sleep(1)  # graded_at has one-second resolution
    output = batch(klass, out, "--course", str(course), "--regrade", "--student", "ally")
    assert "3 in the gradebook already, 1 to grade" in output
    after = {r[0]: r for r in rows(out)}
    assert after["ally"][6] > before["ally"][6] and all(after[s] == before[s] for s in ("alice", "bob", "tut"))
    table = grades_csv(out)
    assert table["ally"]["vector_add"] == "1.6" and table["alice"]["vector_add"] == "4.0"
    with sqlite3.connect(out / "gradebook.sqlite") as db:
        kept = db.execute("SELECT student, assignment, points, reason, made_at FROM overrides").fetchall()
    assert [k[:4] for k in kept] == [("ally", "vector_add", 2.0, reason)] and kept[0][4]
    assert main(["batch", str(klass), "--out", str(out), "--student", "nobody", "--device", "cpu"]) == 2


# Appended to a copy of the class page: where the two sides of each flagged pair lie.
LAYOUT = """<script>
const sides = [...document.querySelectorAll(".pair .side")].map(s => s.getBoundingClientRect());
const marks = document.querySelectorAll(".pair mark").length;
const out = sides.map(r => [Math.round(r.left), Math.round(r.right), Math.round(r.top), Math.round(r.width)]);
document.body.insertAdjacentHTML("beforeend", "<pre id=layout>" + JSON.stringify([out, marks]) + "</pre>");
</script>"""
MARK_YELLOW = (255, 213, 79)  # the highlight of a shared run


def test_the_class_page_shows_the_pair_side_by_side_in_a_browser(graded, tmp_path):
    from test_report_browser import _chromium, _count_near, _pillow

    chromium, image = _chromium(), _pillow()
    _, out, _, _ = graded
    page = tmp_path / "summary.html"
    page.write_text((out / "summary.html").read_text().replace("</body>", LAYOUT + "</body>"))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,900"]
    dom = subprocess.run([chromium, *flags, "--virtual-time-budget=2000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    found = re.search(r'<pre id="layout">(.*?)</pre>', dom.stdout)
    assert found, dom.stderr[-2000:]
    sides, marks = json.loads(html.unescape(found.group(1)))
    assert len(sides) == 2 and marks > 2, (sides, marks)
    (left, left_end, left_top, left_width), (right, _, right_top, right_width) = sides
    assert left_top == right_top and right >= left_end and min(left_width, right_width) > 400, sides
    shot = tmp_path / "similar.png"
    pair = tmp_path / "pair.html"  # the page from its similar pairs on, so they are on the first screen
    text = (out / "summary.html").read_text()
    pair.write_text(text[: text.index("<body>") + 6] + text[text.index('<h2 id="similar">'):])
    subprocess.run([chromium, *flags, f"--screenshot={shot}", pair.as_uri()], capture_output=True, timeout=120)
    shutil.copy(shot, tmp_path.parent / "similar-pair.png")  # kept beside the test's folder, to look at
    pixels = np.asarray(image.open(shot).convert("RGB"), dtype=np.int32).reshape(-1, 3)
    assert _count_near(pixels, MARK_YELLOW, slack=12) > 2000, "the shared runs are not highlighted"


@pytest.mark.gpu
@requires_gpu
def test_a_gpu_batch_ranks_the_class_under_pseudonyms(tmp_path):
    """On a GPU: the solution and the tutorial's kernel are timed, each results.json carries its
    leaderboard entry, one page names the GPU and ranks both under pseudonyms, and each report
    names its own."""
    from grader.course.leaderboard import pseudonym

    klass = tmp_path / "class"
    shutil.copytree(REPO_ROOT / "solutions" / "vector_add", klass / "alice" / "vector_add")
    shutil.copytree(TESTS / "corpus" / "triton_tutorial_vector_add" / "vector_add", klass / "tut" / "vector_add")
    out = tmp_path / "out"
    environment = {**{k: v for k, v in os.environ.items() if not k.startswith("GRADER_")}, "GRADER_SALT": SALT}
    done = subprocess.run([sys.executable, "-m", "grader", "batch", str(klass), "--out", str(out), "--assignment",
                           "vector_add", "--device", "cuda"], cwd=REPO_ROOT, capture_output=True, text=True,
                          env=environment, timeout=1200)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    [page] = list((out / "leaderboards").glob("*.html"))
    text = page.read_text()
    for student in ("alice", "tut"):
        name = pseudonym(student, SALT)
        assert name in text and student not in text
        assert f"Your name on the class leaderboard: {name}" in (out / student / "report.html").read_text()
        [entry] = json.loads((out / student / "results.json").read_text())["leaderboard"]
        assert entry["name"] == "vector_add (x torch)" and entry["value"] > 0
