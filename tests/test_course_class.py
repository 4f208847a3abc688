"""Issue 53 in a real class batch (two CPU workers, real children): a class's grades go to the
right student, and no entry stops the class.

The class, with course.toml (a deadline, a late policy, a Canvas roster matched on SIS Login ID):

    alice               the solution: 4.0, and alice's Canvas row
    Alice@somewhere     an empty folder named like alice's e-mail: 0.0, its own row, no Canvas row
    0+alice, Zed+alice  empty folders whose names hold alice's login after a `+`: the same
    bob, _bob, Bob.zip  names that read alike: all held back, in no output, until course.toml's [names] decides
    张伟                the solution, a day late: 3.6, graded under its own name
    José, Josè          empty folders: two students, two rows
    mallory.csv         an empty folder named like a table of submission times: 0.0, its own row

Every assignment folder but alice's and 张伟's vector_add is missing, so only those two start a
child; softmax, graded too, is missing for everyone (no child at all). It is graded on the CPU
tier, so every output says the points are advice, and canvas.csv waits for --advisory.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from markupsafe import escape

pytest.importorskip("distributed", reason="batch grading needs dask[distributed], which is not installed here")

from grader.assignment.spec import REPO_ROOT  # noqa: E402
from grader.cli import main  # noqa: E402
from grader.course import advisory  # noqa: E402
from test_batch import batch, grades_csv  # noqa: E402
from test_intake import GOOD, write_zip  # noqa: E402

COURSE = """
[course]
time_zone = "UTC"

[late]
per_day = 0.1

[assignments.vector_add]
due = "2026-09-15 12:00"

[canvas]
roster = "roster.csv"
match = "SIS Login ID"
"""
TIMES = "student,submitted_at\nalice,2026-09-15 10:00\n张伟,2026-09-16 10:00\nbob,2026-09-14 10:00\n"
ROSTER = """Student,ID,SIS User ID,SIS Login ID,Section
    Points Possible,,,,
