"""The submission service's figures on the course's GPU (docs/staff.md, "The submission service"):
N students (20 by default) each submit one folder through a real `serve` at once; the table gives
each one's wait in the queue and grading time, the whole wall time, and whether each grade equals
the same folder's grade alone (`grade` on the same machine, afterwards).

    .venv/bin/python tools/service_load.py --device cuda --out service-load        # on a GPU node
    .venv/bin/python tools/service_load.py --device cpu --students 2 --assignment vector_add --out rehearsal

The class: the solution of `--assignment` (default: the first assignment by name), and every
other student the solution with a comment of their own (so each is graded, not found in the
gradebook). Writes `<out>/service-load.json` (the rows and the wall time) and prints the table.
Needs a salt file outside the repository (`--salt-file`, made in `<out>` by default) and, with
`--device cuda`, a GPU. The figures are not measured on the development machine (no GPU there).
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
from grader.service.client import call, pack  # noqa: E402
from grader.service.tokens import token_for  # noqa: E402


def course(out: Path, students: list[str], salt_file: Path) -> Path:
    (out / "students.csv").write_text("student\n" + "".join(f"{s}\n" for s in students))
    (out / "course.toml").write_text(f'[course]\nsalt_file = "{salt_file}"\n\n[service]\nstudents = "students.csv"\n'
                                     "per_hour = 100\nmax_upload_mb = 20\n")  # fmt: skip
    return out / "course.toml"


def folders(out: Path, assignment: str, students: list[str]) -> dict[str, Path]:
    """Each student's folder: the solution, the first as it is, the others with a comment of their own."""
    found = {}
    for i, student in enumerate(students):
        folder = out / "class" / student
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(ROOT / "solutions" / assignment, folder / assignment, ignore=shutil.ignore_patterns("__pycache__"))
        for path in (folder / assignment).glob("*.py"):
            if i:
                path.write_text(path.read_text() + f"\n# {student}\n")
        found[student] = folder
    return found


def start(out: Path, toml: Path, port: int, device: str) -> subprocess.Popen:
    env = {**os.environ, **({"CUDA_VISIBLE_DEVICES": ""} if device == "cpu" else {})}
    server = subprocess.Popen([sys.executable, "-m", "grader", "serve", "--course", str(toml), "--out", str(out / "served"),
                               "--port", str(port)], cwd=ROOT, env=env, stdout=(out / "serve.log").open("w"),
                              stderr=subprocess.STDOUT)  # fmt: skip
    for _ in range(600):
        try:
            if call("GET", f"http://127.0.0.1:{port}/health", "")[0] == 200:
                return server
        except OSError:
            time.sleep(1)
    raise SystemExit(f"the server did not start: {(out / 'serve.log').read_text()[-3000:]}")


def alone(folder: Path, assignment: str, device: str, out: Path) -> float:
    result = out / "alone" / f"{folder.name}.json"
    subprocess.run([sys.executable, "-m", "grader", "grade", "--submission", str(folder), "--assignment", assignment,
                    "--device", device, "--json", str(result), "--html", str(result.with_suffix(".html"))],
                   cwd=ROOT, check=True, capture_output=True)  # fmt: skip
    return json.loads(result.read_text())["score"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--assignment", default=assignment_names()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--salt-file", type=Path)
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    salt_file = args.salt_file or out / "salt.txt"
    if not salt_file.exists():
        salt_file.write_text(os.urandom(16).hex() + "\n")
    secret = salt_file.read_text().strip()
    students = [f"student{i:02d}" for i in range(args.students)]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = start(out, course(out, students, salt_file.resolve()), port, args.device)
    url = f"http://127.0.0.1:{port}"
    mine = folders(out, args.assignment, students)
    try:
        started = time.monotonic()
        with ThreadPoolExecutor(len(students)) as pool:
            sent = list(pool.map(lambda s: call("POST", f"{url}/api/submissions?assignment={args.assignment}",
                                                token_for(secret, s), pack(mine[s], [args.assignment])), students))
        ids = [json.loads(body)[0]["id"] for status, _, body in sent]
        print(f"{len(ids)} submissions accepted; waiting for their grades", flush=True)
        book = out / "served" / "gradebook.sqlite"
        while True:
            with sqlite3.connect(book, timeout=30) as db:
                rows = db.execute("SELECT id, student, state, submitted_at, started_at, finished_at FROM submissions").fetchall()
            if all(r[2] in ("graded", "failed") for r in rows if r[0] in ids):
                break
            time.sleep(2)
        wall = time.monotonic() - started
    finally:
        server.terminate()
        server.wait(120)
    print(f"graded in {wall:.0f} s; now each folder alone, with `grade`", flush=True)
    table = []
    for id, student, state, submitted, began, finished in sorted(rows, key=lambda r: r[4] or ""):
        at = {k: datetime.fromisoformat(v) for k, v in (("s", submitted), ("b", began), ("f", finished)) if v}
        with sqlite3.connect(book) as db:  # the server has stopped: the gradebook holds each score
            score = db.execute("SELECT g.score FROM grades g JOIN submissions s ON g.student = s.student AND "
                               "g.submission_hash = s.submission_hash WHERE s.id = ?", (id,)).fetchone()  # fmt: skip
        table.append({"student": student, "state": state, "wait_s": (at["b"] - at["s"]).total_seconds(),
                      "grading_s": (at["f"] - at["b"]).total_seconds(), "score": score[0] if score else None,
                      "alone": alone(mine[student], args.assignment, args.device, out)})  # fmt: skip
    (out / "service-load.json").write_text(json.dumps({"device": args.device, "assignment": args.assignment,
                                                       "students": len(students), "wall_s": wall, "rows": table}, indent=2))
    print(f"{len(students)} students, {args.assignment}, {args.device}: {wall:.0f} s wall")
    print(f"{'student':12} {'state':8} {'wait s':>8} {'grading s':>10} {'score':>7} {'alone':>7}")
    for row in table:
        print(f"{row['student']:12} {row['state']:8} {row['wait_s']:8.1f} {row['grading_s']:10.1f} "
              f"{row['score'] if row['score'] is not None else '-':>7} {row['alone']:>7}")
    return 0 if all(row["score"] == row["alone"] for row in table) else 1


if __name__ == "__main__":
    sys.exit(main())
