"""What a course runs around the grade (grader/course/), each piece on data made here: course.toml,
late policy and submission times, overrides, leaderboards from timed results, hidden cases, the
Canvas export and the similarity review's separation of copies from independent solutions.

The leaderboard needs timed results, which the CPU tier never has: its tests build GPU-tier
performance results at the judging layer (judging.speed_metrics on made-up timings, marked TEST
DATA below), as test_report.py does for the speed chart. test_course_batch.py runs the batch."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import re
import sqlite3
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from markupsafe import escape
from rich.console import Console

from grader.judging import verdicts as judging
from grader.reporting import hidden, report, summary
from grader.reporting import terminal as terminal_table
from grader.course import adjustments, advisory, canvas, late, leaderboard, outputs, overrides, similarity
from grader.course.config import DEFAULT_THRESHOLD, Course, CourseError, LatePolicy, load_course
from grader.course.gradebook import Entry, Gradebook, Key
from grader.messages.reports import Activity, BenchReport, Timings
from grader.reporting.results import Grade, TestResult
from grader.reporting.results_json import gradescope
from conftest import grade, requires_gpu
from grader.assignment.loading import assignment_names, load_assignment, load_assignments
from grader.assignment.spec import REPO_ROOT

TESTS = Path(__file__).resolve().parent
KNOWN = assignment_names()
COURSE_TOML = """
[course]
time_zone = "America/New_York"

[late]
per_day = 0.1
limit = 0.3
cutoff_days = 7
grace_minutes = 10

[assignments.vector_add]
due = "2026-09-15 23:59"
canvas_column = "Lab 1: vector addition (1001)"

[assignments.softmax]
due = 2026-10-01T12:00:00+02:00

[[extensions]]
student = "bob"
assignment = "vector_add"
days = 2

[[extensions]]
student = "carol"
due = "2026-09-30 09:00"

