"""The submission service end to end, on a real `python -m grader serve` on loopback with real
grading on the CPU tier: the CLI's table is `make grade`'s, a browser signs in, uploads and finds its
report, a student reads only their own submissions by any address, uploads go through the batch's
intake, a form from another site is refused, the rate limit says when to retry, late days and
hidden cases follow the course, `override` and `batch` work on the service's gradebook, and `--workers`
sizes the service's cluster as it does the batch's."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from conftest import no_sandbox_where_none
from service_run import SALT, Server, call, solution_zip, token, wait_for, write_course, zip_of
from grader.assignment.spec import REPO_ROOT
from grader.course.gradebook import Gradebook, Key
from grader.reporting import hidden
from grader.reporting.results import TestResult
from grader.service import queue

STUDENTS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "cli", "henry"]
COURSE = """
[late]
per_day = 0.10
limit = 0.50

[assignments.softmax]
due = "2020-01-01 00:00"

[assignments.matmul]
due = "2099-01-01 00:00"
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("service")
    running = Server(write_course(folder / "course", STUDENTS, per_hour=3, extra=COURSE), folder / "out").start()
    yield running
    running.stop()


def graded(server: Server, student: str, ids: list[str]) -> None:
    """Wait until every one of `ids` is graded (the hang guard moves with the gradebook's grades)."""
    def states():
        return [server.state(token(student), id) for id in ids]

    found = wait_for(lambda: all(s in ("graded", "failed") for s in states()), f"{student}'s gradings",
                     progress=lambda: states())  # fmt: skip
    assert set(states()) == {"graded"}, states()
    return found


