"""`python -m grader batch` on a real Dask cluster of two CPU workers, with a small class built here.

The class mixes every intake form (folders, a .zip, a .tar.gz, hostile archives) and outcomes (full
marks, the untouched starter, a wrong answer, a crash). Each batch runs as its own process, the
way a TA runs it, so `kill -9` can hit it in the middle; only `vector_add` is graded, to keep the
whole file within a minute or two on a two-core machine.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="batch grading needs dask[distributed], which is not installed here")
pytestmark = pytest.mark.slow  # a whole class in one batch: `make test-slow`
import psutil  # noqa: E402  (comes with distributed)

from grader.course import batch as engine  # noqa: E402
from grader.running import sandbox  # noqa: E402
from grader.cli import main
from grader.assignment.loading import load_assignment
from grader.assignment.spec import REPO_ROOT
from conftest import gradebook_rows as rows_count, no_sandbox_where_none, run_while_progressing  # noqa: E402
from test_intake import EXPORT_METADATA, write_bomb, write_tar, write_zip

SUBMISSIONS = REPO_ROOT / "tests" / "submissions" / "vector_add"
ASSIGNMENT = REPO_ROOT / "assignments" / "vector_add"
SALT = "correct horse battery staple"
# Student code that tries to read the TA's secret: it must find nothing.
SALT_THIEF = b"""import os

def add(x, y):
    seen = os.environ.get("GRADER_SALT", "") + "|" + os.environ.get("GRADER_SALT_FILE", "")
    raise RuntimeError("salt=[" + seen + "]")
"""
GRADED = {"alice": 4.0, "bob": 0.0, "carol": 0.0, "dave": 4.0, "erin": 0.0, "eve": 0.0, "grace": 0.0}
# alicia.zip escapes its folder toward alice's files (a name that reads like a classmate's is held
# back instead: test_course_class.py); frank is a link to alice's folder.
HOSTILE_ALICE = "alicia"
REFUSED = {"mallory", "trudy", "zipbomb", "frank", HOSTILE_ALICE}


def batch(submissions: Path, out: Path, *extra: str, salt_file: Path | None = None, wait: bool = True):
    engine = [] if "--scheduler" in extra else ["--device", "cpu", "--workers", "2"]
    engine += [flag for flag in no_sandbox_where_none() if flag not in extra]
    argv = [sys.executable, "-m", "grader", "batch", str(submissions), "--out", str(out),
            "--assignment", "vector_add", *engine, *extra]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADER_")}
    env.update({"GRADER_SALT_FILE": str(salt_file)} if salt_file else {})
    # Gradings cut short by kill -9 leave their work folders behind: keep them in this test's own folder.
    env["TMPDIR"] = str(out.parent / "tmp")
    (out.parent / "tmp").mkdir(exist_ok=True)
    process = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, text=True, start_new_session=wait,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    if not wait:
        return process
    # A hang guard tied to progress: a task ends by vector_add's time limit (the watchdog's), so a
    # batch that finished no task in five of them is hung, however slow the machine.
    output = run_while_progressing(process, lambda: rows_count(out), 5 * load_assignment(ASSIGNMENT).cpu_timeout_s)
    assert process.returncode == 0, output
    return output


def rows(out: Path) -> list[tuple]:
    path = out / "gradebook.sqlite"
    if not path.exists():
        return []
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            return db.execute("SELECT student, assignment, submission_hash, grader_version, score, tests, graded_at "
                              "FROM grades ORDER BY student").fetchall()  # fmt: skip
    except sqlite3.OperationalError:  # the batch is still creating the table
        return []


def grades_csv(out: Path) -> dict[str, dict[str, str]]:
    with (out / "grades.csv").open() as file:
        return {row["student"]: row for row in csv.DictReader(file)}


def build_class(root: Path) -> Path:
    root.mkdir()
    shutil.copytree(REPO_ROOT / "solutions", root / "alice")
    shutil.copytree(REPO_ROOT / "starter", root / "bob")
    shutil.copytree(SUBMISSIONS / "no_tail_mask", root / "carol")
    solution = (REPO_ROOT / "solutions" / "vector_add" / "vector_add.py").read_bytes()
    write_zip(root / "dave.zip", {"dave-final/vector_add/vector_add.py": solution})
    with tarfile.open(root / "erin.tar.gz", "w:gz") as archive:
        archive.add(SUBMISSIONS / "segfault" / "vector_add", arcname="vector_add")
    (root / "eve" / "vector_add").mkdir(parents=True)
    (root / "eve" / "vector_add" / "vector_add.py").write_bytes(SALT_THIEF)
    write_zip(root / "mallory.zip", {"vector_add/vector_add.py": solution, "../evil.py": b"print('escaped')"})
    write_tar(root / "trudy.tar.gz", {"vector_add/vector_add.py": solution}, {"vector_add/secrets": "/etc/shadow"})
    write_bomb(root / "zipbomb.zip")
    write_zip(root / "alicia.zip", {"vector_add/vector_add.py": solution, "../../alice.py": b"print('escaped')"})
    (root / "frank").symlink_to(root / "alice")
    (root / "grace").mkdir()
    (root / "grace" / "vector_add").symlink_to(REPO_ROOT / "solutions" / "vector_add")
    (root / "notes.txt").write_text("not a submission: ignored")
    return root


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class, graded once from scratch: (class folder, out folder, salt file, seconds, output)."""
    root = tmp_path_factory.mktemp("batch")
    klass = build_class(root / "class")
    salt_file = root / "salt.txt"
    salt_file.write_text(SALT + "\n")
    started = time.monotonic()
    output = batch(klass, root / "out", salt_file=salt_file)
    return klass, root / "out", salt_file, time.monotonic() - started, output