[leaderboard]
enabled = false
"""


def course(tmp_path: Path, text: str = COURSE_TOML) -> Course:
    path = tmp_path / "course.toml"
    path.write_text(text)
    return load_course(path, KNOWN)


def test_course_toml_gives_due_times_in_their_zones_and_extensions(tmp_path):
    loaded = course(tmp_path)
    due, extended = loaded.due_for("alice", "vector_add")
    assert due == datetime(2026, 9, 16, 3, 59, tzinfo=timezone.utc) and not extended  # 23:59 in New York (EDT)
    assert loaded.due_for("bob", "vector_add") == (due + timedelta(days=2), True)
    assert loaded.due_for("Bob", "vector_add") == (due, False)  # names compare exactly: Bob is not bob
    assert loaded.due_for("bob", "softmax") == (datetime(2026, 10, 1, 10, 0, tzinfo=timezone.utc), False)
    assert loaded.due_for("carol", "vector_add")[0] == datetime(2026, 9, 30, 13, 0, tzinfo=timezone.utc)
    assert loaded.due_for("alice", "matmul") is None  # no deadline: no lateness at all
    assert loaded.canvas_columns["vector_add"] == "Lab 1: vector addition (1001)" and not loaded.leaderboard
    assert loaded.similarity and loaded.threshold == 0.5


@pytest.mark.parametrize(
    "text, says",
    [
        ("[assignments.no_such_lab]\ndue = '2026-01-01 00:00'", "no such assignment"),
        ("[late]\nper_day = 1.5", "key 'per_day'"),
        ("[late]\nper_dya = 0.1", "unknown key(s): per_dya"),
        ("[assignments.vector_add]\ndue = 'next friday'", "expected a time"),
        ("[course]\ntime_zone = 'Mars/Olympus'", "key 'time_zone'"),
        ("[[extensions]]\nstudent = 'bob'", "key 'days'"),
        ("[similarity]\nthreshold = 0", "key 'threshold'"),
        ("[similarity]\nreferences = ['no/such/folder']", "not found"),
    ],
)
def test_a_bad_course_toml_names_the_file_and_the_key(tmp_path, text, says):
    with pytest.raises(CourseError) as caught:
        course(tmp_path, text)
    assert str(tmp_path / "course.toml") in str(caught.value) and says in str(caught.value)


def test_the_late_policy_counts_part_days_whole_caps_at_the_limit_and_zeroes_past_the_cut_off():
    policy = LatePolicy(per_day=0.1, limit=0.3, cutoff_days=7, grace=timedelta(minutes=10))
    hours = lambda h: timedelta(hours=h)  # noqa: E731
    assert policy.share_taken(hours(-5)) == (0, 0.0)
    assert policy.share_taken(timedelta(minutes=9)) == (0, 0.0)  # within the grace
    assert policy.share_taken(hours(1)) == (1, 0.1)  # a part day counts whole
    assert policy.share_taken(hours(25)) == (2, 0.2)
    assert policy.share_taken(hours(24 * 6)) == (6, 0.3)  # capped at the limit
    assert policy.share_taken(hours(24 * 7 + 1)) == (8, 1.0)  # past the cut-off: every point
    assert LatePolicy().share_taken(hours(100)) == (5, 0.0)  # no policy: lateness shown, nothing taken


def _times_folder(tmp_path: Path) -> tuple[Path, list]:
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "times.csv").write_text("student,submitted_at,assignment\n"
                                      "alice,2026-09-15 20:00,\n"
                                      "bob,2026-09-17 08:00,vector_add\n"
                                      "carol,2026-09-20T12:00:00+00:00,\n")  # fmt: skip
    (folder / "notes.csv").write_text("name,comment\nalice,great\n")  # another CSV: not ours, ignored
    submissions = [SimpleSubmission(s, folder / s) for s in ("alice", "bob", "carol", "dave")]
    return folder, submissions


@dataclasses.dataclass
class SimpleSubmission:
    student: str
    source: Path

    @property
    def people(self) -> tuple[str, ...]:
        return (self.student,)


@dataclasses.dataclass
class GroupSubmission(SimpleSubmission):
    members: tuple[str, ...] = ()

    @property
    def people(self) -> tuple[str, ...]:
        return self.members


def test_submission_times_come_from_a_csv_beside_the_submissions(tmp_path):
    loaded = course(tmp_path)
    folder, submissions = _times_folder(tmp_path)
    times, unread = late.submission_times(folder, submissions, loaded)
    assert unread == []
    on_time = late.lateness(loaded, "alice", "vector_add", times)
    assert (on_time.days, on_time.share, on_time.source) == (0, 0.0, "times.csv")
    extended = late.lateness(loaded, "bob", "vector_add", times)  # 32 h after the due time, inside two more days
    assert extended.extended and (extended.days, extended.share) == (0, 0.0)
    carol = late.lateness(loaded, "carol", "softmax", times)  # no extension for softmax: due Oct 1
    assert (carol.days, carol.share) == (0, 0.0)
    unknown = late.lateness(loaded, "dave", "vector_add", times)
    assert unknown.submitted is None and unknown.share == 0.0
    assert "no submission time is known" in unknown.text(0.0) and "no penalty" in unknown.text(0.0)
    assert late.lateness(loaded, "alice", "matmul", times) is None


def test_submission_times_come_from_gradescope_metadata(tmp_path):
    sys.path.insert(0, str(TESTS))
    from test_intake import EXPORT_METADATA

    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "submission_metadata.yml").write_text(EXPORT_METADATA)
    submissions = [SimpleSubmission("ada@example.edu", folder / "submission_111")]
    loaded = course(tmp_path, "[assignments.vector_add]\ndue = 2026-01-09T12:00:00-08:00\n[late]\nper_day = 0.25")
    times, _ = late.submission_times(folder, submissions, loaded)
    found = late.lateness(loaded, "ada@example.edu", "vector_add", times)  # created_at 2026-01-10 12:00 -08:00
    assert (found.days, found.share, found.source) == (1, 0.25, "Gradescope")
    assert late.gradescope_time("2026-01-10 12:00:00.123456789 -08:00") == datetime(
        2026, 1, 10, 20, 0, 0, 123456, tzinfo=timezone.utc)  # fmt: skip


def _lateness(days: int, share: float, submitted: bool = True) -> late.Lateness:
    due = datetime(2026, 9, 16, 3, 59, tzinfo=timezone.utc)
    return late.Lateness(due, False, due + timedelta(days=days) if submitted else None, "times.csv", days, share)


def test_an_override_replaces_the_tests_points_and_the_late_penalty_still_applies():
    made = overrides.Override("alice", "vector_add", 5.0, "regraded by hand: the timeout was ours", "2026-09-20T10:00:00+00:00")
    mine = adjustments.for_student("alice", {"vector_add": 2.0, "softmax": 6.0}, {("alice", "vector_add"): made},
                                   {"vector_add": _lateness(2, 0.2), "softmax": _lateness(9, 1.0)})  # fmt: skip
    tests = [TestResult("vector_add", "add", "correctness", "a", "wrong_result", 2.0, 6.0, ""),
             TestResult("softmax", "softmax", "correctness", "b", "ok", 6.0, 6.0, "")]  # fmt: skip
    grade = Grade("alice", tests, {}, 0.0, mine.adjustments)
    assert math.isclose(grade.score, 8.0 + 3.0 - 1.0 - 6.0)
    assert math.isclose(grade.assignment_score("vector_add"), 4.0) and grade.assignment_score("softmax") == 0.0
    assert mine.late == {"vector_add": (2, pytest.approx(1.0)), "softmax": (9, 6.0)}
    texts = [a.text for a in mine.adjustments]
    assert "set to 5 points by course staff" in texts[0] and "the timeout was ours" in texts[0]
    assert "-1.00 points" in texts[1] and "every point (past the cut-off)" in texts[2]
    nobody = adjustments.for_student("dave", {"vector_add": 4.0}, {}, {"vector_add": _lateness(0, 0.0, False)})
    assert [a.points for a in nobody.adjustments] == [0.0] and nobody.late == {"vector_add": (None, 0.0)}


def test_overrides_keep_their_history_and_the_latest_is_in_force(tmp_path):
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        overrides.record(book.connection, "alice", "vector_add", 3.0, "first look")
        overrides.record(book.connection, "alice", "vector_add", 4.5, "second look")
        forced = overrides.in_force(book.connection)
    assert forced[("alice", "vector_add")].points == 4.5 and forced[("alice", "vector_add")].reason == "second look"
    with sqlite3.connect(tmp_path / "gradebook.sqlite") as db:
        rows = db.execute("SELECT points, reason, made_at FROM overrides ORDER BY id").fetchall()
    assert [r[:2] for r in rows] == [(3.0, "first look"), (4.5, "second look")] and all(r[2] for r in rows)


# TEST DATA: GPU-tier results made at the judging layer from made-up timings (no GPU measured these).
def timed(assignment: str, part: str, ratio: float, gpu: str = "NVIDIA H100 80GB HBM3") -> TestResult:
    bench = BenchReport(Timings([0.1 / ratio] * 20, [0.0] * 20), Timings([0.1] * 20, [0.0] * 20), Activity(),
                        copy_gbps=3000.0, device_name=gpu)  # fmt: skip
    metrics = judging.speed_metrics(bench, {"bytes": 10**6, "flops": 0})
    return TestResult(assignment, part, "performance", f"{assignment}/{part}: speed", "ok" if ratio >= 0.8 else "too_slow",
                      1.0 if ratio >= 0.8 else 0.5, 1.0, "timed", metrics)  # fmt: skip


def test_leaderboard_entries_are_the_geometric_mean_of_every_timed_ratio():
    tests = [timed("softmax", "softmax", 2.0), timed("softmax", "online", 0.5), timed("vector_add", "add", 1.1)]
    board = gradescope(Grade("alice", tests, {"device": "cuda"}, 1.0))["leaderboard"]
    assert board == [{"name": "softmax (x torch)", "value": 1.0, "order": "desc"},
                     {"name": "vector_add (x torch)", "value": 1.1, "order": "desc"}]  # fmt: skip
    untimed = TestResult("softmax", "online", "performance", "x", "wrong_result", 0.0, 1.0, "not timed")
    assert leaderboard.geometric_mean_ratio([tests[0], untimed]) is None  # every benchmark, or no entry
    cpu = TestResult("softmax", "softmax", "performance", "x", "no_gpu", 0.0, 1.0, "needs a GPU")
    assert "leaderboard" not in gradescope(Grade("alice", [cpu], {"device": "cpu"}, 1.0))


def test_pseudonyms_are_stable_keyed_by_the_salt_and_distinct_across_a_class():
    assert leaderboard.pseudonym("alice", "s1") == leaderboard.pseudonym("alice", "s1")
    assert leaderboard.pseudonym("alice", "s1") != leaderboard.pseudonym("alice", "s2")
    names = {leaderboard.pseudonym(f"student{i}@uni.edu", "salt") for i in range(500)}
    assert len(names) == 500 and all("student" not in n for n in names)


def _entry(student: str, assignment: str, tests: list[TestResult], device: str = "cuda") -> Entry:
    return Entry(Key(student, assignment, "hash-" + student, "v"), device, tests, {"device": device}, 1.0, "now")


def test_a_leaderboard_page_per_gpu_model_under_pseudonyms_and_each_report_names_its_own(tmp_path):
    students = {
        "alice": [_entry("alice", "vector_add", [timed("vector_add", "add", 1.2)])],
        "bob": [_entry("bob", "vector_add", [timed("vector_add", "add", 0.7)])],
        "carol": [_entry("carol", "vector_add", [timed("vector_add", "add", 0.9, gpu="NVIDIA H200")])],
        "dave": [_entry("dave", "vector_add", [TestResult("vector_add", "add", "performance", "x", "wrong_result",
                                                          0.0, 1.0, "not timed")])],  # fmt: skip
    }
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        extras = outputs.prepare(Course(path=None, similarity=False), students, {}, tmp_path, [],
                                 load_assignments(["vector_add"]), "the salt", book.connection)  # fmt: skip
    summary.write_outputs(tmp_path, students, {}, load_assignments(["vector_add"]), extras)
    pages = sorted(p.name for p in (tmp_path / "leaderboards").iterdir())
    assert pages == ["nvidia-h100-80gb-hbm3.html", "nvidia-h200.html"]
    h100 = (tmp_path / "leaderboards" / pages[0]).read_text()
    alice, bob = (leaderboard.pseudonym(s, "the salt") for s in ("alice", "bob"))
    assert h100.index(alice) < h100.index(bob) and "1.200" in h100 and "0.700" in h100
    for student in students:
        assert student not in h100  # pseudonyms only
    assert f"Your name on the class leaderboard: {alice}" in (tmp_path / "alice" / "report.html").read_text()
    assert "leaderboard" not in (tmp_path / "dave" / "report.html").read_text()  # not ranked, no name to give
    assert 'href="leaderboards/nvidia-h200.html"' in (tmp_path / "summary.html").read_text()


def test_the_leaderboard_is_off_where_course_toml_says_or_without_a_salt(tmp_path):
    students = {"alice": [_entry("alice", "vector_add", [timed("vector_add", "add", 1.2)])]}
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        off = outputs.prepare(Course(path=None, similarity=False, leaderboard=False), students, {}, tmp_path, [],
                              [], "the salt", book.connection)  # fmt: skip
        unsalted = outputs.prepare(Course(path=None, similarity=False), students, {}, tmp_path, [], [], "",
                                   book.connection)  # fmt: skip
    assert not off.boards and not off.students["alice"].notes
    assert not unsalted.boards and any("salt" in note for note in unsalted.notes)


def test_a_hidden_case_keeps_its_inputs_and_diagnosis_from_the_student(tmp_path, repo):
    toml = (repo / "assignments" / "vector_add" / "assignment.toml").read_text()
    folder = tmp_path / "vector_add"
    folder.mkdir()
    (folder / "reference.py").write_text((repo / "assignments" / "vector_add" / "reference.py").read_text())
    (folder / "assignment.toml").write_text(toml.replace('"float16 97",', '"float16 97 hidden", { shape = [5], dtype = "float32", hidden = true },'))  # fmt: skip
    cases = load_assignment(folder).parts[0].cases
    assert [c.hidden for c in cases[:3]] == [False, True, True]
    where = {"rows": 1, "cols": 97, "tile": [1, 8], "shares": [[0.0, 1.0]], "bad_row_ranges": "0", "bad_col_ranges": "90-96"}
    secret = TestResult("vector_add", "add", "correctness", "vector_add/add: float16 97", "wrong_result", 0.0, 1.0,
                        "max abs error 3.5 at index 93 of float16 97", {"where": where}, hidden=True)  # fmt: skip
    shown = TestResult("vector_add", "add", "correctness", "vector_add/add: float32 1", "ok", 1.0, 1.0, "")
    grade = Grade("alice", [shown, secret], {"device": "cpu", "tier": "CPU"}, 1.0)
    page = report.render_html(grade)
    assert "hidden case 1" in page and hidden.HIDDEN_OUTPUT in page and "wrong_result" in page
    assert "float16 97" not in page and "index 93" not in page and "Where it is wrong" not in page
    terminal = io.StringIO()
    terminal_table.print_table(grade, Console(file=terminal, width=200))
    assert "float16 97" not in terminal.getvalue() and "hidden case 1" in terminal.getvalue()
    tests = gradescope(grade)["tests"]
    assert [t["visibility"] for t in tests] == ["visible", "after_due_date"]
    assert "index 93" in tests[1]["output"]  # Gradescope shows it whole once the deadline has passed


ROSTER = """Student,ID,SIS User ID,SIS Login ID,Section,Lab 0 (999),Current Score
    Points Possible,,,,,10.00,(read only)
