"""A Ctrl-C stops the grader wherever it lands, and says so in a line (grader/running/ctrl_c.py).

Python raises KeyboardInterrupt where a SIGINT lands. Before grader/__main__.py held the signal
until its packages had loaded, one that landed inside numpy's start was dropped (7 of 100 `--help`
runs interrupted 0.15-1.1 s in went on to exit 0), left numpy half loaded (exit 1), or aborted
torch (exit -6). A batch that grades on past the Ctrl-C that tools/class_grade.py sends at its time
limit overruns the device command it runs in.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

from conftest import no_sandbox_where_none
from grader.assignment.spec import REPO_ROOT

START = [sys.executable, "-m", "grader", "--help"]  # the packages' load, and nothing after it


def _as_a_terminal_starts_it() -> None:
    """In the grader's process before it starts: SIGINT at its default and unblocked, as a shell's
    foreground command gets it. A suite run as a background job (`make test &`) hands its children
    SIGINT ignored, and the grader rightly leaves an ignored Ctrl-C ignored (running/ctrl_c.py)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _start_takes() -> float:
    """The least of two whole `--help` runs: the grader's start."""
    took = []
    for _ in range(2):
        began = time.monotonic()
        subprocess.run(START, cwd=REPO_ROOT, capture_output=True, check=True, timeout=300)
        took.append(time.monotonic() - began)
    return min(took)


def test_a_ctrl_c_anywhere_in_the_start_stops_the_grader(tmp_path):
    """Interrupted at twelve points of its start, a grading of the starter never goes on: each ends
    by the signal and writes no results. A grading takes seconds past the start, so a point that
    lands after it (a machine busier while the start was timed) still stops a grading under way."""
    whole = _start_takes()
    for step in range(1, 13):  # each run loads the packages whole before it stops
        at = whole * 0.6 * step / 12
        results = tmp_path / f"results-{step}.json"
        command = [sys.executable, "-m", "grader", "grade", "--submission", str(REPO_ROOT / "starter"), "--assignment",
                   "vector_add", "--device", "cpu", "--json", str(results), "--html", str(tmp_path / "report.html")]  # fmt: skip
        process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   preexec_fn=_as_a_terminal_starts_it)
        time.sleep(at)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=max(120.0, 10 * whole))
        assert process.returncode == -signal.SIGINT, (
            f"interrupted {at:.2f} s into a {whole:.2f} s start: exit {process.returncode}\n"
            f"{out.decode(errors='replace')[-300:]}{err.decode(errors='replace')[-1500:]}")
        assert not results.exists(), "the grading went on after the Ctrl-C"


def _rows(book) -> int:
    try:
        with sqlite3.connect(f"file:{book}?mode=ro", uri=True, timeout=60) as db:
            return db.execute("SELECT COUNT(*) FROM grades").fetchone()[0]
    except sqlite3.OperationalError:  # not made yet, or its table not yet
        return 0


def test_a_ctrl_c_in_a_batch_says_what_is_kept_and_the_workers_say_nothing(tmp_path):
    """As a terminal sends it: to the batch's whole process group, its Dask workers included, once
    the batch has recorded its first grade. The batch says in one line how many grades it kept and
    that the same command grades the rest; no worker prints a traceback; the process ends by the signal."""
    for name in [f"student{i:02d}" for i in range(6)]:
        shutil.copytree(REPO_ROOT / "starter", tmp_path / "class" / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.o"))  # fmt: skip
    out = tmp_path / "out"
    command = [sys.executable, "-m", "grader", "batch", str(tmp_path / "class"), "--out", str(out), "--device", "cpu",
               "--workers", "2", "--assignment", "vector_add"]  # fmt: skip
    command += no_sandbox_where_none()
    log = tmp_path / "batch.log"
    with open(log, "w") as sink:
        batch = subprocess.Popen(command, cwd=REPO_ROOT, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
                                 preexec_fn=_as_a_terminal_starts_it)
        began = time.monotonic()
        while _rows(out / "gradebook.sqlite") == 0:
            assert batch.poll() is None and time.monotonic() - began < 300, "no grade recorded"
            time.sleep(0.1)
        os.killpg(batch.pid, signal.SIGINT)
        batch.wait(timeout=300)
    said = log.read_text()
    assert batch.returncode == -signal.SIGINT, said
    kept = re.search(r"stopped: (\d+) of 6 grades of this run are kept in the\s+gradebook", said)
    assert kept, said
    assert int(kept.group(1)) == _rows(out / "gradebook.sqlite"), "the line says what the gradebook holds"
    assert "the same command grades the other" in said and said.rstrip().endswith("interrupted (Ctrl-C)"), said
    assert "Traceback" not in said, said


HELD = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
from grader.running.ctrl_c import held

def ctrl_c():
    os.kill(os.getpid(), signal.SIGINT)

said = []
try:
    with held():
        ctrl_c()
        said.append("went on")
except KeyboardInterrupt:
    said.append("taken at the end")
try:
    with held():
        ctrl_c()
        ctrl_c()
        said.append("went on past a second")
except KeyboardInterrupt:
    said.append("second taken at once")
try:
    with held():
        ctrl_c()
        raise RuntimeError("a worker took it too")
except KeyboardInterrupt as stop:
    said.append(f"failure after it taken as it ({type(stop.__cause__).__name__})")
try:
    with held():
        raise RuntimeError("no Ctrl-C")
except RuntimeError:
    said.append("failure without one is itself")
signal.signal(signal.SIGINT, signal.SIG_IGN)
with held():
    ctrl_c()
said.append("ignored stays ignored")
print(said)
"""


def test_a_held_ctrl_c_is_taken_when_the_block_ends_and_a_second_at_once():
    ran = subprocess.run([sys.executable, "-c", HELD], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == str(["went on", "taken at the end", "second taken at once",
                                      "failure after it taken as it (RuntimeError)", "failure without one is itself",
                                      "ignored stays ignored"]), ran.stdout + ran.stderr  # fmt: skip
