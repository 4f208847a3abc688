"""`python -m grader submit`: a folder packed as `make grade` grades it, uploaded, waited for, and
the same terminal table printed (reporting/terminal.py), from the very Grade the server keeps.

Packed: each assignment's graded files (submission_files.graded_files: no links, no caches), the
assignments named or else every one, as `grade` grades them; a missing folder is graded
`missing_file`, as by `grade`. The token travels in the Authorization header only.
"""

from __future__ import annotations

import io
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

from rich.console import Console

from grader.reporting import terminal
from grader.reporting.report import plain
from grader.reporting.results import Adjustment, Grade, TestResult
from grader.reporting.results_json import write_json
from grader.running.submission_files import graded_files

POLL_S = 1.0
REFUSED, FAILED = 2, 1  # exit statuses: the server said no (as a usage error); the grading failed


class Unreachable(OSError):
    pass


def pack(folder: Path, assignments: list[str]) -> bytes:
    """A zip of the graded files of each assignment folder, laid out like starter/."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in assignments:
            for path in graded_files(folder / name):
                archive.write(path, f"{name}/{path.relative_to(folder / name).as_posix()}")
    return buffer.getvalue()


def call(method: str, url: str, token: str, body: bytes | None = None) -> tuple[int, dict, bytes]:
    """(status, headers, body) of one request; Unreachable where the server does not answer."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/zip"}
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()
    except (urllib.error.URLError, OSError) as error:
        raise Unreachable(f"{url}: {getattr(error, 'reason', error)}") from None


def refusal(status: int, body: bytes) -> str:
    try:
        found = json.loads(body)
        return str(found.get("detail", found))
    except (ValueError, AttributeError):
        return body.decode(errors="replace")[:500]


def progress(rows: list[dict], started: float) -> str:
    """One line: each submission's state (its place in line while queued)."""
    states = [f"{row['assignment']}: " + (f"queued, {row['position']} in line" if row["state"] == "queued" else row["state"])
              for row in rows]  # fmt: skip
    return f"{'; '.join(states)} ({time.monotonic() - started:.0f} s)"


def grade_of(data: dict, folder: Path) -> Grade:
    return Grade(str(folder), [TestResult(**t) for t in data["tests"]], data["environment"], data["seconds"],
                 [Adjustment(**a) for a in data["adjustments"]], data["notes"])  # fmt: skip


def merged(grades: list[Grade], folder: Path) -> Grade:
    """The assignments' grades as one, as `grade` makes one of a submission."""
    environment = dict(grades[0].environment)
    environment["phases"] = "; ".join(g.environment["phases"] for g in grades if g.environment.get("phases"))
    return Grade(str(folder), [t for g in grades for t in g.tests], environment, sum(g.seconds for g in grades),
                 [a for g in grades for a in g.adjustments], [n for g in grades for n in g.notes])  # fmt: skip


def submit(server: str, token: str, folder: Path, assignments: list[str], json_path: Path | None, console: Console) -> int:
    server = server.rstrip("/")
    body = pack(folder, assignments)
    status, _, answer = call("GET", f"{server}/health", token)
    cap = json.loads(answer).get("max_upload_mb", 0) if status == 200 else 0
    if cap and len(body) > cap * 2**20:  # the server would refuse it before reading it whole
        console.print(plain(f"refused: the packed folder is {len(body) / 2**20:.1f} MiB; the course's cap is {cap:g} MiB", "red"))
        return REFUSED
    query = urllib.parse.urlencode([("assignment", name) for name in assignments])
    status, headers, answer = call("POST", f"{server}/api/submissions?{query}", token, body)
    if status != 202:
        when = f" (Retry-After: {headers.get('Retry-After')} s)" if status == 429 else ""
        console.print(plain(f"refused ({status}): {refusal(status, answer)}{when}", "red"))
        return REFUSED
    rows, started = json.loads(answer), time.monotonic()
    console.print(plain(f"Submitted {folder} ({len(body)} bytes): {', '.join(r['assignment'] for r in rows)}"))
    with console.status(progress(rows, started)) as shown:
        while any(row["state"] in ("queued", "grading") for row in rows):
            time.sleep(POLL_S)
            try:
                rows = [json.loads(call("GET", f"{server}/api/submissions/{row['id']}", token)[2]) for row in rows]
            except Unreachable as error:  # a server restarting: the queue keeps the submissions
                shown.update(f"the server does not answer ({error}); asking again")
                continue
            shown.update(progress(rows, started))
    graded = [row for row in rows if row["state"] == "graded"]
    grades = [grade_of(json.loads(call("GET", f"{server}/api/submissions/{row['id']}/grade", token)[2]), folder)
              for row in graded]  # fmt: skip
    if grades:
        grade = merged(grades, folder)
        if json_path is not None:
            write_json(grade, json_path)
        terminal.print_table(grade, console)
    for row in rows:
        if row["state"] == "failed":
            console.print(plain(f"{row['assignment']}: not graded: {row['problem']}", "red"))
        else:
            console.print(plain(f"Report ({row['assignment']}): {server}{row['report']}   results.json: {server}{row['results']}"))
    return 0 if len(graded) == len(rows) else FAILED