def test_grades_csv_has_a_row_per_student_and_the_right_scores(graded):
    _, out, _, _, output = graded
    table = grades_csv(out)
    assert list(next(iter(table.values()))) == ["student", "vector_add", "total", "tier"]  # the CPU tier: advice
    assert set(table) == set(GRADED) | REFUSED
    for student, score in GRADED.items():
        assert float(table[student]["vector_add"]) == score == float(table[student]["total"]), (student, output)
    assert not (out.parent / "evil.py").exists() and not (out / ".unpacked" / "evil.py").exists()


def test_every_student_gets_a_results_json_and_a_report(graded):
    _, out, _, _, _ = graded
    for student in set(GRADED) | REFUSED:
        result = json.loads((out / student / "results.json").read_text())
        assert {"score", "execution_time", "output", "tests", "extra_data"} <= set(result)
        assert result["extra_data"]["submission"] == student
        assert "vector_add" in result["extra_data"]["submission_hashes"]
        assert "<html" in (out / student / "report.html").read_text()
    reasons = {t["extra_data"]["reason"] for t in json.loads((out / "erin" / "results.json").read_text())["tests"]}
    assert "crash" in reasons


def test_a_refused_archive_costs_its_student_only_with_its_reason(graded):
    _, out, _, _, _ = graded
    expected = {"mallory": "outside the submission folder", "trudy": "is a link", "zipbomb": "MiB",
                "frank": "'frank' was not graded: it is a link", HOSTILE_ALICE: "outside the submission folder"}  # fmt: skip
    for student, problem in expected.items():
        tests = json.loads((out / student / "results.json").read_text())["tests"]
        scored = [t for t in tests if t["extra_data"]["kind"] == "correctness"]
        assert scored and all(t["extra_data"]["reason"] == "missing_file" for t in scored)
        assert all(problem in t["output"] and f"{student.split('~')[0].lower()}" in t["output"].lower()
                   for t in scored)  # fmt: skip
        assert sum(t["max_score"] for t in scored) == 4.0  # the same points at stake as everyone else's


def test_the_salt_is_used_and_student_code_cannot_read_it(graded):
    _, out, _, _, _ = graded
    eve = json.loads((out / "eve" / "results.json").read_text())
    assert eve["extra_data"]["seeds"] == "salted (secret)"
    text = json.dumps(eve)
    assert "salt=[|]" in text and SALT not in text