"Doe, Jane",101,S101,jdoe,GPU 101,10,100
"Roe, Rich",102,S102,rroe,GPU 101,8,80
"Poe, Ed",103,S103,epoe,GPU 101,,0
"""


def test_the_canvas_export_keeps_the_roster_columns_and_adds_a_column_per_assignment(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("\ufeff" + ROSTER)  # Canvas writes a byte-order mark
    points = {"jdoe": {"vector_add": 5.5}, "ed.group": {"vector_add": 3.0}, "zed": {"vector_add": 1.0}}
    people = {"ed.group": ("rroe", "epoe")}  # a Gradescope group: each member gets its points
    unmatched, errors = canvas.write_import(roster, "SIS Login ID", tmp_path / "canvas.csv", points, people,
                                            {"vector_add": "Lab 1 (1001)"}, {"vector_add": 6.0})  # fmt: skip
    rows = list(csv.reader((tmp_path / "canvas.csv").open()))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lab 1 (1001)"]
    assert rows[1] == ["    Points Possible", "", "", "", "", "6"]
    assert rows[2] == ["Doe, Jane", "101", "S101", "jdoe", "GPU 101", "5.50"]
    assert rows[3][-1] == "3.00" and rows[4][-1] == "3.00"
    assert unmatched == ["zed"] and errors == []
    (tmp_path / "bad.csv").write_text("name,score\nx,1\n")
    with pytest.raises(canvas.RosterError):
        canvas.write_import(tmp_path / "bad.csv", "SIS Login ID", tmp_path / "x.csv", points, {}, {}, {})


# Issue 53, 1: entries named after a classmate's login took that classmate's Canvas row (the
# e-mail's user part, a `+` taken for a group, case folded), and the first in sort order won.
IMPOSTORS = ["Alice@somewhere", "0+alice", "Zed+alice", "ALICE", "alice@uni.edu", " alice", "alice.", "ａｌｉｃｅ"]
ALICE_ROSTER = "Student,ID,SIS User ID,SIS Login ID,Section\n\"Liddell, Alice\",7,S7,alice,A\n\"Doe, Jane\",8,S8,jdoe,A\n"


@pytest.mark.parametrize("impostor", IMPOSTORS)
def test_a_roster_row_goes_only_to_the_student_its_column_names_exactly(tmp_path, impostor):
    """The impostor's 0.00 never lands in alice's row, whether or not alice is in the batch."""
    (tmp_path / "roster.csv").write_text(ALICE_ROSTER)
    for points in ({impostor: {"vector_add": 0.0}}, {impostor: {"vector_add": 0.0}, "alice": {"vector_add": 4.0}}):
        unmatched, errors = canvas.write_import(tmp_path / "roster.csv", "SIS Login ID", tmp_path / "canvas.csv",
                                                points, {}, {"vector_add": "Lab 1"}, {"vector_add": 6.0})  # fmt: skip
        rows = {row["SIS Login ID"]: row for row in csv.DictReader((tmp_path / "canvas.csv").open())}
        assert rows["alice"]["Lab 1"] == ("4.00" if "alice" in points else ""), (impostor, rows)
        assert unmatched == [impostor] and errors == [] and rows["jdoe"]["Lab 1"] == ""


def test_an_ambiguous_roster_row_is_left_empty_and_heads_the_class_page(tmp_path):
    """alice handed in alone and in a Gradescope group; jdoe's login is on two rows: no row of
    either is filled, and each ambiguity is listed at the top of the class page and in the batch's notes."""
    (tmp_path / "roster.csv").write_text(ALICE_ROSTER + "\"Doe, John\",9,S9,jdoe,B\n")
    (tmp_path / "course.toml").write_text('[canvas]\nroster = "roster.csv"\nmatch = "SIS Login ID"\n'
                                          '[similarity]\nenabled = false\n')  # fmt: skip
    loaded = course(tmp_path, (tmp_path / "course.toml").read_text())
    tests = [TestResult("vector_add", "add", "correctness", "a", "ok", 4.0, 4.0, "")]
    students = {s: [_entry(s, "vector_add", tests)] for s in ("alice", "alice+bob", "jdoe")}
    submissions = [SimpleSubmission("alice", tmp_path), SimpleSubmission("jdoe", tmp_path),
                   GroupSubmission("alice+bob", tmp_path, ("alice", "bob"))]  # fmt: skip
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        extras = outputs.prepare(loaded, students, {}, tmp_path, submissions, load_assignments(["vector_add"]), "",
                                 book.connection)  # fmt: skip
    summary.write_outputs(tmp_path, students, {}, load_assignments(["vector_add"]), extras)
    rows = list(csv.DictReader((tmp_path / "canvas.csv").open()))
    assert [row["vector_add"] for row in rows] == ["", "", ""]
    page = (tmp_path / "summary.html").read_text()
    top = page[: page.index("Score distribution")]
    assert "roster line 2 (SIS Login ID &#39;alice&#39;) stands for &#39;alice&#39; and &#39;alice+bob&#39;" in top
    assert "&#39;jdoe&#39; is &#39;jdoe&#39; in 2 roster rows" in top


