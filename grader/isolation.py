"""Running student code in a fresh child process, and reading back what it reports.

The parent spawns `python -I` (a new interpreter, not a fork) on a temporary copy of one
assignment of one submission, with a wall-clock limit, the assignment's host memory and process
limits (limits.py) and, where the OS allows, a sandbox of namespaces (sandbox.py). The child
reports over a pipe of its own (one JSON line per event); its stdout and stderr are captured and
truncated, so a chatty submission cannot flood the report. When the child dies in the middle of
a task, the task in flight gets the reason (crash with the signal named, timeout, out_of_memory)
and the parent carries on with the rest in a new child: one bad call costs that call, not the
assignment.
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

from grader.limits import Limits, Watchdog
from grader.spec import REPO_ROOT, load_assignment

# The child enters its sandbox while it is one thread with nothing loaded, imports the grader
# from the repository, then takes the repository off sys.path, so student code cannot
# `import solutions...` through a namespace package (where the sandbox could not hide it).
BOOT = (
    "import os, sys; root = sys.argv[1]; sys.path.insert(0, root); from grader import sandbox; "
    "status = sandbox.enter(root, sys.argv[2]); from grader import worker; "
    "sys.path[:] = [p for p in sys.path if os.path.realpath(p or '.') != root]; worker.main(sys.argv[2:], status)"
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
        self.garbled = 0  # lines that were not JSON, or were cut at MAX_MESSAGE_BYTES

    def run(self) -> None:
        for line in iter(lambda: self.file.readline(MAX_MESSAGE_BYTES), b""):
            try:
                message = json.loads(line)
            except ValueError:
                self.garbled += 1
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
    limit_hit: tuple[str, str] | None = None  # (reason, message) when the parent killed it for a limit
    garbled: int = 0  # messages on the result channel that could not be read
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
    def sandbox(self) -> str:
        """What the child's sandbox held (sandbox.enter's words), as the child reported it."""
        return next((str(m.get("status")) for m in self.messages if m.get("event") == "sandbox"), "unknown")

    @property
    def finished(self) -> bool:
        return any(m.get("event") == "finished" for m in self.messages)

    def death(self) -> tuple[str, str]:
        """Why the child ended early, as a reason code and a sentence."""
        code = self.returncode
        tail = "\n".join(self.stderr.strip().splitlines()[-12:])
        detail = f"\nLast lines of stderr:\n{tail}" if tail else ""
        if self.limit_hit:
            return self.limit_hit[0], f"killed: {self.limit_hit[1]}{detail}"
        if self.timed_out:
            return "timeout", f"still running after {self.seconds:.0f} s, the assignment's time limit{detail}"
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else f"signal {-code}"
            if name == "SIGKILL":
                return "out_of_memory", f"the process was killed by SIGKILL, as the out-of-memory killer does{detail}"
            return "crash", f"the process was killed by {name}{detail}"
        if "CUDA" in tail and ("error" in tail or "illegal" in tail):
            return "crash", f"the process died with a CUDA error{detail}"
        if self.garbled:
            return "crash", (f"the call's result never arrived: {self.garbled} message(s) on the result channel could "
                             f"not be read (longer than {MAX_MESSAGE_BYTES} bytes, or not JSON){detail}")
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


def child_environment(device: str, workdir: Path) -> dict[str, str]:
    # No PYTHON* settings, and no GRADER_* ones: the batch salt is a secret student code never sees.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "GRADER_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    # Triton's cache of compiled kernels, private to this grading: a shared one would let one
    # submission plant a binary under the key of another's (say, a verbatim tutorial) kernel.
    env["TRITON_CACHE_DIR"] = str(workdir / "triton-cache")
    env["TRITON_HOME"] = str(workdir)
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"  # Triton kernels run on the CPU through the interpreter
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


def limits_of(assignment_dir: str) -> tuple[Limits, float]:
    """The parent's limits on a child of the assignment, and the GPU memory (GiB) its torch may use."""
    assignment = load_assignment(Path(assignment_dir))
    return Limits(int(assignment.host_memory_gib * 2**30), assignment.max_processes), assignment.gpu_memory_gib


def private_libraries(job: dict, workdir: Path) -> dict[str, str]:
    """The job's CUDA libraries copied into the child's folder: the build cache, which holds
    every other student's libraries too, stays out of the child's sight."""
    copies = {}
    for part, library in job.get("libraries", {}).items():
        copy = workdir / "libraries" / part / Path(library).name
        if not copy.exists():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(library, copy)
        copies[part] = str(copy)
    return copies


def run_child(job: dict, workdir: Path, cwd: Path, timeout_s: float) -> ChildRun:
    limits, gpu_memory_gib = limits_of(job["assignment_dir"])
    job_path = workdir / "job.json"
    libraries = private_libraries(job, workdir)
    job_path.write_text(json.dumps({**job, "libraries": libraries, "gpu_memory_gib": gpu_memory_gib}))
    read_fd, write_fd = os.pipe()
    lifeline, held = os.pipe()  # the child sees EOF on `lifeline` once this process is gone, however it died
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-I", "-c", BOOT, str(REPO_ROOT), str(job_path), str(write_fd), str(lifeline)],
        pass_fds=(write_fd, lifeline),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=child_environment(job["device"], workdir),
        start_new_session=True,  # its own session: the watchdog finds (and kills) everything it started
    )
    os.close(write_fd)
    os.close(lifeline)
    watchdog = Watchdog(process.pid, limits)
    channel, out, err = _Channel(read_fd), _Capture(process.stdout), _Capture(process.stderr)
    for thread in (watchdog, channel, out, err):
        thread.start()
    timed_out = False
    try:
        process.wait(timeout=max(timeout_s, 0.1))
    except subprocess.TimeoutExpired:
        timed_out = True
    watchdog.stop()
    watchdog.kill_all()  # whatever the child left behind goes with it
    process.wait()
    os.close(held)
    for thread in (channel, out, err):
        thread.join(timeout=5)
    return ChildRun(
        messages=list(channel.messages),
        garbled=channel.garbled,
        returncode=process.returncode,
        timed_out=timed_out and not watchdog.verdict,
        seconds=time.monotonic() - started,
        stdout=out.text(),
        stderr=err.text(),
        limit_hit=watchdog.verdict,
    )
