"""A class of full submissions graded on one GPU: how long it takes, and how much of it the timed
phases are.

    python tools/class_grade.py run --students 20 --workers 6 --limit 540   # again until it says done
    python tools/class_grade.py summary --json class-grade.json

The class (built once under --dir, default class-grade/) is N copies of solutions/, every
assignment, each student's files a comment apart: each has submission hashes of its own, so each
compiles from cold, as a real class would. `run` grades it with `python -m grader batch --device
cuda --workers W`, which grades only what its gradebook does not hold yet: a class that takes longer
than one device command is graded in several, each stopped at --limit (the batch and its workers
ended together, as a TA's Ctrl-C ends them) and keeping its span in spans.jsonl. `summary` gives the
wall time (the spans' sum: time lost to a grading cut off at a limit included), the sum of every
grading's timed phases (each grade's phases line, as the gradebook keeps it), the workers the batch
graded with (fewer than asked where the GPU's memory fits fewer), the machine its grades name, and
whether every student earned every point. Exit status of `run`: 0 once every student is graded, 3 while some are
left; of `summary`: 0 when every point was earned, 1 when not, 2 when nothing was graded.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
from measurements import phases_of  # noqa: E402  (the reader of a grade's phases line)

GRADEBOOK = "gradebook.sqlite"  # batch's, in --out
COMMENT = {".py": "# {}\n", ".cu": "// {}\n", ".cuh": "// {}\n"}


def build(folder: Path, students: int) -> list[str]:
    """The class's folders under `folder`/class (made once; a later call reuses them)."""
    names = [f"student{i:02d}" for i in range(students)]
    for name in names:
        mine = folder / "class" / name
        if mine.exists():
            continue
        shutil.copytree(REPO / "solutions", mine, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.o"))
        for path in mine.rglob("*"):
            if path.suffix in COMMENT:
                path.write_text(path.read_text() + "\n" + COMMENT[path.suffix].format(name))
    return names


def graded(out: Path, device: str = "cuda") -> dict[str, list[tuple]]:
    """Per student, the tier's grades the gradebook holds: (assignment, score, max, environment)."""
    found: dict[str, list[tuple]] = {}
    if not (out / GRADEBOOK).exists():
        return found
    with sqlite3.connect(out / GRADEBOOK, timeout=60) as db:
        for student, assignment, score, most, environment in db.execute(
                "SELECT student, assignment, score, max_score, environment FROM grades WHERE device = ?", (device,)):  # fmt: skip
            found.setdefault(student, []).append((assignment, score, most, json.loads(environment)))
    return found


def _takes_ctrl_c() -> None:
    """In the batch's process before it starts: SIGINT neither ignored (a shell's background job
    starts so) nor blocked (a test runner's worker may run so), both inherited across exec: the
    batch must take the Ctrl-C that `run` sends at its limit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def run(folder: Path, students: int, workers: int, limit_s: float, device: str, only: list[str],
        unsandboxed: bool = False) -> int:
    names = build(folder, students)
    out = folder / "out"
    assignments = len(only) or len([p for p in (REPO / "assignments").iterdir() if (p / "assignment.toml").exists()])
    before = sum(len(rows) for rows in graded(out, device).values())
    began = time.time()
    command = [sys.executable, "-m", "grader", "batch", str(folder / "class"), "--out", str(out), "--device", device,
               "--workers", str(workers), *(flag for name in only for flag in ("--assignment", name)),
               *(["--no-sandbox"] if unsandboxed else [])]  # fmt: skip
    with open(folder / "batch.log", "a") as log:
        batch = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                 preexec_fn=_takes_ctrl_c)  # fmt: skip
        try:
            batch.wait(limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(batch.pid, signal.SIGINT)  # as a TA's Ctrl-C: the batch ends its workers
            try:
                batch.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(batch.pid, signal.SIGKILL)
                batch.wait()
    after = sum(len(rows) for rows in graded(out, device).values())
    span = {"began": began, "seconds": time.time() - began, "exit": batch.returncode, "workers": workers,
            "used": workers_used(folder / "batch.log", workers), "device": device, "grades_before": before,
            "grades_after": after, "students": len(names)}  # fmt: skip
    with open(folder / "spans.jsonl", "a") as spans:
        spans.write(json.dumps(span) + "\n")
    left = len(names) * assignments - after
    print(f"{after - before} grades in {span['seconds']:.0f} s; {left} left", flush=True)
    return 0 if left <= 0 else 3


def workers_used(log: Path, asked: int) -> int:
    """The workers the batch graded with, as its progress bar said last ("grading on 4 local GPU
    worker(s)"): fewer than asked where the GPU's memory fits fewer (batch.fit_workers_to_memory)."""
    said = re.findall(r"grading on (\d+) local GPU worker", log.read_text(errors="replace")) if log.exists() else []
    return int(said[-1]) if said else asked


MACHINE = ("gpu", "platform", "torch_version", "triton_version")  # of a grade's environment, for the table


def summary(folder: Path, device: str = "cuda") -> tuple[dict, int]:
    kept = folder / "spans.jsonl"
    spans = [json.loads(line) for line in kept.read_text().splitlines() if line.strip()] if kept.exists() else []
    found = graded(folder / "out", spans[-1]["device"] if spans else device)
    if not found or not spans:  # nothing graded, or a first run still grading (its span is written at its end)
        so_far = sum(len(rows) for rows in found.values())
        print(f"{so_far} grades so far; no run has ended yet" if so_far else "nothing graded yet")
        return {}, 2
    timed, lost = 0.0, []
    for student, rows in sorted(found.items()):
        for assignment, score, most, environment in rows:
            timed += sum(figures.get("timing", 0.0) for figures, _ in phases_of(environment.get("phases", "")).values())
            if score < most:
                lost.append(f"{student}/{assignment}: {score:g} of {most:g}")
    environment = next(iter(found.values()))[0][3]
    figures = {"students": len(found), "of": spans[-1]["students"], "workers": spans[-1]["workers"],
               "workers_used": spans[-1].get("used", spans[-1]["workers"]),
               "grades": sum(len(rows) for rows in found.values()), "wall_s": sum(s["seconds"] for s in spans),
               "calls": len(spans), "timed_s": timed, "lost": lost,
               "environment": {key: environment[key] for key in MACHINE if key in environment}}  # fmt: skip
    return figures, 0 if not lost and figures["students"] == figures["of"] else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("run", "summary"))
    parser.add_argument("--dir", type=Path, default=REPO / "class-grade")
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--limit", type=float, default=540.0, help="run: seconds before the batch is stopped")
    parser.add_argument("--json", type=Path, help="summary: where its figures go")
    parser.add_argument("--device", default="cuda", help="cpu rehearses it where there is no GPU")
    parser.add_argument("--assignment", action="append", default=[], help="run: only these (a rehearsal)")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="run: batch's --no-sandbox, where the machine offers no sandbox (a rehearsal)")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.what == "run":
        return run(args.dir, args.students, args.workers, args.limit, args.device, args.assignment, args.no_sandbox)
    figures, status = summary(args.dir, args.device)
    if args.json and figures:
        args.json.write_text(json.dumps(figures, indent=1))
    if figures:
        print(f"{figures['students']} of {figures['of']} students, {figures['grades']} grades, {figures['workers_used']} "
              f"workers ({figures['workers']} asked): {figures['wall_s']:.0f} s of wall time in {figures['calls']} calls, timed phases "
              f"{figures['timed_s']:.0f} s in all; {len(figures['lost'])} grades short of every point")  # fmt: skip
        for line in figures["lost"]:
            print("  ", line)
    return status


if __name__ == "__main__":
    sys.exit(main())
