"""The submission service's figures on the course's GPU (docs/staff.md, "The submission service"):
N students (20 by default) each submit one folder at once through a real `serve` of `--workers`
workers; the table gives each one's wait in the queue, grading time and points, the whole wall
time, and for the first `--alone` students (all by default) the same folder's grade alone (`grade`
on the same machine, afterwards).

    .venv/bin/python tools/service_load.py --device cuda --out service-load        # on a GPU node
    .venv/bin/python tools/service_load.py --device cpu --students 2 --alone 1 --assignment vector_add --out rehearsal

The class: the solution of `--assignment` (default: the first assignment by name), and every
other student the solution with a comment of their own (so each is graded, not found in the
gradebook). Every grade must therefore be the solution's full points (each test this tier grades,
in full), and each grade alone the service's: exit 1 otherwise. A student not graded alone shows
'-' in the table's `alone` column.

`--out` receives four files: service-load.json (the rows and the wall time), service-load.txt
(the table), serve.log and alone.json (the first student's results.json graded alone: the machine and
its versions). Both figures files are written once the service has graded the class and
again after each grading alone, so a run stopped at a time limit keeps what it measured. The bulk
(the class's folders, the service's gradebook, the reports of the gradings alone, course.toml and,
unless `--salt-file`, the salt file) goes under `--work` (default `<out>/work`). Needs `--device
cuda` a GPU. The figures are not measured on the development machine (no GPU there).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.assignment.loading import assignment_names  # noqa: E402
from grader.course.gradebook import Entry, Gradebook, Key  # noqa: E402
from grader.reporting.results import possible  # noqa: E402
from grader.service import queue  # noqa: E402
from grader.service.client import call, pack  # noqa: E402
from grader.service.tokens import token_for  # noqa: E402

# The batch's measured class of 20 on one GPU graded 2.25x faster with 6 workers sharing it
# (docs/measurements.md, "A class of 20 on one GPU (gelu)"); on the CPU, serve's own default.
WORKERS = {"cuda": 6, "cpu": 2}


def course(work: Path, students: list[str], salt_file: Path) -> Path:
    (work / "students.csv").write_text("student\n" + "".join(f"{s}\n" for s in students))
    (work / "course.toml").write_text(f'[course]\nsalt_file = "{salt_file}"\n\n[service]\nstudents = "students.csv"\n'
                                      "per_hour = 100\nmax_upload_mb = 20\n")  # fmt: skip
    return work / "course.toml"


def folders(work: Path, assignment: str, students: list[str]) -> dict[str, Path]:
    """Each student's folder: the solution, the first as it is, the others with a comment of their own."""
    found = {}
    for i, student in enumerate(students):
        folder = work / "class" / student
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(ROOT / "solutions" / assignment, folder / assignment, ignore=shutil.ignore_patterns("__pycache__"))
        for path in (folder / assignment).glob("*.py"):
            if i:
                path.write_text(path.read_text() + f"\n# {student}\n")
        found[student] = folder
    return found


def start(work: Path, out: Path, toml: Path, port: int, device: str, workers: int) -> subprocess.Popen:
    """`serve` into a gradebook of its own: one kept from an earlier run would hand back its grades ungraded."""
    shutil.rmtree(work / "served", ignore_errors=True)
    env = {**os.environ, **({"CUDA_VISIBLE_DEVICES": ""} if device == "cpu" else {})}
    server = subprocess.Popen([sys.executable, "-m", "grader", "serve", "--course", str(toml), "--out",
                               str(work / "served"), "--port", str(port), "--workers", str(workers)], cwd=ROOT, env=env,
                              stdout=(out / "serve.log").open("w"), stderr=subprocess.STDOUT)  # fmt: skip
    for _ in range(600):
        try:
            if call("GET", f"http://127.0.0.1:{port}/health", "")[0] == 200:
                return server
        except OSError:
            time.sleep(1)
    raise SystemExit(f"the server did not start: {(out / 'serve.log').read_text()[-3000:]}")


def submit_all(url: str, secret: str, assignment: str, mine: dict[str, Path]) -> list[str]:
    """Every student's folder uploaded at once; the ids of the submissions."""
    with ThreadPoolExecutor(len(mine)) as pool:
        sent = list(pool.map(lambda s: call("POST", f"{url}/api/submissions?assignment={assignment}",
                                            token_for(secret, s), pack(mine[s], [assignment])), mine))  # fmt: skip
    return [json.loads(body)[0]["id"] for status, _, body in sent]


def wait_graded(book: Path, ids: list[str]) -> None:
    while True:
        with sqlite3.connect(book, timeout=30) as db:
            states = [queue.get(db, id).state for id in ids]
        if all(state in ("graded", "failed") for state in states):
            return
        time.sleep(2)


def points(entry: Entry | None) -> dict:
    """A grade's points, the points it is graded out of, and the points of every test this tier
    grades, bonus included: what the solution earns (on the CPU tier, speed is not graded)."""
    if entry is None:
        return {"points": None, "max_points": None, "full_points": None}
    return {"points": round(entry.score, 4), "max_points": round(possible(entry.tests), 4),
            "full_points": round(sum(t.max_score for t in entry.tests if t.graded), 4)}  # fmt: skip