def _table(output: str) -> list[str]:
    """The terminal table and what follows it, up to the score line: `make grade`'s own."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "Grades for starter" in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("Score "))
    return [line.rstrip() for line in lines[start : end + 1]]


def test_the_cli_submits_starter_and_prints_the_table_of_make_grade(server, tmp_path):
    env = {**os.environ, "COLUMNS": "120"}
    command = [sys.executable, "-m", "grader"]
    alone = subprocess.Popen([*command, "grade", "--submission", "starter", "--json", str(tmp_path / "alone.json"),
                              "--html", str(tmp_path / "alone.html")], cwd=REPO_ROOT, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    submitted = subprocess.run([*command, "submit", "--server", server.url, "--token", token("cli"), "--submission",
                                "starter", "--json", str(tmp_path / "served.json")], cwd=REPO_ROOT, env=env, text=True,
                               capture_output=True, timeout=1800)  # fmt: skip
    output = alone.communicate(timeout=1800)[0]
    assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-3000:]
    assert _table(submitted.stdout) == _table(output)
    assert re.search(rf"Report \(vector_add\): {re.escape(server.url)}/submissions/\w+/report\.html", submitted.stdout)
    served, own = (json.loads((tmp_path / f"{name}.json").read_text())["tests"] for name in ("served", "alone"))
    assert [(t["name"], t["score"], t["extra_data"]["reason"]) for t in served] == \
        [(t["name"], t["score"], t["extra_data"]["reason"]) for t in own]  # fmt: skip
    assert token("cli") not in submitted.stdout + submitted.stderr


def test_make_submit_takes_the_token_from_the_environment(server):
    """`make submit` puts no token on a command line (`ps` shows those to every user of the machine)."""
    env = {**os.environ, "COLUMNS": "120", "GRADER_TOKEN": token("henry")}
    unnamed = subprocess.run(["make", "-s", "submit"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                             timeout=300)  # fmt: skip
    assert unnamed.returncode == 2 and "make submit SERVER=" in unnamed.stdout, unnamed.stdout + unnamed.stderr
    done = subprocess.run(["make", "-s", "submit", f"SERVER={server.url}", "ASSIGNMENT=vector_add"], cwd=REPO_ROOT,
                          env=env, capture_output=True, text=True, timeout=1800)  # fmt: skip
    assert done.returncode == 0 and "Score 0.00 of 6.00" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert token("henry") not in done.stdout + done.stderr
    without = subprocess.run([sys.executable, "-m", "grader", "submit", "--server", server.url], cwd=REPO_ROOT,
                             env={**os.environ, "GRADER_TOKEN": ""}, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert without.returncode == 2 and "no token: give --token, or set GRADER_TOKEN" in without.stdout, without.stdout


def test_a_browser_signs_in_uploads_a_zip_and_finds_the_report(server, tmp_path):
    from cdp import Browser
    from service_run import free_port
    from test_report_browser import _chromium

    archive = tmp_path / "my-work.zip"
    archive.write_bytes(solution_zip("vector_add", "frank's"))
    browser = Browser(_chromium(), tmp_path / "profile", free_port())
    try:
        browser.open(f"{server.url}/")
        browser.evaluate(f"document.querySelector('input[name=token]').value = {json.dumps(token('frank'))};"
                         "document.getElementById('signin').submit()")  # fmt: skip
        assert browser.until("document.getElementById('me')?.textContent", "signed in") == "frank"
        assert browser.evaluate("document.cookie") == "", "the session cookie is HttpOnly: no script reads it"
        browser.set_file("input[name=archive]", archive)
        browser.evaluate("document.getElementById('upload').submit()")
        assert "1 submission(s) queued" in browser.until("document.getElementById('message')?.textContent", "accepted")
        report = browser.until("document.querySelector('#history tr[data-state=graded] a.report')?.href", "graded",
                               stall_s=900)  # fmt: skip
        browser.screenshot(tmp_path.parent / "service-home.png")  # kept beside the test's folder, to look at
        browser.open(report)
        text = browser.until("document.readyState === 'complete' && document.body.innerText", "the report")
        assert "vector_add" in text and "Score 4.00 of 6.00" in text, text[:2000]
    finally:
        browser.close()


def test_a_student_reads_only_their_own_submissions_by_any_address(server):
    [mine] = server.upload(token("alice"), solution_zip("vector_add", "alice's"))[2]
    [theirs] = server.upload(token("bob"), solution_zip("vector_add", "bob's"))[2]
    graded(server, "alice", [mine["id"]])
    graded(server, "bob", [theirs["id"]])
    assert [s["id"] for s in server.api("GET", "/api/submissions", token("alice"))[2]] == [mine["id"]]
    assert server.api("GET", "/api/submissions")[0] == 401
    assert server.api("GET", "/api/submissions", "not-a-token")[0] == 401
    for path in ("/api/submissions/{}", "/api/submissions/{}/results.json", "/api/submissions/{}/grade",
                 "/submissions/{}/report.html"):  # fmt: skip
        assert server.api("GET", path.format(mine["id"]), token("alice"))[0] == 200, path
        assert server.api("GET", path.format(mine["id"]), token("ta"))[0] == 200, path  # the TA reads every one
        for who in (token("bob"), None, "not-a-token", token("alice").upper()):
            assert server.api("GET", path.format(mine["id"]), who)[0] == 404, (path, who)
        for guess in ("1", "0", str(int(mine["id"], 16) + 1), "../" + theirs["id"], theirs["id"].upper(), "%2e%2e"):
            assert server.api("GET", path.format(guess), token("alice"))[0] == 404, (path, guess)
    for path in ("/class/", "/class/bob/report.html"):
        assert server.api("GET", path, token("alice"))[0] == 404
        assert server.api("GET", path, token("ta"))[0] == 200
    with sqlite3.connect(server.out / "gradebook.sqlite") as db:
        ids = [row[0] for row in db.execute("SELECT id FROM submissions")]
    assert all(re.fullmatch(r"[0-9a-f]{24}", id) for id in ids), "ids are random, never counted"


def test_uploads_go_through_the_batch_intake(server):
    """The batch's own refusals (grader/course/archives.py), each a 400 saying why; past the cap, 413."""
    source = "def add(x, y):\n    raise NotImplementedError\n"
    hostile = {
        "is a link": zip_of({"vector_add/notes.txt": "x"}, links={"vector_add/vector_add.py": "/etc/passwd"}),
        "points outside the submission folder": zip_of({"../vector_add/vector_add.py": source}),
        "past the 50 MiB cap": zip_of({"vector_add/vector_add.py": source, "vector_add/zeros.bin": bytes(51 * 2**20)}),
        "cannot be read as an archive": b"Rar!\x1a\x07\x00 not a zip",
        "holds no assignment folder": zip_of({"notes/readme.txt": "hello"}),
    }
    for why, archive in hostile.items():
        status, _, answer = server.upload(token("carol"), archive)
        assert status == 400 and why in answer["detail"], (why, answer)
    status, answer = declared_too_large(server, 2 * 2**20)
    assert status == 413 and "cap" in json.loads(answer)["detail"], "refused on its Content-Length, before it is sent"
    assert server.api("GET", "/api/submissions", token("carol"))[2] == [], "nothing refused was queued"