def test_without_copydetect_the_review_is_skipped_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(similarity, "unavailable", lambda: "similarity review skipped: copydetect is not installed")
    folders = {"alice": REPO_ROOT / "solutions", "bob": REPO_ROOT / "solutions"}
    entries = {s: [_entry(s, "vector_add", [], "cpu")] for s in folders}
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        extras = outputs.prepare(Course(path=None), entries, folders, tmp_path, [], load_assignments(["vector_add"]),
                                 "", book.connection)  # fmt: skip
    assert extras.review.skipped and extras.notes == [extras.review.skipped]
    summary.write_outputs(tmp_path, entries, {}, load_assignments(["vector_add"]), extras)
    assert "copydetect is not installed" in (tmp_path / "summary.html").read_text()
    assert (tmp_path / "similarity.csv").read_text().splitlines() == ["assignment,student_a,student_b,similarity,language"]


# Corpus entries that are one upstream file, wrapped twice (llm.c's GELU, kernels 1 and 2), or two
# versions of it (Triton's tutorial 01 before and after it asked for the active torch device): not independent.
SAME_SOURCE = {frozenset({"llmc_gelu_forward1", "llmc_gelu_forward2"}),
               frozenset({"triton_tutorial_vector_add", "triton_tutorial_vector_add_is_cuda"})}


