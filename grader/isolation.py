"""Running student code in a fresh child process, and reading back what it reports.

The parent spawns `python -I` (a new interpreter, not a fork) on a temporary copy of one
assignment of one submission, with a wall-clock limit. The child reports over a pipe of its
own (one JSON line per event); its stdout and stderr are captured and truncated, so a chatty
submission cannot flood the report. When the child dies in the middle of a task, the task in
flight gets the reason (crash with the signal named, timeout, out_of_memory) and the parent
carries on with the rest in a new child: one bad call costs that call, not the assignment.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from grader.spec import REPO_ROOT

# The child imports the grader from the repository, then takes the repository off sys.path,
# so student code cannot `import solutions...` through a namespace package.
BOOT = (
    "import os, sys; root = sys.argv[1]; sys.path.insert(0, root); from grader import worker; "
    "sys.path[:] = [p for p in sys.path if os.path.realpath(p or '.') != root]; worker.main(sys.argv[2:])"
)
CAPTURE_BYTES = 16 * 1024  # kept from the head and from the tail of each output stream
MAX_MESSAGE_BYTES = 1 << 20


class _Capture(threading.Thread):
    """Drains a stream, keeping its first and last CAPTURE_BYTES and counting the rest."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.head, self.tail, self.total = stream, b"", b"", 0

    def run(self) -> None:
        while chunk := self.stream.read(65536):
            self.total += len(chunk)
            if len(self.head) < CAPTURE_BYTES:
                self.head += chunk[: CAPTURE_BYTES - len(self.head)]
            self.tail = (self.tail + chunk)[-CAPTURE_BYTES:]

    def text(self) -> str:
        if self.total <= CAPTURE_BYTES:
            return self.head.decode(errors="replace")
        skipped = self.total - 2 * CAPTURE_BYTES
        if skipped <= 0:
            return (self.head + self.tail[-(self.total - len(self.head)):]).decode(errors="replace")
        middle = f"\n[... {skipped} bytes of output left out ...]\n".encode()
        return (self.head + middle + self.tail).decode(errors="replace")


class _Channel(threading.Thread):
    """Reads the child's JSON lines; anything that is not one is ignored."""

    def __init__(self, fd: int):
        super().__init__(daemon=True)
        self.file = os.fdopen(fd, "rb")
        self.messages: list[dict] = []

    def run(self) -> None:
        for line in iter(lambda: self.file.readline(MAX_MESSAGE_BYTES), b""):
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                self.messages.append(message)
        self.file.close()


@dataclass
class ChildRun:
    messages: list[dict]
    returncode: int | None
    timed_out: bool
    seconds: float
    stdout: str = ""
    stderr: str = ""
    outcomes: dict[str, dict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for message in self.messages:
            if message.get("event") == "done" and isinstance(message.get("outcome"), dict):
                self.outcomes[str(message.get("task"))] = message["outcome"]

    @property
    def in_flight(self) -> str | None:
        """The task that had started and not finished when the child ended."""
        started = [str(m.get("task")) for m in self.messages if m.get("event") == "start"]
        return next((t for t in reversed(started) if t not in self.outcomes), None)

    @property
    def finished(self) -> bool:
        return any(m.get("event") == "finished" for m in self.messages)

    def death(self) -> tuple[str, str]:
        """Why the child ended early, as a reason code and a sentence."""
        code = self.returncode
        tail = "\n".join(self.stderr.strip().splitlines()[-12:])
        detail = f"\nLast lines of stderr:\n{tail}" if tail else ""
        if self.timed_out:
            return "timeout", f"still running after {self.seconds:.0f} s, the assignment's time limit{detail}"
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else f"signal {-code}"
            if name == "SIGKILL":
                return "out_of_memory", f"the process was killed by SIGKILL, as the out-of-memory killer does{detail}"
            return "crash", f"the process was killed by {name}{detail}"
        if "CUDA" in tail and ("error" in tail or "illegal" in tail):
            return "crash", f"the process died with a CUDA error{detail}"
        return "crash", f"the process exited with status {code} in the middle of the call (sys.exit or os._exit?){detail}"


def graded_files(folder: Path) -> Iterator[Path]:
    """The files of a submission folder that the grader uses, in sorted order: links are skipped,
    never followed (one could point at solutions/), and so are Python's caches."""
    if not folder.is_dir():
        return
    for entry in sorted(folder.iterdir()):
        if entry.is_symlink() or entry.name == "__pycache__":
            continue
        if entry.is_dir():
            yield from graded_files(entry)
        elif entry.is_file():
            yield entry


def copy_submission(source: Path, destination: Path) -> None:
    """Copy one assignment folder of a submission: its graded files and nothing else."""
    destination.mkdir(parents=True, exist_ok=True)
    for path in graded_files(source):
        target = destination / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def child_environment(device: str) -> dict[str, str]:
    # No PYTHON* settings, and no GRADER_* ones: the batch salt is a secret student code never sees.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "GRADER_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"  # Triton kernels run on the CPU through the interpreter
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


def run_child(job: dict, workdir: Path, cwd: Path, timeout_s: float) -> ChildRun:
    job_path = workdir / "job.json"
    job_path.write_text(json.dumps({**job, "parent_pid": os.getpid()}))
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-I", "-c", BOOT, str(REPO_ROOT), str(job_path), str(write_fd)],
        pass_fds=(write_fd,),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=child_environment(job["device"]),
        start_new_session=True,  # its own process group: a timeout kills everything it started
    )
    os.close(write_fd)
    channel, out, err = _Channel(read_fd), _Capture(process.stdout), _Capture(process.stderr)
    for thread in (channel, out, err):
        thread.start()
    timed_out = False
    try:
        process.wait(timeout=max(timeout_s, 0.1))
    except subprocess.TimeoutExpired:
        timed_out = True
    _kill_group(process)
    for thread in (channel, out, err):
        thread.join(timeout=5)
    return ChildRun(
        messages=list(channel.messages),
        returncode=process.returncode,
        timed_out=timed_out,
        seconds=time.monotonic() - started,
        stdout=out.text(),
        stderr=err.text(),
    )


def _kill_group(process: subprocess.Popen) -> None:
    """Whatever the child left behind in its process group goes with it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()