def test_the_summary_page_shows_the_class(graded):
    _, out, _, _, _ = graded
    page = (out / "summary.html").read_text()
    for heading in ("Score distribution", "Pass rate per part", "Commonest failure reasons", "Flagged for review"):
        assert heading in page
    assert "<svg" in page and "<style>" in page and "http" not in page  # self-contained
    assert "vector_add/add" in page and "not_implemented" in page and "wrong_result" in page
    flagged = page[page.index("Flagged for review"):page.index("Every student")]
    for student in ("erin", "mallory", "trudy", "zipbomb", "alice", "dave", "frank", HOSTILE_ALICE):
        assert f'href="{student}/report.html"' in flagged, student  # crash, refused, identical
    assert 'href="bob/report.html"' not in flagged  # the untouched starter is nobody's copy


def test_a_link_in_place_of_an_assignment_folder_is_not_followed(graded):
    """grace's vector_add/ is a link to solutions/vector_add: graded as missing, not as the solution."""
    _, out, _, _, _ = graded
    tests = [t for t in json.loads((out / "grace" / "results.json").read_text())["tests"]
             if t["extra_data"]["kind"] == "correctness"]  # fmt: skip
    assert tests and all(t["extra_data"]["reason"] == "missing_file" and "Links are not followed" in t["output"]
                         for t in tests)  # fmt: skip


def test_a_rerun_resumes_and_grades_nothing(graded):
    klass, out, salt_file, _, _ = graded
    before = rows(out)
    output = batch(klass, out, salt_file=salt_file)
    # Nothing graded again: no task handed out, and every row as the first run stored it (its hash, score,
    # tests and the second it was graded). How long the machinery alone takes is a measurement, not a check.
    assert "0 to grade" in output and rows(out) == before


@pytest.fixture
def scheduler(tmp_path):
    """A cluster started apart from the batch, as dask-jobqueue would: a scheduler and two workers."""
    address_file = tmp_path / "scheduler.json"
    dask = [sys.executable, "-m", "dask"]
    # Each in a process group of its own, which the teardown kills whole: a polite SIGTERM had the
    # worker's nannies close one after the other, 2-10 s of the test's time that checked nothing.
    quiet = {"cwd": tmp_path, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "start_new_session": True}
    processes = [subprocess.Popen([*dask, "scheduler", "--scheduler-file", str(address_file), "--port", "0",
                                   "--no-dashboard"], **quiet)]  # fmt: skip
    processes.append(subprocess.Popen([*dask, "worker", "--scheduler-file", str(address_file), "--nworkers", "2",
                                       "--nthreads", "1", "--no-dashboard"], **quiet))  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not address_file.exists() or not address_file.read_text().strip():
            assert time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.1)
        yield json.loads(address_file.read_text())["address"]
    finally:
        for process in reversed(processes):
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_regrade_grades_again_and_a_gradescope_export_is_read(tmp_path, repo, scheduler):
    export = tmp_path / "export"
    export.mkdir()
    (export / "submission_metadata.yml").write_text(EXPORT_METADATA)
    shutil.copytree(repo / "solutions", export / "submission_111")
    shutil.copytree(repo / "starter", export / "submission_222" / "my-work")
    out = tmp_path / "out"
    assert "on the cluster at" in batch(export, out, "--scheduler", scheduler)  # the device is asked of its workers
    first = rows(out)
    assert {r[0]: r[4] for r in first} == {"ada@example.edu": 4.0, "alan@example.edu+grace@example.edu": 0.0}
    time.sleep(1)  # graded_at has one-second resolution
    # On the same cluster: starting a local one of its own would add two workers' start to the test.
    assert "2 to grade" in batch(export, out, "--regrade", "--scheduler", scheduler)
    again = rows(out)
    assert [r[:5] for r in again] == [r[:5] for r in first]  # same keys, same scores, nothing doubled
    assert all(a[6] > f[6] for a, f in zip(again, first)), "--regrade must grade every task again"