def test_the_review_flags_disguised_copies_and_no_pair_of_independent_solutions(tmp_path):
    """Every assignment's solution and public corpus kernels, plus a disguised copy of each Python
    one (tests/disguise.py: names, order, comments and docstrings changed): each copy is flagged
    against its original, and no two independent solutions are. The figures behind the threshold."""
    pytest.importorskip("copydetect", reason="the similarity review needs copydetect")
    from disguise import disguise

    folders = {"solutions": REPO_ROOT / "solutions"}
    for entry in sorted((TESTS / "corpus").glob("*/expect.toml")):
        folders[entry.parent.name] = entry.parent
    originals = {}
    for name, folder in list(folders.items()):
        for source in sorted(folder.glob("*/*.py")):
            copy = tmp_path / f"copy_of_{name}" / source.parent.name / source.name
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(disguise(source.read_text()))
            folders[f"copy_of_{name}"] = tmp_path / f"copy_of_{name}"
            originals[f"copy_of_{name}"] = name
    every = similarity.review(folders, load_assignments(), REPO_ROOT / "starter", 0.01).pairs  # every pair that shares a run

    def same_source(a: str, b: str) -> bool:
        a, b = originals.get(a, a), originals.get(b, b)
        return a == b or frozenset((a, b)) in SAME_SOURCE

    # Two disguised copies of different sources are left out: disguise.py renames both with one
    # vocabulary, which no two students share (two copies of vector_add's few lines came to 0.54).
    judged = [p for p in every if not ({p.student_a, p.student_b} <= set(originals)
                                       and not same_source(p.student_a, p.student_b))]  # fmt: skip
    flagged = {frozenset((p.student_a, p.student_b)) for p in judged if p.similarity >= DEFAULT_THRESHOLD}
    expected = {frozenset((p.student_a, p.student_b)) for p in judged if same_source(p.student_a, p.student_b)}
    assert {frozenset((copy, original)) for copy, original in originals.items()} <= expected
    assert flagged == expected, sorted(map(sorted, flagged ^ expected))
    copies = [p.similarity for p in every if originals.get(p.student_a) == p.student_b
              or originals.get(p.student_b) == p.student_a]  # fmt: skip
    independent = [(p.similarity, p.student_a, p.student_b) for p in every
                   if not {p.student_a, p.student_b} & set(originals) and not same_source(p.student_a, p.student_b)]  # fmt: skip
    # The closest independent pair is two students of one course who wrote FlashAttention from the
    # same handout (CS336's, 0.43): below the threshold, though not far; the copies are far above it.
    assert min(copies) >= 0.7 and max(independent)[0] <= DEFAULT_THRESHOLD - 0.05, (min(copies), max(independent))
    print(json.dumps({"copies_min": min(copies), "independent_max": max(independent)[0]}))


def _copies(tmp_path: Path, disguise_with) -> tuple[dict[str, Path], dict[str, str]]:
    """Every solution's and corpus kernel's files (Python and CUDA C), and a copy of each disguised
    with `disguise_with(text, language)`: (folders by name, the original of each copy)."""
    folders = {"solutions": REPO_ROOT / "solutions"}
    for entry in sorted((TESTS / "corpus").glob("*/expect.toml")):
        folders[entry.parent.name] = entry.parent
    originals = {}
    for name, folder in list(folders.items()):
        for source in sorted([*folder.glob("*/*.py"), *folder.glob("*/*.cu")]):
            copy = tmp_path / f"copy_of_{name}" / source.parent.name / source.name
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(disguise_with(source.read_text(), "python" if source.suffix == ".py" else "cuda"))
            folders[f"copy_of_{name}"], originals[f"copy_of_{name}"] = copy.parent.parent, name
    return folders, originals