def declared_too_large(server: Server, size: int) -> tuple[int, bytes]:
    """A client that sends its headers and reads the answer before its body (as with `Expect: 100-continue`)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    try:
        connection.putrequest("POST", "/api/submissions")
        for name, value in (("Authorization", f"Bearer {token('carol')}"), ("Content-Length", str(size))):
            connection.putheader(name, value)
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def _signed_in(server: Server, student: str) -> tuple[str, str]:
    """A browser's session: the cookie sign-in sets, and the CSRF token of the page it opens."""
    status, headers, _ = call("POST", f"{server.url}/signin", body=urllib.parse.urlencode({"token": token(student)}).encode(),
                              headers={"Origin": server.url, "Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert status == 303 and "HttpOnly" in headers["set-cookie"] and "SameSite=strict" in headers["set-cookie"]
    cookie = headers["set-cookie"].split(";")[0]
    page = call("GET", f"{server.url}/", headers={"Cookie": cookie})[2].decode()
    return cookie, re.search(r'name="csrf" value="(\w+)"', page)[1]


def _form(fields: dict[str, str], archive: bytes) -> tuple[bytes, str]:
    boundary = "----kernel-grader-test"
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n' for k, v in fields.items()]
    head = "".join(parts) + f'--{boundary}\r\nContent-Disposition: form-data; name="archive"; filename="w.zip"\r\n' \
                            "Content-Type: application/zip\r\n\r\n"  # fmt: skip
    return head.encode() + archive + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def test_a_form_posted_from_another_site_is_refused(server):
    cookie, csrf = _signed_in(server, "dave")
    archive = solution_zip("vector_add", "dave's")

    def post(origin: str | None, fields: dict) -> int:
        body, kind = _form(fields, archive)
        headers = {"Cookie": cookie, "Content-Type": kind} | ({"Origin": origin} if origin else {})
        return call("POST", f"{server.url}/upload", body=body, headers=headers)[0]

    assert post("https://evil.example", {"csrf": csrf}) == 403  # another site, even holding the token
    assert post(server.url, {}) == 403  # no CSRF token: a form another site made
    assert post(server.url, {"csrf": "0" * 32}) == 403
    assert call("POST", f"{server.url}/signin", body=b"token=x", headers={"Origin": "https://evil.example",
                "Content-Type": "application/x-www-form-urlencoded"})[0] == 403  # fmt: skip
    assert call("POST", f"{server.url}/api/submissions", body=archive, headers={"Cookie": cookie})[0] == 401
    assert server.api("GET", "/api/submissions", token("dave"))[2] == [], "no refused form queued anything"
    assert post(server.url, {"csrf": csrf}) == 303  # the page's own form, from the page
    assert len(server.api("GET", "/api/submissions", token("dave"))[2]) == 1


def test_the_rate_limit_says_when_to_retry(server):
    """per_hour = 3: the same files three times (graded once: the gradebook has the grade), then 429."""
    archive = zip_of({"vector_add/vector_add.py": "def add(x, y):\n    raise NotImplementedError\n"})
    for _ in range(3):
        assert server.upload(token("erin"), archive, ["vector_add"])[0] == 202
    status, headers, answer = server.upload(token("erin"), archive, ["vector_add"])
    assert status == 429 and 3500 < int(headers["retry-after"]) <= 3601 and answer["retry_after"] == int(headers["retry-after"])
    assert "vector_add" in answer["detail"] and "try again in" in answer["detail"]
    ids = [s["id"] for s in server.api("GET", "/api/submissions", token("erin"))[2]]
    graded(server, "erin", ids)
    with sqlite3.connect(server.out / "gradebook.sqlite") as db:
        keys = db.execute("SELECT COUNT(*) FROM grades WHERE student = 'erin'").fetchone()[0]
    assert len(ids) == 3 and keys == 1


def _hidden_grade(assignment: str, part: str) -> list[TestResult]:
    return [TestResult(assignment, part, "correctness", f"{assignment}/{part}: float32 5x7", "wrong_result", 0.0, 2.0,
                       "max abs error 3.5 at row 4", {"where": [1, 2]}, hidden=True),
            TestResult(assignment, part, "correctness", f"{assignment}/{part}: float32 3x3", "ok", 2.0, 2.0, "")]


def stored(server: Server, student: str, assignment: str) -> None:
    """A grade of the test's making (a hidden case among its two) stored in the service's gradebook,
    then the same files queued: the dispatcher finds the grade there and takes it as it is."""
    digest = f"made-by-the-test-{student}-{assignment}"
    with Gradebook(server.out / "gradebook.sqlite") as book, queue.connect(server.out / "gradebook.sqlite") as db:
        book.record(Key(student, assignment, digest, "0.1.0"), "cpu", _hidden_grade(assignment, assignment),
                    {"device": "cpu"}, 1.0)  # fmt: skip
        [row] = queue.accept(db, student, {assignment: ("nowhere", digest)}, "0.1.0", 10, queue.now())
    graded(server, student, [row.id])


def test_late_days_and_hidden_cases_follow_the_course(server):
    """softmax was due in 2020 (late, its hidden cases revealed), matmul is due in 2099 (on time, hidden)."""
    stored(server, "grace", "softmax")
    stored(server, "grace", "matmul")
    late, on_time = (server.api("GET", "/api/submissions", token("grace"))[2][i] for i in (1, 0))
    assert late["assignment"] == "softmax" and late["late_days"] > 2000 and late["points"] == 1.0  # 2.0, half taken
    assert on_time["late_days"] == 0 and on_time["points"] == 2.0
    shown = server.api("GET", f"/api/submissions/{late['id']}/results.json", token("grace"))[2]
    kept = server.api("GET", f"/api/submissions/{on_time['id']}/results.json", token("grace"))[2]
    assert "5x7" in shown["tests"][0]["name"] and "row 4" in shown["tests"][0]["output"]
    assert "5x7" not in json.dumps(kept) and kept["tests"][0]["output"] == hidden.HIDDEN_OUTPUT
    assert "5x7" in json.dumps(server.api("GET", f"/api/submissions/{on_time['id']}/results.json", token("ta"))[2])
    assert any(a["kind"] == "late" and a["points"] == -1.0 for a in shown["extra_data"]["adjustments"])
    page = call("GET", f"{server.url}/", headers={"Cookie": _signed_in(server, "grace")[0]})[2].decode()
    assert "day(s) late now (50% of the points taken)" in page and "days" in page


def test_override_and_batch_work_on_the_service_gradebook(server, tmp_path):
    stored(server, "bob", "matmul")
    done = subprocess.run([sys.executable, "-m", "grader", "override", "--out", str(server.out), "bob", "matmul",
                           "--points", "3", "--reason", "regraded by hand"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    page = server.api("GET", "/class/", token("ta"))[2].decode()
    assert "Submission service" in page and "queued" in page
    row = re.search(r'<a href="bob/report.html">bob</a></td>(.*?)</tr>', page, re.S)[1]
    assert "3.00" in row, row  # matmul: the override, on the submission that counts
    scheduler = re.search(r"Dask scheduler (tcp://\S+)", server.log.read_text())[1]
    klass = tmp_path / "klass"
    shutil.copytree(REPO_ROOT / "solutions" / "vector_add", klass / "ivan" / "vector_add",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    argv = [sys.executable, "-m", "grader", "batch", str(klass), "--out", str(server.out), "--assignment", "vector_add",
            "--scheduler", scheduler, "--course", str(server.course)]  # fmt: skip
    argv += no_sandbox_where_none()
    done = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with sqlite3.connect(server.out / "gradebook.sqlite") as db:
        assert db.execute("SELECT score FROM grades WHERE student = 'ivan'").fetchone() == (4.0,)
    assert server.api("GET", "/health")[2]["grading"], "the service goes on beside the batch"


def test_tokens_are_derived_from_the_secret_and_kept_nowhere(server):
    done = subprocess.run([sys.executable, "-m", "grader", "tokens", "--course", str(server.course)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    rows = [line.split(",") for line in done.stdout.splitlines()]
    assert rows == [["student", "token"]] + [[name, token(name)] for name in STUDENTS]
    assert len({t for _, t in rows[1:]}) == len(STUDENTS) and SALT not in done.stdout
    written = [p for p in server.out.parent.rglob("*") if p.is_file()]
    for name in STUDENTS + ["ta"]:
        assert not any(token(name).encode() in p.read_bytes() for p in written), f"{name}'s token was written down"


def test_serve_workers_grade_submissions_side_by_side(tmp_path):
    """`--workers 3`, one more than the CPU's default of two: two students' submissions go to two of
    them at once, each graded by a worker process of its own."""
    students = ["ivy", "jon"]
    server = Server(write_course(tmp_path / "course", students), tmp_path / "out", options=("--workers", "3")).start()
    try:
        ids = {s: server.upload(token(s), solution_zip("vector_add", s), ["vector_add"])[2][0]["id"] for s in students}
        for student, id in ids.items():
            graded(server, student, [id])
    finally:
        server.stop()
    assert "Grading on 3 local CPU worker(s)" in server.log.read_text()
    with sqlite3.connect(server.out / "gradebook.sqlite") as db:
        workers = {by for (by,) in db.execute("SELECT graded_by FROM submissions")}
        scores = [score for (score,) in db.execute("SELECT score FROM grades")]
    assert len(workers) == 2, f"both graded by one worker: {workers}"
    assert scores == [4.0, 4.0]


@pytest.mark.parametrize("options", [["--workers", "0"], ["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"]])
def test_serve_refuses_workers_as_batch_does(tmp_path, options):
    """The batch's usage errors, word for word, before the service writes anything (a process each,
    with a time limit: a service that took the options would serve until stopped)."""
    course = write_course(tmp_path / "course", ["ivy"])
    said = []
    for argv in (["batch", "tests", "--out", str(tmp_path / "graded")],
                 ["serve", "--course", str(course), "--out", str(tmp_path / "served"), "--port", "0"]):  # fmt: skip
        done = subprocess.run([sys.executable, "-m", "grader", *argv, *options], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert done.returncode == 2, done.stdout + done.stderr
        said.append(done.stdout)
    assert said[0] == said[1] and "--workers" in said[0]
    assert not (tmp_path / "graded").exists() and not (tmp_path / "served").exists()