"Liddell, Alice",1,S1,alice,A
"Builder, Bob",2,S2,bob,A
"Zhang, Wei",3,S3,张伟,A
"García, José",4,S4,José,A
"Doe, Jane",5,S5,jdoe,A
"""
GRADED = {"alice": 4.0, "Alice@somewhere": 0.0, "0+alice": 0.0, "Zed+alice": 0.0, "张伟": 3.6, "José": 0.0,
          "Josè": 0.0, "mallory.csv": 0.0}  # fmt: skip
HELD = ("bob", "_bob", "Bob.zip")
CLASS = ("--assignment", "softmax")  # beside test_batch.batch's vector_add
LAB = advisory.canvas_header("vector_add")


def build_class(root: Path) -> Path:
    klass = root / "class"
    for name in GRADED:
        (klass / name).mkdir(parents=True)
    for name in ("alice", "张伟"):
        shutil.copytree(REPO_ROOT / "solutions" / "vector_add", klass / name / "vector_add")
    shutil.copytree(REPO_ROOT / "solutions" / "vector_add", klass / "bob" / "vector_add")
    (klass / "_bob").mkdir()
    write_zip(klass / "Bob.zip", GOOD)
    (klass / "times.csv").write_text(TIMES)
    (root / "roster.csv").write_text(ROSTER)
    (root / "course.toml").write_text(COURSE)
    return klass


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("attribution")
    klass = build_class(root)
    output = batch(klass, root / "out", "--course", str(root / "course.toml"), *CLASS)
    return klass, root, output


def canvas_rows(out: Path) -> dict[str, dict[str, str]]:
    with (out / "canvas.csv").open() as file:
        return {row["SIS Login ID"]: row for row in csv.DictReader(file)}


def top_of(page: Path) -> str:
    text = page.read_text()
    return text[: text.index("Score distribution")]


def test_each_entry_is_graded_under_its_own_exact_name_and_none_stops_the_class(graded):
    """Issue 53, 2 and 5: `张伟` was `unnamed~...` with 0 points, `José` and `Josè` both `Jos_`; a
    folder called mallory.csv stopped the batch with no grades.csv for anyone."""
    _, root, output = graded
    table = grades_csv(root / "out")
    assert set(table) == set(GRADED), output
    assert list(table["alice"]) == ["student", "softmax", "vector_add", "total", "vector_add_days_late",
                                    "vector_add_late_points", "tier"]  # fmt: skip
    for student, points in GRADED.items():
        assert float(table[student]["vector_add"]) == pytest.approx(points) and table[student]["softmax"] == "0.0"
    assert table["张伟"]["vector_add_days_late"] == "1" and table["alice"]["vector_add_days_late"] == "0"
    assert all((root / "out" / student / "report.html").is_file() for student in GRADED)


def test_names_that_read_alike_are_held_back_from_every_output(graded):
    """Issue 53, 2: `_bob` and `Bob` beside `bob` were graded as bob (his extension and time
    included), the real bob renamed. All three wait for the TA, named at the top of the class page
    and on the terminal, and have no row, no report and no Canvas cell."""
    _, root, output = graded
    out = root / "out"
    assert not any((out / name).exists() for name in ("bob", "_bob", "Bob"))
    top = top_of(out / "summary.html")
    assert str(escape("'Bob.zip' (as 'Bob'), '_bob' (as '_bob'), 'bob' (as 'bob') have names that read alike")) in top
    assert "[names]" in top and "needs you:" in output and "held back" in " ".join(output.split())
    assert "bob" not in (out / "grades.csv").read_text().casefold()


def test_a_cpu_tier_class_says_so_everywhere_and_canvas_waits_for_advisory(graded):
    """Issue 53, 7: a batch without a GPU wrote canvas.csv as grades."""
    _, root, output = graded
    out = root / "out"
    assert not (out / "canvas.csv").exists()
    top = top_of(out / "summary.html")
    assert str(escape(advisory.CLASS_WARNING)) in top and str(escape(advisory.CANVAS_REFUSED)) in top
    assert "canvas.csv was not written" in " ".join(output.split())
    assert all(grades_csv(out)[s]["tier"] == advisory.TIER_CELL for s in GRADED)
    assert str(escape(advisory.STUDENT_NOTE)) in (out / "alice" / "report.html").read_text()


def test_with_advisory_each_roster_row_gets_its_own_students_points_only(graded):
    """Issue 53, 1: `Alice@somewhere` (also `0+alice`, `Zed+alice`) took alice's Canvas row, whose
    cell then held the impostor's 0.00. A rerun with --advisory grades nothing and exports."""
    klass, root, _ = graded
    output = batch(klass, root / "out", "--course", str(root / "course.toml"), "--advisory", *CLASS)
    assert "0 to grade" in output
    rows = canvas_rows(root / "out")
    assert list(rows["alice"])[-2:] == ["softmax (CPU tier, advisory)", LAB]
    assert rows["alice"][LAB] == "4.00" and rows["张伟"][LAB] == "3.60" and rows["José"][LAB] == "0.00"
    assert rows["bob"][LAB] == "" and rows["jdoe"][LAB] == ""  # held back; not in the class
    impostors = ("Alice@somewhere", "0+alice", "Zed+alice")
    assert all(name in " ".join(output.split()) for name in impostors)  # listed: no roster row holds them


def test_a_regrade_of_one_students_assignment_keeps_every_class_output_whole(graded):
    """Issue 53, 6: `--student S --regrade --assignment vector_add` rewrote grades.csv, canvas.csv and
    similarity.csv with vector_add alone, for the whole class."""
    klass, root, _ = graded
    out = root / "out"
    before = {name: (out / name).read_text() for name in ("grades.csv", "canvas.csv", "similarity.csv")}
    time.sleep(1)  # graded_at has one-second resolution
    output = batch(klass, out, "--course", str(root / "course.toml"), "--advisory", "--student", "alice",
                   "--regrade")  # fmt: skip  (test_batch.batch names vector_add alone)
    assert "1 to grade" in output and "x 2 assignment(s)" in output
    after = {name: (out / name).read_text() for name in before}
    assert after == before