@pytest.mark.parametrize("how", ["pad", "junk"])
def test_a_padded_or_junk_line_copy_of_any_kernel_is_flagged(tmp_path, how):
    """Issue 53, 4: a copy padded with 660 KB of comments was past the 512 KiB cap and never
    compared; one with `_unused3 = 3` after each real statement scored 0.418 against its original.
    The review compares what the compiler sees: each such copy of every solution and corpus kernel,
    Python and CUDA C, is flagged against its original, and nothing is left uncompared."""
    pytest.importorskip("copydetect", reason="the similarity review needs copydetect")
    import disguise

    folders, originals = _copies(tmp_path, getattr(disguise, how))
    found = similarity.review(folders, load_assignments(), REPO_ROOT / "starter", DEFAULT_THRESHOLD)
    flagged = {(p.assignment, p.language, frozenset((p.student_a, p.student_b))) for p in found.pairs}
    for copy, original in originals.items():
        for source in sorted(folders[copy].glob("*/*")):
            language = "python" if source.suffix == ".py" else "cuda"
            if similarity.document(folders[original] / source.parent.name, language)[0]:
                assert (source.parent.name, language, frozenset((copy, original))) in flagged, (copy, source.name)
    assert found.uncompared == []


def test_what_the_review_cannot_compare_is_listed_with_the_reason(tmp_path, monkeypatch):
    """Past the cap on work (code left once comments are gone) or on what it reads, a submission is
    listed on the class page with the reason, never dropped without a word."""
    pytest.importorskip("copydetect", reason="the similarity review needs copydetect")
    solution = (REPO_ROOT / "solutions" / "vector_add" / "vector_add.py").read_text()
    huge = solution + "".join(f"\ndef helper_{i}(x):\n    return x * {i} + {i * 7} - {i % 5}\n" for i in range(6000))
    padded = solution + "# a comment\n" * (len(huge) // 10)  # past what the review reads (the cap made small here)
    for name, text in (("alice", solution), ("bob", huge), ("carol", padded)):
        (tmp_path / name / "vector_add").mkdir(parents=True)
        (tmp_path / name / "vector_add" / "vector_add.py").write_text(text)
    monkeypatch.setattr(similarity, "MAX_READ_BYTES", len(huge) + 1)
    folders = {name: tmp_path / name for name in ("alice", "bob", "carol")}
    found = similarity.review(folders, load_assignments(["vector_add"]), REPO_ROOT / "starter", 0.5)
    reasons = {item.student: item.reason for item in found.uncompared}
    assert set(reasons) == {"bob", "carol"}, reasons
    assert "characters of code once comments and dead statements are left out" in reasons["bob"]
    assert "the review reads" in reasons["carol"]
    entries = {s: [_entry(s, "vector_add", [], "cpu")] for s in folders}
    monkeypatch.setattr(similarity, "review", lambda *args, **kwargs: found)
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        extras = outputs.prepare(Course(path=None), entries, folders, tmp_path, [], load_assignments(["vector_add"]),
                                 "", book.connection)  # fmt: skip
    summary.write_outputs(tmp_path / "out", entries, {}, load_assignments(["vector_add"]), extras)
    page = (tmp_path / "out" / "summary.html").read_text()
    uncompared = page[page.index('id="uncompared"') : page.index("Every student")]
    assert "bob" in uncompared and "carol" in uncompared and "alice" not in uncompared


def test_the_salt_file_course_toml_names_is_read_relative_to_it(tmp_path):
    from grader.course.config import read_course_salt

    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "salt.txt").write_text("  the course's secret\n")
    assert read_course_salt(course(tmp_path, "[course]\nsalt_file = 'secret/salt.txt'")) == "the course's secret"
    assert read_course_salt(course(tmp_path, "")) == "" and read_course_salt(None) == ""
    with pytest.raises(CourseError, match="salt_file"):
        read_course_salt(course(tmp_path, "[course]\nsalt_file = 'secret/missing.txt'"))


@pytest.mark.gpu
@requires_gpu
def test_a_gpu_grade_carries_its_leaderboard_entry(tmp_path):
    """On a GPU the solution's vector_add is timed: its results.json ranks it by the geometric mean
    of its measured ratios, and a batch's leaderboard page names its GPU."""
    graded = grade(REPO_ROOT / "solutions", ["vector_add"], device="cuda")
    [entry] = gradescope(graded)["leaderboard"]
    ratios = [t.metrics["ratio"] for t in graded.tests if t.kind == "performance"]
    assert len(ratios) == 3 and entry["name"] == "vector_add (x torch)" and entry["order"] == "desc"
    assert entry["value"] == pytest.approx(math.prod(ratios) ** (1 / len(ratios)), rel=1e-3)
    students = {"alice": [Entry(Key("alice", "vector_add", "h", "v"), "cuda", graded.tests, graded.environment, 1.0,
                                "now")]}  # fmt: skip
    boards = outputs.leaderboards(students, "the salt")
    assert [b.gpu for b in boards] == [graded.environment["gpu"]] and boards[0].standings["vector_add"][0][1] > 0