def test_kill_9_in_the_middle_then_a_rerun_gives_the_clean_grades(graded, tmp_path):
    klass, clean_out, salt_file, _, _ = graded
    small = tmp_path / "class"
    small.mkdir()
    for student in ("alice", "bob", "carol", "eve"):
        shutil.copytree(klass / student, small / student)
    out = tmp_path / "out"
    process = batch(small, out, salt_file=salt_file, wait=False)
    deadline = time.monotonic() + 180
    while not rows(out):
        assert process.poll() is None and time.monotonic() < deadline, process.stdout.read() if process.poll() else ""
        time.sleep(0.05)
    family = psutil.Process(process.pid).children(recursive=True)
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stdout.close()
    at_kill = len(rows(out))
    _, alive = psutil.wait_procs(family, timeout=60)  # workers follow their parent; gradings finish
    for leftover in alive:
        leftover.kill()
    assert 0 < at_kill < 4, f"the kill came at {at_kill} of 4 rows: not in the middle"
    output = batch(small, out, salt_file=salt_file)
    assert f"{at_kill} in the gradebook already, {4 - at_kill} to grade" in output
    resumed = rows(out)
    assert len(resumed) == len({r[:4] for r in resumed}) == 4  # nothing lost, nothing doubled
    clean = {r[0]: r for r in rows(clean_out)}
    for row in resumed:
        assert row[:5] == clean[row[0]][:5]
        reasons = [t["reason"] for t in json.loads(row[5])]
        assert reasons == [t["reason"] for t in json.loads(clean[row[0]][5])]
    table, clean_table = grades_csv(out), grades_csv(clean_out)
    assert table == {s: clean_table[s] for s in table}


def test_each_gpu_worker_is_its_own_process_pinned_to_its_own_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")  # what a TA's shell may already hold

    def pinned(specs: dict) -> list[str]:
        assert all(s["cls"].__name__ == "Nanny" and s["options"]["nthreads"] == 1 for s in specs.values())
        return [s["options"]["env"]["CUDA_VISIBLE_DEVICES"] for s in specs.values()]

    assert pinned(engine.worker_specs("cuda", None)) == ["3", "5"]
    assert pinned(engine.worker_specs("cuda", 3)) == ["3", "5", "3"]  # more workers than GPUs share them
    assert pinned(engine.worker_specs("cpu", None)) == ["", ""]  # two CPU workers that see no GPU