def served(book: Path, ids: list[str]) -> list[dict]:
    """Each submission's times and grade, in the order their gradings began, read once the server
    has stopped (the gradebook then holds every grade)."""
    with sqlite3.connect(book, timeout=30) as db:
        rows = sorted((queue.get(db, id) for id in ids), key=lambda r: r.started_at or "")
    found = []
    with Gradebook(book) as grades:
        for row in rows:
            key = Key(row.student, row.assignment, row.submission_hash, row.grader_version)
            at = {k: datetime.fromisoformat(v) for k, v in (("s", row.submitted_at), ("b", row.started_at),
                                                             ("f", row.finished_at)) if v}  # fmt: skip
            found.append({"student": row.student, "state": row.state, "graded_by": row.graded_by,
                          "wait_s": (at["b"] - at["s"]).total_seconds() if "b" in at else None,
                          "grading_s": (at["f"] - at["b"]).total_seconds() if "f" in at else None,
                          **points(grades.lookup(key, row.device) if row.device else None), "alone": None})  # fmt: skip
    return found


def alone(folder: Path, assignment: str, device: str, work: Path) -> float:
    result = work / "alone" / f"{folder.name}.json"
    subprocess.run([sys.executable, "-m", "grader", "grade", "--submission", str(folder), "--assignment", assignment,
                    "--device", device, "--json", str(result), "--html", str(result.with_suffix(".html"))],
                   cwd=ROOT, check=True, capture_output=True)  # fmt: skip
    return round(json.loads(result.read_text())["score"], 4)


def table(figures: dict) -> str:
    """The rows as text, '-' where there is no figure (a grading that failed, a student not graded alone)."""
    def line(student: str, state: str, *cells: str) -> str:
        return f"{student:12} {state:8} " + " ".join(f"{cell:>9}" for cell in cells)

    def shown(value: float | None, digits: int) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    lines = [f"{figures['students']} students, {figures['assignment']}, {figures['device']}, {figures['workers']} "
             f"workers: {figures['wall_s']:.0f} s wall; the first {figures['alone']} graded alone too",
             line("student", "state", "wait s", "grading s", "points", "full", "max", "alone")]  # fmt: skip
    for row in figures["rows"]:
        lines.append(line(row["student"], row["state"], shown(row["wait_s"], 1), shown(row["grading_s"], 1),
                          *(shown(row[k], 2) for k in ("points", "full_points", "max_points", "alone"))))
    lines.append("full: the points of every test this tier grades, each folder's due (each is the solution); "
                 "max: the points a submission is graded out of")  # fmt: skip
    return "\n".join(lines) + "\n"


def save(out: Path, figures: dict) -> None:
    (out / "service-load.json").write_text(json.dumps(figures, indent=2))
    (out / "service-load.txt").write_text(table(figures))


def as_expected(rows: list[dict]) -> bool:
    """Every folder is the solution: each graded in full, and each graded alone as the service graded it."""
    full = all(row["state"] == "graded" and row["points"] == row["full_points"] for row in rows)
    return full and all(row["alone"] == row["points"] for row in rows if row["alone"] is not None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--assignment", default=assignment_names()[0])
    parser.add_argument("--workers", type=int, help="serve's --workers (default: 6 on cuda, 2 on cpu)")
    parser.add_argument("--alone", type=int, help="how many students (the first) are graded alone too (default: all)")
    parser.add_argument("--out", type=Path, required=True, help="service-load.json, service-load.txt and serve.log")
    parser.add_argument("--work", type=Path, help="the class, the service's gradebook, the gradings alone "
                                                  "(default: <out>/work)")  # fmt: skip
    parser.add_argument("--salt-file", type=Path)
    args = parser.parse_args()
    students = [f"student{i:02d}" for i in range(args.students)]
    how_many_alone = len(students) if args.alone is None else args.alone
    if not 0 <= how_many_alone <= len(students):
        parser.error(f"--alone {args.alone}: from 0 to --students ({len(students)})")
    workers = WORKERS[args.device] if args.workers is None else args.workers
    out = args.out.resolve()
    work = (args.work or out / "work").resolve()
    for folder in (out, work):
        folder.mkdir(parents=True, exist_ok=True)
    salt_file = args.salt_file or work / "salt.txt"
    if not salt_file.exists():
        salt_file.write_text(os.urandom(16).hex() + "\n")
    secret = salt_file.read_text().strip()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = start(work, out, course(work, students, salt_file.resolve()), port, args.device, workers)
    mine = folders(work, args.assignment, students)
    book = work / "served" / "gradebook.sqlite"
    try:
        started = time.monotonic()
        ids = submit_all(f"http://127.0.0.1:{port}", secret, args.assignment, mine)
        print(f"{len(ids)} submissions accepted; waiting for their grades", flush=True)
        wait_graded(book, ids)
        wall = time.monotonic() - started
    finally:
        server.terminate()
        server.wait(120)
    figures = {"device": args.device, "assignment": args.assignment, "students": len(students), "workers": workers,
               "alone": how_many_alone, "wall_s": wall, "rows": served(book, ids)}  # fmt: skip
    save(out, figures)
    print(f"graded in {wall:.0f} s; now the first {how_many_alone} folder(s) alone, with `grade`", flush=True)
    rows = {row["student"]: row for row in figures["rows"]}
    for student in students[:how_many_alone]:
        rows[student]["alone"] = alone(mine[student], args.assignment, args.device, work)
        save(out, figures)
        if student == students[0]:  # its versions and GPU, for tools/measurements.py service-load
            shutil.copyfile(work / "alone" / f"{student}.json", out / "alone.json")
    print(table(figures), end="")
    return 0 if as_expected(figures["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