def test_earlier_terms_are_references_and_given_code_is_boilerplate(tmp_path):
    """A student who hands in last term's solution is flagged against it (two earlier submissions are
    never compared with each other); code course.toml declares given is nobody's."""
    pytest.importorskip("copydetect", reason="the similarity review needs copydetect")
    from disguise import disguise

    solution = (REPO_ROOT / "solutions" / "softmax" / "softmax.py").read_text()
    earlier = tmp_path / "fall-2025"
    for name in ("kim", "lee"):
        (earlier / name / "softmax").mkdir(parents=True)
        (earlier / name / "softmax" / "softmax.py").write_text(solution)
    now = tmp_path / "class" / "max" / "softmax"
    now.mkdir(parents=True)
    (now / "softmax.py").write_text(disguise(solution))
    folders = {"max": now.parent, "ned": REPO_ROOT / "starter"}
    found = similarity.review(folders, load_assignments(["softmax"]), REPO_ROOT / "starter", 0.5, (earlier,))
    assert {(p.student_a, p.student_b) for p in found.pairs} == {("max", "earlier:fall-2025/kim"),
                                                                 ("max", "earlier:fall-2025/lee")}  # fmt: skip
    given = similarity.review(folders, load_assignments(["softmax"]), REPO_ROOT / "starter", 0.5, (earlier,),
                              boilerplate=(earlier / "kim",))  # fmt: skip
    assert not given.pairs  # all of it was given code: nothing of max's own is left to compare


def _class_with_a_roster(tmp_path: Path, device: str, export_advisory: bool = False):
    """jdoe (overridden to 5) and zed, graded on `device`, through the course's outputs."""
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER)
    loaded = Course(path=None, similarity=False, canvas_roster=roster, canvas_match="SIS Login ID",
                    canvas_columns={"vector_add": "Lab 1 (1001)"})  # fmt: skip
    tests = [TestResult("vector_add", "add", "correctness", "a", "ok", 4.0, 4.0, "")]
    students = {s: [_entry(s, "vector_add", tests, device)] for s in ("jdoe", "zed")}
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        overrides.record(book.connection, "jdoe", "vector_add", 5.0, "by hand")
        extras = outputs.prepare(loaded, students, {}, tmp_path, [], load_assignments(["vector_add"]), "",
                                 book.connection, export_advisory=export_advisory)  # fmt: skip
    summary.write_outputs(tmp_path, students, {}, load_assignments(["vector_add"]), extras)
    return extras


def test_the_batch_writes_canvas_csv_with_each_students_final_points(tmp_path):
    extras = _class_with_a_roster(tmp_path, "cuda")
    rows = list(csv.reader((tmp_path / "canvas.csv").open()))
    assert rows[0][-1] == "Lab 1 (1001)" and rows[1][-1] == "6" and rows[2][-1] == "5.00"  # the override's points
    assert any("no roster row for 1 student(s): zed" in note for note in extras.notes)
    assert "zed" in (tmp_path / "summary.html").read_text().split("Every student")[0]  # the note is on the class page
    assert grades_of(tmp_path)["jdoe"] == {"student": "jdoe", "vector_add": "5.0", "total": "5.0", "vector_add_override": "5"}
    assert not extras.attention and "advice" not in (tmp_path / "jdoe" / "report.html").read_text()


def test_a_cpu_tier_class_says_it_is_advice_everywhere_and_exports_to_canvas_only_when_asked(tmp_path):
    """Issue 53, 7: a batch without a GPU wrote canvas.csv as grades (a working CUDA transpose at 0 of 12)."""
    (tmp_path / "canvas.csv").write_text("a stale export\n")
    _class_with_a_roster(tmp_path, "cpu")
    assert not (tmp_path / "canvas.csv").exists()  # refused, and no stale file left to import by mistake
    page = (tmp_path / "summary.html").read_text()
    top = page[: page.index("Score distribution")]
    assert str(escape(advisory.CLASS_WARNING)) in top and "canvas.csv was not written" in top and "--advisory" in top
    assert grades_of(tmp_path)["jdoe"]["tier"] == "CPU (advisory)"
    assert str(escape(advisory.STUDENT_NOTE)) in (tmp_path / "jdoe" / "report.html").read_text()
    assert advisory.STUDENT_NOTE in json.loads((tmp_path / "jdoe" / "results.json").read_text())["output"]
    _class_with_a_roster(tmp_path, "cpu", export_advisory=True)
    rows = list(csv.reader((tmp_path / "canvas.csv").open()))
    assert rows[0][-1] == "vector_add (CPU tier, advisory)" and rows[2][-1] == "5.00"  # a column of its own


def grades_of(out: Path) -> dict[str, dict[str, str]]:
    with (out / "grades.csv").open() as file:
        return {row["student"]: row for row in csv.DictReader(file)}


def test_override_and_course_usage_errors_exit_2(tmp_path):
    from grader.cli import main

    assert main(["override", "--out", str(tmp_path), "alice", "vector_add", "--points", "3", "--reason", "x"]) == 2
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        book.record(Key("alice", "vector_add", "h", "v"), "cpu", [], {}, 1.0)
    for argv in (["bob", "vector_add", "--points", "3", "--reason", "x"],  # nobody of that name was graded
                 ["alice", "no_such_lab", "--points", "3", "--reason", "x"],
                 ["alice", "vector_add", "--points", "nan", "--reason", "x"],
                 ["alice", "vector_add", "--points", "3", "--reason", "  "],
                 ["alice", "vector_add", "--points", "3", "--clear", "--reason", "x"],  # one or the other
                 ["alice", "vector_add", "--clear", "--reason", "x"]):  # no override to clear  # fmt: skip
        assert main(["override", "--out", str(tmp_path), *argv]) == 2, argv
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        assert overrides.in_force(book.connection) == {}  # nothing kept from a refused command
    assert main(["batch", str(tmp_path), "--out", str(tmp_path / "out"), "--course", str(tmp_path / "none.toml")]) == 2


