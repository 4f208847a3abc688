"""Not a test: what the submission service's tests share. A course folder (course.toml, students.csv
and a salt file), a real `python -m grader serve` process on loopback (or the load test's script),
HTTP calls through urllib, a progress-tied hang guard, and archives made to order."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from grader.assignment.spec import REPO_ROOT
from grader.running import sandbox
from grader.service.tokens import token_for

for module in ("fastapi", "uvicorn", "multipart", "distributed"):
    pytest.importorskip(module, reason=f"the submission service needs {module} (`make .venv/.ready` installs it)")

SALT = "the service tests' secret"
START_S = 300  # a hang guard: a cluster and a web server start in seconds, slower on a busy 2-core machine


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_course(folder: Path, students: list[str], staff: tuple[str, ...] = ("ta",), per_hour: int = 10,
                 max_upload_mb: float = 1, extra: str = "") -> Path:  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "students.csv").write_text("student\n" + "".join(f"{name}\n" for name in students))
    (folder / "salt.txt").write_text(SALT + "\n")
    staff_list = ", ".join(f'"{name}"' for name in staff)
    (folder / "course.toml").write_text(f'[course]\nsalt_file = "salt.txt"\n\n[service]\nstudents = "students.csv"\n'
                                        f"per_hour = {per_hour}\nmax_upload_mb = {max_upload_mb}\nstaff = [{staff_list}]\n"
                                        f"{extra}")  # fmt: skip
    return folder / "course.toml"


def token(name: str) -> str:
    return token_for(SALT, name)


def call(method: str, url: str, token: str | None = None, body: bytes | None = None,
         headers: dict | None = None) -> tuple[int, dict, bytes]:  # fmt: skip
    """(status, headers with lower-case names, body); redirects are not followed."""
    sent = dict(headers or {})
    if token:
        sent["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, method=method, headers=sent)
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=120) as answer:
            return answer.status, {k.lower(): v for k, v in answer.headers.items()}, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def zip_of(files: dict[str, str | bytes], links: dict[str, str] | None = None) -> bytes:
    """A zip of `files` (path -> content) and of `links` (path -> target, stored as Unix symlinks)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(name, content)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16  # a symlink's mode
            archive.writestr(info, target)
    return buffer.getvalue()


def solution_zip(assignment: str, note: str = "") -> bytes:
    """solutions/<assignment> as a student would zip it; `note` (a comment) makes its files differ."""
    folder = REPO_ROOT / "solutions" / assignment
    files = {f"{assignment}/{p.relative_to(folder)}": p.read_text() + (f"\n# {note}\n" if note and p.suffix == ".py" else "")
             for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}  # fmt: skip
    return zip_of(files)


def wait_for(check, what: str, stall_s: float = 600, progress=lambda: None):
    """Poll `check()` until it returns something true; a hang guard tied to `progress()` (a value
    that changes as the server works), never a measurement: only `stall_s` without a change fails."""
    last, moved = progress(), time.monotonic()
    while not (found := check()):
        time.sleep(0.5)
        if (now := progress()) != last:
            last, moved = now, time.monotonic()
        elif time.monotonic() - moved > stall_s:
            pytest.fail(f"{what}: nothing moved for {stall_s:.0f} s")
    return found


class Server:
    """`python -m grader serve` (or `script`, which takes the same arguments) in a session of its own;
    `options` are more of serve's (`--workers 3`)."""

    def __init__(self, course: Path, out: Path, script: Path | None = None, options: tuple[str, ...] = ()):
        self.course, self.out, self.script, self.options = course, out, script, options
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log = out.parent / f"serve-{self.port}.log"

    def start(self) -> Server:
        command = [str(self.script)] if self.script else ["-m", "grader"]
        argv = [sys.executable, *command, "serve", "--course", str(self.course), "--out", str(self.out),
                "--port", str(self.port), *self.options]  # fmt: skip
        argv += ["--no-sandbox"] if sandbox.probe().startswith("none") else []
        with self.log.open("a") as log:
            self.process = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"the server stopped (exit {self.process.returncode}):\n{self.log.read_text()[-4000:]}")
            with contextlib.suppress(OSError):
                if call("GET", f"{self.url}/health")[0] == 200:
                    return self
            time.sleep(0.5)
        pytest.fail(f"the server did not answer in {START_S} s:\n{self.log.read_text()[-4000:]}")

    def kill9(self) -> None:
        """The server's own process only, as a crash would end it (its workers are its children)."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(60)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(60)

    def api(self, method: str, path: str, token: str | None = None, body: bytes | None = None, **headers):
        status, found, answer = call(method, f"{self.url}{path}", token, body, headers)
        return status, found, json.loads(answer) if found.get("content-type", "").startswith("application/json") else answer

    def upload(self, token: str, archive: bytes, assignments: list[str] = ()):
        query = "&".join(f"assignment={name}" for name in assignments)
        return self.api("POST", f"/api/submissions?{query}", token, archive, **{"Content-Type": "application/zip"})

    def state(self, token: str, id: str) -> str:
        return self.api("GET", f"/api/submissions/{id}", token)[2]["state"]