@pytest.mark.parametrize(
    "argv",
    [
        ["batch", "/no/such/folder", "--out", "x"],
        ["batch", "tests", "--out", "x", "--assignment", "no_such_assignment"],
        ["batch", "tests", "--out", "x", "--workers", "0"],
        ["batch", "tests", "--out", "x", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"],
        ["batch", "tests"],  # --out is required
    ],
)
def test_batch_usage_errors_exit_2(argv):
    assert main(argv) == 2


def test_a_salt_in_the_environment_is_refused_with_what_to_do_instead(tmp_path, monkeypatch, capsys):
    """Issue 41, 2: a student read GRADER_SALT from the batch process's /proc/PID/environ, which
    removing the variable does not erase. The salt comes from a file; the variable is refused."""
    klass = build_class(tmp_path / "class")
    monkeypatch.setenv("GRADER_SALT", SALT)
    assert main(["batch", str(klass), "--out", str(tmp_path / "out"), "--device", "cpu"]) == 2
    said = " ".join(capsys.readouterr().out.split())
    assert "GRADER_SALT is set in the environment" in said and "GRADER_SALT_FILE=" in said and SALT not in said
    assert not (tmp_path / "out").exists(), "nothing started"
    monkeypatch.delenv("GRADER_SALT")
    monkeypatch.setenv("GRADER_SALT_FILE", str(REPO_ROOT / "assignments" / "salt"))  # where every child reads
    assert main(["batch", str(klass), "--out", str(tmp_path / "out"), "--device", "cpu"]) == 2
    assert "student code can read" in " ".join(capsys.readouterr().out.split())


def test_without_a_sandbox_a_batch_refuses_to_start_unless_told(tmp_path, monkeypatch, capsys):
    """Issue 41, 2: where bubblewrap was missing, a batch graded the class without it, saying so
    only inside each results.json. Now it stops with the reason (exit 2); --no-sandbox goes on."""
    monkeypatch.setattr(sandbox, "probe", lambda: "none (bubblewrap is not installed)")
    klass = build_class(tmp_path / "class")
    assert main(["batch", str(klass), "--out", str(tmp_path / "out"), "--device", "cpu"]) == 2
    said = " ".join(capsys.readouterr().out.split())
    assert "no working sandbox where the children run: none (bubblewrap is not installed)" in said, said
    assert "--no-sandbox" in said and not (tmp_path / "out").exists()


def test_a_batch_without_the_sandbox_still_hides_the_salt_and_the_tas_secrets(tmp_path, monkeypatch):
    """`batch --no-sandbox`: student code runs as the TA, walled by Landlock and the seccomp
    filter (exec_walls.py). A submission hunting for the salt (its environment, every process's
    environ and cmdline, the salt file whose path it is given) finds nothing, one that prints its
    environment shows none of the TA's secrets, and a correct one loses nothing; the terminal,
    every report and the class summary say the class was graded without a sandbox."""
    klass = tmp_path / "class"
    shutil.copytree(REPO_ROOT / "solutions", klass / "alice", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("hunts_for_the_salt", "prints_its_environment"):
        shutil.copytree(SUBMISSIONS / name, klass / name, ignore=shutil.ignore_patterns("expect.toml"))
    salt_file = tmp_path / "secret" / "salt"
    salt_file.parent.mkdir()
    salt_file.write_text(SALT)
    (klass / "hunts_for_the_salt" / "vector_add" / "salt_paths.txt").write_text(str(salt_file))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "a fake secret of the TA")  # the batch inherits it
    output = batch(klass, tmp_path / "out", "--no-sandbox", salt_file=salt_file)
    assert "warning: --no-sandbox" in " ".join(output.split())
    results = {s: json.loads((tmp_path / "out" / s / "results.json").read_text()) for s in GRADED_UNSANDBOXED}
    # Switched off where bubblewrap works; where it does not, the line says why there was none.
    why = sandbox.probe() if no_sandbox_where_none() else "none (switched off: --no-sandbox)"
    assert all(r["extra_data"]["sandbox"].startswith(f"{why}; Landlock") for r in results.values()), \
        [r["extra_data"]["sandbox"] for r in results.values()]
    assert grades_csv(tmp_path / "out")["alice"]["vector_add"] == "4.0"
    hunted = [t["output"] for t in results["hunts_for_the_salt"]["tests"] if t["extra_data"]["kind"] == "correctness"]
    assert hunted and all("found nothing" in text for text in hunted), hunted[0]
    printed = json.dumps(results["prints_its_environment"])
    assert "PATH=" in printed and "AWS_SECRET_ACCESS_KEY" not in printed
    assert not any(SALT in json.dumps(r) for r in results.values())
    assert "Warning: graded without a sandbox" in (tmp_path / "out" / "summary.html").read_text()


GRADED_UNSANDBOXED = ("alice", "hunts_for_the_salt", "prints_its_environment")


def test_an_unreadable_salt_file_and_an_empty_folder_are_usage_errors(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["batch", str(empty), "--out", str(tmp_path / "out"), "--device", "cpu"]) == 2
    monkeypatch.setenv("GRADER_SALT_FILE", str(tmp_path / "missing-salt"))
    assert main(["batch", str(empty), "--out", str(tmp_path / "out"), "--device", "cpu"]) == 2


def test_the_hang_guard_waits_while_there_is_progress_and_kills_a_stall(tmp_path):
    """run_while_progressing (conftest.py), which every batch here waits with: a process that keeps
    finishing work is waited for past the stall limit, one that stops is killed and the test fails."""
    counter = tmp_path / "count"
    counter.write_text("0")
    steady = ("import pathlib, sys, time\np = pathlib.Path(sys.argv[1])\n"
              "for i in range(1, 8):\n    time.sleep(1.0); p.write_text(str(i)); print(i, flush=True)\n")  # fmt: skip
    progress = lambda: int(counter.read_text() or 0)  # noqa: E731
    process = subprocess.Popen([sys.executable, "-c", steady, str(counter)], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)  # fmt: skip
    # 7 s in all, past a stall limit of 4 s: each step's second leaves room for a busy machine's start
    assert run_while_progressing(process, progress, stall_s=4).split() == [str(i) for i in range(1, 8)]
    stuck = subprocess.Popen([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(600)"],
                             stdout=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    with pytest.raises(pytest.fail.Exception, match="no progress for 3 s"):
        run_while_progressing(stuck, progress, stall_s=3)
    assert stuck.poll() is not None, "the stalled process was left running"
