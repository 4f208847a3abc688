"""Every hostile submission in one batch: the class is graded to the end and each costs only itself.

The class is one student per CPU-tier folder under tests/submissions/vector_add/ (named after
it) but `infinite_loop`, plus `correct` (solutions/vector_add) and `starter` (the untouched stub);
each student whose hostile vector_add ends abnormally or acts around its call (a crash, a hang,
tampering, a daemon: any reason but a judged wrong answer), and `correct`, also hand in a right
`gelu`. ONE `python -m grader batch` of both assignments grades the class on a Dask cluster of
three CPU workers, as a TA runs it (three on two cores: the hang's worker sleeps, and the other
two keep both cores busy meanwhile; alone on the 2-core machine, 159 s against 186 s with two). This is what
test_wrong_submissions.py and test_isolation.py check one submission at a time, checked where the
submissions share a cluster, its workers and its temporary directory:

- the batch exits 0 with a row per student, and `correct` earns every correctness point while the
  hostile ones grade beside it;
- a hostile vector_add costs its student that assignment only: their gelu earns every
  correctness point, as the correct student's does (JUDGED below says who hands in none);
- each hostile student earns its expect.toml reason on every failing correctness test, and its
  `diagnosis` and `output` where it names them: this batch is where these folders get the check that
  test_wrong_submissions.py makes of every other one (conftest.hostile_batch_expectations; it
  grades one folder of each reason too, for `make test`, which leaves this batch to
  `make test-slow`); the memory hog is killed at the limit it names, as
  test_isolation.py shows the other limits;
- a hang (`deadlock`) costs at most the assignment's time limit plus 5 s (`batch` has no option
  to shorten it: the limit is `cpu_timeout_s` in assignment.toml, 120 s, for the whole class).
  The spinning `infinite_loop` is left out: here it would burn a core for those 120 s, which a
  two-core machine takes from every other test; test_wrong_submissions.py and test_isolation.py
  grade it with a short limit, and the watchdog's timeout does not depend on how a child hangs;
- nothing a submission writes lands outside its temporary directory: the class folder is unchanged
  byte for byte, the out folder holds only the grader's files, the batch's HOME and TMPDIR (folders
  of this test, the HOME holding a decoy solutions/) gain nothing but Dask's scratch files and the
  grader's nvcc cache, no fake results.json appears anywhere the batch or a TA could read it, no
  connection leaves, no output floods the TA's console and no process of a submission outlives
  the batch.
The checks of what the sandbox hides skip where the OS refuses it (test_isolation.py shows why).
Every assignment folder that holds exactly the solution's files (gelu beside a hostile vector_add,
the correct student's) starts from the kernels the solution's own grading compiled, copied into the
batch's compile cache under its HOME before the batch (conftest.Solutions): those kernels compile
once a run, not once a student, and a seed the batch changed or removed would show as a changed file.
About three minutes on a two-core machine beside the rest of `make test`: the hang's 120 s is the long pole.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("distributed", reason="batch grading needs dask[distributed], which is not installed here")
pytestmark = pytest.mark.slow  # a whole class in one batch: `make test-slow`
import psutil  # noqa: E402  (comes with distributed)

from conftest import (SUBMISSIONS, gradebook_rows, hostile_batch_expectations, known_wrong,  # noqa: E402
                      run_while_progressing)
from grader.running import compile_cache, sandbox  # noqa: E402
from grader.assignment.loading import load_assignment  # noqa: E402
from grader.assignment.spec import REPO_ROOT
from test_wrong_submissions import assert_diagnoses, assert_output  # noqa: E402

HOSTILE = SUBMISSIONS / "vector_add"
HANG = "deadlock"  # the batch's hang is the one that sleeps (see above)
SALT = "hostile batch salt"
# What a TA's shell may hold: no child may see any of it (grader/running/child_env.py).
TA_SECRETS = {"AWS_SECRET_ACCESS_KEY": "hostile-batch-aws-secret", "HF_TOKEN": "hf_hostile_batch_token"}
FAKE_MARK = b"FAKE-RESULTS"  # what fake_results writes into every results.json it can reach
STATUS = sandbox.probe()
requires_sandbox = pytest.mark.skipif(
    STATUS.startswith("none") or "not all hidden" in STATUS, reason=f"the OS refuses the sandbox here: {STATUS}"
)


EXPECT = hostile_batch_expectations()
STUDENTS = {*EXPECT, "correct", "starter"}
OTHER = "gelu"  # the assignment hostile students hand in right, beside their vector_add
# Reasons a grading earns by running to its end and judging what came back. A student whose
# vector_add earns one of these hands in no gelu: whatever such a grading could break, it breaks
# for the next task on its worker (another student's, every one of them checked here too).
JUDGED = {"wrong_result", "forbidden_op", "no_kernel_launched", "missing_file"}
WITH_OTHER = sorted(name for name, expect in EXPECT.items() if expect["reason"] not in JUDGED)
# Everything the grader writes under --out for this class (no archives, so no .unpacked/).
GRADER_FILES = {"grades.csv", "gradebook.sqlite", "summary.html", "similarity.csv"} | {
    f"{student}/{name}" for student in STUDENTS for name in ("results.json", "report.html")
}


@dataclass(frozen=True)
class Run:
    root: Path  # the out folder's parent: class/, home/ (the batch's HOME), tmp/ (its TMPDIR), out/
    returncode: int
    output: str
    started: float  # time.time() just before the batch
    before: dict[str, str]  # every file under root before the batch: relative path -> sha256
    after: dict[str, str]
    port: int  # where the test listened while phones_home ran
    called: bool  # whether anyone connected to it
    leftovers: list[str]  # processes of the batch alive after it exited

    @property
    def out(self) -> Path:
        return self.root / "out"

    def results(self, student: str) -> dict:
        return json.loads((self.out / student / "results.json").read_text())


def digest(path: Path) -> str:
    return f"link to {os.readlink(path)}" if path.is_symlink() else hashlib.sha256(path.read_bytes()).hexdigest()


def snapshot(root: Path) -> dict[str, str]:
    """Every file under `root`, by path relative to it, with its digest."""
    return {
        Path(folder, name).relative_to(root).as_posix(): digest(Path(folder, name))
        for folder, _, names in os.walk(root)
        for name in names
    }


def build_class(folder: Path, scratch: Path) -> None:
    for name in EXPECT:
        tree = known_wrong(HOSTILE / name, scratch)
        shutil.copytree(tree, folder / name, ignore=shutil.ignore_patterns("expect.toml"))
    shutil.copytree(REPO_ROOT / "solutions" / "vector_add", folder / "correct" / "vector_add")
    for student in [*WITH_OTHER, "correct"]:
        shutil.copytree(REPO_ROOT / "solutions" / OTHER, folder / student / OTHER)
    for assignment in ("vector_add", OTHER):
        shutil.copytree(REPO_ROOT / "starter" / assignment, folder / "starter" / assignment)


def seed_solution_kernels(klass: Path, cache: Path, solutions) -> None:
    """Each assignment folder of a student that holds exactly the solution's files (gelu beside a
    hostile vector_add, the correct student's) starts, in the batch's compile cache, from what
    the solution's grading compiled (conftest.Solutions): the batch finds those kernels instead of
    compiling them again for every student (a gelu grading: 4.4 s alone, 2.8 s from them)."""
    for folder in sorted(klass.glob("*/*")):
        solution = REPO_ROOT / "solutions" / folder.name
        if solution.is_dir() and compile_cache.files_digest(folder) == compile_cache.files_digest(solution):
            owner = folder.parent.name  # the batch's owner of a student's files: the student
            solutions.seed(folder.name, compile_cache.folder_for(cache, owner, folder.name, folder), wait=True)


def survivors(tmp: Path, grace_s: float = 10) -> list[str]:
    """Processes still running with the batch's TMPDIR (the batch, its workers, their children)
    `grace_s` after the batch exited; each is killed, so the machine is left clean whatever the verdict."""
    deadline = time.monotonic() + grace_s  # Dask's workers may still be on their way out
    while True:
        found = []
        for process in psutil.process_iter():
            try:
                if process.environ().get("TMPDIR") == str(tmp):
                    found.append((process, f"{process.pid} {' '.join(process.cmdline())[:200]}"))
            except (psutil.Error, OSError):  # gone meanwhile, or not ours to read
                pass
        if not found or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for process, _ in found:
        try:
            process.kill()
        except psutil.Error:
            pass
    return [described for _, described in found]


@pytest.fixture(scope="module")
def run(tmp_path_factory, solutions) -> Run:
    root = tmp_path_factory.mktemp("hostile-batch")
    build_class(root / "class", tmp_path_factory.mktemp("hostile-edits"))
    home, tmp = root / "home", root / "tmp"
    tmp.mkdir()
    # A decoy for searches_for_solutions, where only the sandbox keeps it out of sight.
    (home / "solutions" / "vector_add").mkdir(parents=True)
    (home / "solutions" / "vector_add" / "vector_add.py").write_text("# the decoy solution\n")
    (home / ".profile").write_text("# the TA's own file\n")
    (root / "salt").write_text(SALT)  # the TA's secret, in a file no child sees (grader/course/salt.py)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADER_")}
    env.update(GRADER_SALT_FILE=str(root / "salt"), HOME=str(home), TMPDIR=str(tmp), **TA_SECRETS)
    # The batch's compile cache (compile_cache.CACHE_ROOT, under the HOME given here), seeded
    # before the snapshot: a seed the batch changed or removed would show as a changed file.
    cache = Path(env.get("XDG_CACHE_HOME", home / ".cache")) / "kernel-grader" / "compiled"
    seed_solution_kernels(root / "class", cache, solutions)
    argv = [sys.executable, "-m", "grader", "batch", str(root / "class"), "--out", str(root / "out"),
            "--assignment", "vector_add", "--assignment", OTHER, "--device", "cpu", "--workers", "3"]  # fmt: skip
    argv += ["--no-sandbox"] if STATUS.startswith("none") else []  # as a TA is told to where the OS offers none
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        (root / "class" / "phones_home" / "vector_add" / "listener_port.txt").write_text(str(port))  # it calls there
        before = snapshot(root)
        started = time.time()
        process = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, start_new_session=True)  # fmt: skip
        # A hang guard tied to progress, not a time for the whole class: a task ends by its
        # assignment's time limit (the watchdog's), so no task finished in five of the longest is a hang.
        stall_s = 5 * max(load_assignment(REPO_ROOT / "assignments" / a).cpu_timeout_s for a in ("vector_add", OTHER))
        output = run_while_progressing(process, lambda: gradebook_rows(root / "out"), stall_s)
        try:
            listener.accept()[0].close()
            called = True
        except BlockingIOError:
            called = False
    return Run(root, process.returncode, output, started, before, snapshot(root), port, called, survivors(tmp))


def correctness(results: dict, expect: dict | None = None, assignment: str = "vector_add") -> list[dict]:
    """The graded correctness tests of one assignment's parts in scope (every part, unless
    expect.toml names some)."""
    parts = (expect or {}).get("parts")
    return [
        t for t in results["tests"]
        if t["extra_data"]["kind"] == "correctness" and t["extra_data"]["reason"] != "no_gpu"
        and t["extra_data"]["assignment"] == assignment and (parts is None or t["extra_data"]["part"] in parts)
    ]  # fmt: skip


def grades_csv(out: Path) -> dict[str, dict[str, str]]:
    with (out / "grades.csv").open() as file:
        return {row["student"]: row for row in csv.DictReader(file)}


def test_the_batch_runs_to_the_end_with_a_row_per_student(run):
    assert run.returncode == 0, f"the batch exited {run.returncode}:\n{run.output[-5000:]}"
    table = grades_csv(run.out)
    assert set(table) == STUDENTS, f"grades.csv rows: missing {STUDENTS - set(table)}, extra {set(table) - STUDENTS}"
    for student, row in table.items():
        assert float(row["vector_add"]) + float(row[OTHER]) == float(row["total"]), f"{student}: {row}"


def test_the_correct_student_loses_nothing_to_the_hostile_ones(run):
    results = run.results("correct")
    scored = correctness(results)
    lost = [(t["name"], t["extra_data"]["reason"], t["output"][:200]) for t in scored if t["status"] != "passed"]
    assert scored and not lost, f"the correct student lost correctness tests beside the hostile ones: {lost}"
    points = sum(t["max_score"] for t in scored)
    earned = float(grades_csv(run.out)["correct"]["vector_add"])
    assert earned == points > 0, f"the correct student earned {earned} of {points} correctness points"
    speed = [t for t in results["tests"] if t["extra_data"]["kind"] == "performance"]
    assert speed and {t["extra_data"]["reason"] for t in speed} == {"no_gpu"}, "speed is not graded on a CPU"
    assert results["extra_data"]["seeds"] == "salted (secret)"
    starter = correctness(run.results("starter"))
    assert starter and {t["extra_data"]["reason"] for t in starter} == {"not_implemented"}


@pytest.mark.parametrize("student", WITH_OTHER)
def test_a_hostile_vector_add_costs_its_student_nothing_else(run, student):
    theirs = correctness(run.results(student), assignment=OTHER)
    lost = [(t["name"], t["extra_data"]["reason"], t["output"][:200]) for t in theirs if t["status"] != "passed"]
    assert theirs and not lost, f"{student}'s right {OTHER} lost tests beside their hostile vector_add: {lost}"
    table = grades_csv(run.out)
    assert table[student][OTHER] == table["correct"][OTHER], (table[student], table["correct"])


@pytest.mark.parametrize("student", sorted(EXPECT))
def test_each_hostile_student_earns_its_own_reason(run, student):
    expect = EXPECT[student]
    scored = correctness(run.results(student), expect)
    failed = [t for t in scored if t["status"] != "passed"]
    assert failed, f"{student} passed every case in the batch: the grader missed it"
    wrong = {t["name"]: f"{t['extra_data']['reason']}: {t['output'][:300]}" for t in failed
             if t["extra_data"]["reason"] != expect["reason"]}  # fmt: skip
    assert not wrong, f"{student}: expected {expect['reason']} on every failing test, got {wrong}"
    assert all(t["output"].strip() for t in failed), f"{student}: a failure must say what went wrong"
    earned = float(grades_csv(run.out)[student]["vector_add"])
    assert earned < sum(t["max_score"] for t in scored), f"{student} lost no points ({earned})"
    assert_output(failed[0]["output"], expect.get("output", []))
    assert_diagnoses([SimpleNamespace(name=t["name"], metrics=t["extra_data"]["metrics"]) for t in failed],
                     expect.get("diagnosis"))  # fmt: skip


def test_a_memory_hog_is_out_of_memory_at_the_limit_it_names(run):
    limit = load_assignment(REPO_ROOT / "assignments" / "vector_add").host_memory_gib
    failed = [t for t in correctness(run.results("memory_hog")) if t["status"] != "passed"]
    assert failed and {t["extra_data"]["reason"] for t in failed} == {"out_of_memory"}
    killed = failed[0]["output"]
    assert "host_memory_gib" in killed and f"limit of {limit:g} GiB" in killed, killed
    held = float(killed.split("held ")[1].split(" GiB")[0])
    assert held < limit + 1, f"the watchdog let it reach {held} GiB"
    path = run.out / "gradebook.sqlite"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        [(seconds,)] = db.execute("SELECT seconds FROM grades WHERE student = 'memory_hog' "
                                  "AND assignment = 'vector_add'")  # fmt: skip
    # Killed for its memory, not held to its time limit (which would make it `timeout`): how fast is
    # the machine's business, so the bound is the limit, not a time of this machine's.
    timeout = load_assignment(REPO_ROOT / "assignments" / "vector_add").cpu_timeout_s
    assert seconds < timeout, f"the memory hog took {seconds:.1f} s of grading, its whole {timeout:g} s limit"


def test_a_hang_costs_at_most_its_timeout_plus_5_s(run):
    limit = load_assignment(REPO_ROOT / "assignments" / "vector_add").cpu_timeout_s
    path = run.out / "gradebook.sqlite"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        seconds = dict(db.execute("SELECT student, seconds FROM grades WHERE assignment = 'vector_add'").fetchall())
        others = db.execute("SELECT SUM(seconds) FROM grades WHERE student = ? AND assignment != 'vector_add'",
                            (HANG,)).fetchone()[0] or 0.0  # fmt: skip
    hung = seconds[HANG]
    assert limit <= hung <= limit + 5, f"the hang took {hung:.1f} s of grading for a {limit:g} s limit"
    # results.json adds up the student's assignments: the hang's own share is what is bounded.
    reported = run.results(HANG)["execution_time"] - others
    assert reported <= limit + 5, f"results.json says the hang took {reported:.1f} s for a {limit:g} s limit"
    slow = {s: round(t, 1) for s, t in seconds.items() if s != HANG and t >= limit}
    assert not slow, f"the hang (or a time limit) reached other students: {slow}"


@requires_sandbox
def test_nothing_lands_outside_the_out_folder_but_the_graders_files(run):
    changed = {p for p in run.before if run.after.get(p) != run.before[p]}
    assert not changed, f"files of the class, the HOME or the TMPDIR changed or vanished: {sorted(changed)}"
    new = set(run.after) - set(run.before)
    # Beside the out folder: Dask's scratch space, and the grader's own caches: nvcc builds (gelu.cu), and
    # what each student's gradings compiled (compile_cache.py), which only their very files find again.
    outside = {p for p in new if not p.startswith(("out/", "tmp/dask-scratch-space/", "home/.cache/kernel-grader/"))}
    assert not outside, f"files appeared outside the out folder: {sorted(outside)}"
    unexpected = {p for p in new if p.startswith("out/")} - {f"out/{name}" for name in GRADER_FILES}
    assert not unexpected, f"files in the out folder that the grader does not write: {sorted(unexpected)}"
    assert not list((run.root / "tmp").glob("grade-*")), "a grading's temporary folder outlived it"


@requires_sandbox
def test_fake_results_land_nowhere(run):
    inside = [p for p in run.after if not p.startswith("class/") and FAKE_MARK in (run.root / p).read_bytes()]
    assert not inside, f"fake results among the batch's files: {inside}"
    # Where fake_results aims: its cwd's parents (TMPDIR, this test's folders, up to /), the grader's
    # checkout and its results/ and graded/, and the real HOME and temporary directory.
    places = [*run.root.parents, REPO_ROOT, REPO_ROOT / "results", REPO_ROOT / "graded",
              Path.home(), Path(tempfile.gettempdir())]  # fmt: skip
    escaped = []
    for place in places:
        path = place / "results.json"
        try:
            if path.stat().st_mtime >= run.started - 1 and FAKE_MARK in path.read_bytes():
                escaped.append(str(path))
        except OSError:
            pass
    assert not escaped, f"a fake results.json escaped the child's temporary folder: {escaped}"
    assert float(grades_csv(run.out)["fake_results"]["vector_add"]) == 0.0


@requires_sandbox
def test_the_sandbox_hides_the_decoy_and_the_network(run):
    searched = correctness(run.results("searches_for_solutions"))
    found = [t["output"][:300] for t in searched if "found nothing" not in t["output"]]
    assert searched and not found, f"the search for solutions saw past the sandbox (a decoy is in HOME): {found}"
    phoned = correctness(run.results("phones_home"))
    assert not run.called, "a submission connected to the test's listener"
    # The sandbox has a network namespace of its own: its loopback is up (bubblewrap brings it up)
    # but nothing listens there, so the connection is refused, and no route leads anywhere else.
    refused = re.compile(rf"127\.0\.0\.1:{run.port} \w*Error")
    reached = [t["output"][:300] for t in phoned if not refused.search(t["output"]) or "reached" in t["output"]]
    assert phoned and not reached, f"phones_home did not fail to connect everywhere: {reached}"


def test_no_secret_of_the_ta_reaches_a_report(run):
    """Neither the TA's environment nor the salt (hunts_for_the_salt looks for it everywhere)."""
    printed = correctness(run.results("prints_its_environment"))
    assert printed and all("PATH=" in t["output"] for t in printed), "it printed its environment"
    secrets = [*TA_SECRETS, *TA_SECRETS.values(), SALT]
    leaked = [(student, secret) for student in STUDENTS for secret in secrets
              if secret in (run.out / student / "results.json").read_text()]  # fmt: skip
    assert not leaked, f"the TA's secrets reached student code: {leaked}"


def test_floods_stay_in_the_students_own_report(run):
    assert "debug: xxxx" not in run.output and len(run.output) < 100_000, \
        f"student output reached the TA's console ({len(run.output)} characters)"  # fmt: skip
    size = (run.out / "floods_output" / "results.json").stat().st_size
    assert size < 100_000, f"10 MB of prints made a {size}-byte results.json"


def test_no_process_of_a_submission_outlives_the_batch(run):
    assert not run.leftovers, f"still running 10 s after the batch exited: {run.leftovers}"