def test_override_points_lie_between_0_and_the_assignments_most_and_clear_removes_one(tmp_path, capsys):
    """Issue 53, 6: `--points 30` on a 10-point assignment was kept (canvas.csv exported 27.00 of
    10), so was `--points -5`, and an override could not be removed."""
    from grader.cli import main

    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        book.record(Key("alice", "flash_attention", "h", "v"), "cpu", [], {}, 1.0)
    most = load_assignment(REPO_ROOT / "assignments" / "flash_attention").points_possible(bonus=True)
    plain = load_assignment(REPO_ROOT / "assignments" / "flash_attention").points_possible()
    assert most > plain  # its backward pass is a bonus part: an override may give its points too

    def override(*argv: str) -> int:
        return main(["override", "--out", str(tmp_path), "alice", "flash_attention", *argv])

    for points in (most + 0.5, 30 * most, -5, -0.01):
        assert override("--points", str(points), "--reason", "x") == 2
        assert f"expected 0 to {most:g}" in capsys.readouterr().out
    assert override("--points", str(most), "--reason", "every point, the bonus too") == 0
    assert override("--points", "0", "--reason", "a zero is an override too") == 0
    assert override("--clear", "--reason", "the tests' points stand again") == 0
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        assert overrides.in_force(book.connection) == {}
        history = book.connection.execute("SELECT points, reason, cleared FROM overrides ORDER BY id").fetchall()
    assert history == [(most, "every point, the bonus too", 0), (0.0, "a zero is an override too", 0),
                       (0.0, "the tests' points stand again", 1)]  # fmt: skip
    assert override("--clear", "--reason", "again") == 2  # nothing left to clear


def test_an_old_gradebooks_overrides_gain_the_cleared_column(tmp_path):
    with sqlite3.connect(tmp_path / "gradebook.sqlite") as db:
        db.execute("CREATE TABLE overrides (id INTEGER PRIMARY KEY AUTOINCREMENT, student TEXT NOT NULL, assignment "
                   "TEXT NOT NULL, points REAL NOT NULL, reason TEXT NOT NULL, made_at TEXT NOT NULL)")  # fmt: skip
        db.execute("INSERT INTO overrides (student, assignment, points, reason, made_at) VALUES ('a', 'b', 1, 'r', 't')")
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        assert overrides.in_force(book.connection)[("a", "b")].points == 1
        overrides.clear(book.connection, "a", "b", "gone")
        assert overrides.in_force(book.connection) == {}


def test_a_student_folder_named_like_a_csv_and_a_bad_time_cost_their_student_only(tmp_path):
    """Issue 53, 5: with a deadline, a student folder called mallory.csv was opened as a table of
    submission times (IsADirectoryError: the batch stopped, no grades.csv for anyone); a time that
    cannot be read stopped it too."""
    loaded = course(tmp_path)
    folder, submissions = _times_folder(tmp_path)
    (folder / "mallory.csv" / "vector_add").mkdir(parents=True)
    (folder / "late.csv").write_text("student,submitted_at\nbob,next tuesday\ncarol,2026-09-16 08:00\n")
    submissions.append(SimpleSubmission("mallory.csv", folder / "mallory.csv"))
    times, unread = late.submission_times(folder, submissions, loaded)
    assert "mallory.csv" not in times and "vector_add" in times["bob"]  # bob's good row in times.csv stands
    assert len(unread) == 1 and unread[0][0] == "bob" and "late.csv: line 2: expected a time" in unread[0][1]
    students = {s.student: [_entry(s.student, "vector_add", [], "cpu")] for s in submissions}
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        extras = outputs.prepare(loaded, students, {}, folder, submissions, load_assignments(["vector_add"]), "",
                                 book.connection)  # fmt: skip
    summary.write_outputs(tmp_path / "out", students, {}, load_assignments(["vector_add"]), extras)
    assert set(grades_of(tmp_path / "out")) == {"alice", "bob", "carol", "dave", "mallory.csv"}
    assert "late.csv: line 2" in extras.flags["bob"][0]


@pytest.mark.parametrize("roster, kept", [("student\nalice\nJosé\nJosè\n张伟\n", ["alice", "José", "Josè", "张伟"]),
                                          ("student\nbob\nBob\n", "'Bob' is read alike with 'bob'"),
                                          ("student\nbob\n_bob\n", "'_bob' is read alike with 'bob'"),
                                          ("student\n.hidden\n", "'.hidden' is not a folder name")])  # fmt: skip
def test_the_services_roster_keeps_names_as_written_and_none_that_read_alike(tmp_path, roster, kept):
    """Who may submit to the service is named as the batch names a student, exactly; two roster
    names that read alike would share a token's student in every output, so they are refused."""
    from grader.service import rules

    (tmp_path / "students.csv").write_text(roster)
    (tmp_path / "course.toml").write_text('[service]\nstudents = "students.csv"\n')
    course = load_course(tmp_path / "course.toml", assignment_names())
    if isinstance(kept, list):
        assert list(rules.load(course).students) == kept
    else:
        with pytest.raises(CourseError, match=re.escape(kept)):
            rules.load(course)