def test_a_course_graded_folder_is_never_rewritten_without_its_course(graded, capsys):
    """Issue 53, 6: `make batch` could not pass course.toml, and over a course-graded folder it wrote
    grades.csv and the reports again without the late penalties."""
    klass, root, _ = graded
    before = (root / "out" / "grades.csv").read_text()
    assert main(["batch", str(klass), "--out", str(root / "out"), "--device", "cpu"]) == 2
    said = " ".join(capsys.readouterr().out.split())
    assert "was graded with --course" in said and "COURSE=" in said
    assert (root / "out" / "grades.csv").read_text() == before


@pytest.mark.slow  # a second class from scratch and three more batches: over a minute on a busy two-core machine
def test_an_override_a_regrade_and_a_rerun_write_what_a_clean_run_with_the_override_writes(graded):
    """Done when, issue 53: a class batch with a course.toml, an override, a `--student --regrade
    --assignment` and a rerun writes the same grades.csv and canvas.csv as a clean run with the override."""
    klass, root, _ = graded
    course = ("--course", str(root / "course.toml"), "--advisory")
    override = ["alice", "vector_add", "--points", "3", "--reason", "checked by hand"]
    assert main(["override", "--out", str(root / "out"), *override]) == 0
    time.sleep(1)
    batch(klass, root / "out", *course, "--student", "张伟", "--regrade")
    batch(klass, root / "out", *course, *CLASS)
    batch(klass, root / "clean", *course, *CLASS)
    assert main(["override", "--out", str(root / "clean"), *override]) == 0
    for name in ("grades.csv", "canvas.csv"):
        assert (root / "out" / name).read_text() == (root / "clean" / name).read_text(), name
    table = grades_csv(root / "out")
    assert (table["alice"]["vector_add"], table["alice"]["vector_add_override"]) == ("3.0", "3")


def test_course_toml_names_release_the_entries_held_back(tmp_path):
    """The TA decides: `Bob.zip` is robert's, `_bob` nobody's. Each is then graded as course.toml
    says, bob keeps his own row and Canvas row, and the entry set aside is listed, never graded."""
    klass = tmp_path / "class"
    for name in ("bob", "_bob"):
        (klass / name).mkdir(parents=True)
    write_zip(klass / "Bob.zip", {"notes.txt": b"no vector_add here"})
    (tmp_path / "roster.csv").write_text(ROSTER)
    (tmp_path / "course.toml").write_text(COURSE.replace("[assignments.vector_add]\ndue = \"2026-09-15 12:00\"\n", "")
                                          + '[names]\n"Bob.zip" = "robert"\n"_bob" = ""\n')  # fmt: skip
    output = batch(klass, tmp_path / "out", "--course", str(tmp_path / "course.toml"), "--advisory")
    assert set(grades_csv(tmp_path / "out")) == {"bob", "robert"}
    assert canvas_rows(tmp_path / "out")["bob"][LAB] == "0.00"
    top = top_of(tmp_path / "out" / "summary.html")
    assert "set aside: course.toml&#39;s [names] gives it no student" in top and "have names that read alike" not in top
    assert "bob" in output and not (tmp_path / "out" / "_bob").exists()


def test_make_batch_passes_course_toml():
    """Issue 53, 6: `make batch` had no way to pass course.toml."""
    environment = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}  # under make test
    said = subprocess.run(["make", "-n", "--no-print-directory", "batch", "SUBMISSIONS=class", "OUT=graded",
                           "COURSE=course.toml"], cwd=REPO_ROOT, env=environment, capture_output=True, text=True,
                          check=True).stdout  # fmt: skip
    [line] = [line for line in said.splitlines() if "-m grader batch" in line]
    assert line.endswith("-m grader batch class --out graded --course course.toml"), line
