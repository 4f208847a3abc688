"""A child started ahead of its job (`Spawned`, made by isolation.spawn): it imports torch
meanwhile, then waits for the job on its standard input; and a timing child started ahead of its
tasks (`start_ahead`), which makes its harness ready while the correctness cases run. With the
small helpers both share with isolation.run_child: what the gate is told, the gate's byte, a line
to the child's standard input."""

from __future__ import annotations

import dataclasses
import os
import secrets
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from grader.messages import decoding, kept_file
from grader.messages.job import Job
from grader.running import memory_cgroup
from grader.running.child_run import Capture, Channel, ChildRun
from grader.running.limits import Watchdog
from grader.running.orphans import kill_orphans
from grader.witness import stream as witness_stream

_live_children: set[int] = set()  # every child process being graded by this process, on any thread


@dataclass
class Spawned:
    """A child started ahead of its job (`spawn`): it imports torch meanwhile, then waits for the
    job on its standard input. The descriptors are this process's ends; the child's are closed here."""

    process: subprocess.Popen
    key: bytes
    read_fd: int  # the result channel's reading end
    write_fd: int  # the channel's writing end, by the number the child knows it
    gate_fd: int  # the gate's reading end, by the child's number (-1: no gate)
    gate_opener: int
    lifeline: int  # its writing end: the child sees EOF once it is closed
    before: set[int]
    watchdog: Watchdog
    captures: tuple[Capture, Capture]
    gpu_memory_gib: float
    outputs: Path
    witness: witness_stream.Reader | None = None  # reads the witness's pipe, where it records the child
    taken: bool = False  # run_child gave it a job (and ended it)
    memory: memory_cgroup.Group | None = None  # its memory cgroup, removed once it has ended
    memory_verdict: tuple[str, str] | None = None  # (reason, message) when the cgroup's OOM killer ended it
    held: bool = False  # it waits on its gate before it imports anything (`let_import`)
    ahead: Ahead | None = None  # started ahead of its tasks (`start_ahead`)
    kept: kept_file.KeptFile | None = None  # a GPU timing child's kept outputs' file (`bind_kept`)
    _letting: threading.Lock = field(default_factory=threading.Lock)

    def let_import(self) -> None:
        """A child spawned `held` goes on to import (once; from any thread, until it is reaped)."""
        with self._letting:
            if self.held and self.gate_opener >= 0:
                self.held = False
                let_through(self.gate_opener)

    def reap(self) -> None:
        """The child has ended, or is to: it and whatever it left behind go, and this end's
        descriptors close (the channel's reading end is the channel's to close)."""
        self.watchdog.stop()
        self.watchdog.kill_all()  # whatever the child left behind goes with it
        self.process.wait()
        _live_children.discard(self.process.pid)
        kill_orphans(self.before | _live_children)
        if self.memory is not None:
            self.memory_verdict = self.memory.verdict()
            self.memory.remove()
            self.memory = None
        with self._letting:
            for fd in (self.lifeline, self.gate_opener):
                if fd >= 0:
                    os.close(fd)
            self.lifeline = self.gate_opener = -1

    def discard(self) -> None:
        """The job never came (nothing left to time): the child and all it started go."""
        if self.taken:
            return
        self.taken = True
        self.process.kill()
        self.reap()
        if self.ahead is None:
            os.close(self.read_fd)
        else:  # its channel closes its end, and lets go of what the child's start held
            self.ahead.sending.join(timeout=30)
            self.ahead.channel.join(timeout=30)


@dataclass
class Ahead:
    """A timing child started ahead of its tasks (`start_ahead`): what it has said so far, and the
    thread that reads it."""

    run: ChildRun
    channel: Channel
    sending: threading.Thread  # writes its job: a held child reads it only once let import


def start_ahead(child: Spawned, job: Job, gate: Callable[[str], None] | None = None) -> None:
    """Send a spawned timing child its job now, with every benchmark it may be given as its tasks,
    so that it makes its harness ready while the correctness cases run: torch's CUDA context,
    the reference of each part called once, the guard (child/main.py). On an H200 that took a timed phase's child 1 to 4 s, after its correctness
    cases were judged and before it could ask for the GPU: with six assignments side by side,
    most of the wait before the first timed phase. `gate(stage)`, where the GPU is shared, holds
    it for the start: "cuda" as the child is about to start CUDA (it returns once the child
    may), "ready" once its harness is up, "gone" where the child ended before that. run_child
    then sends the benchmarks it is to run, those of the parts whose correctness passed."""
    kept_fd, kept_seed = bind_kept(child, job.tasks)
    job = dataclasses.replace(job, ahead=True, key=child.key.hex(), channel_fd=child.write_fd, gate_fd=child.gate_fd,
                              gpu_memory_gib=child.gpu_memory_gib, kept_fd=kept_fd, kept_seed=kept_seed)  # fmt: skip
    run = ChildRun(ahead=True)

    def open_gate(stage: str) -> None:
        if stage == "cuda":
            pass_gate(gate, stage, run, child)
        else:  # "run": its harness is up
            tell(gate, "ready", run, child.watchdog)

    def ended() -> None:
        if not run.ready:  # before its harness was up: what it held for its start goes
            tell(gate, "gone", run, child.watchdog)

    channel = Channel(child.read_fd, child.key, child.outputs, [], run, child.watchdog.kill_all,
                      int(child.gpu_memory_gib * 2**30), open_gate if gate is not None else None, child.kept)  # fmt: skip
    channel.on_end = ended if gate is not None else None
    sending = threading.Thread(target=send_line, args=(child.process, decoding.job_json(job), False), daemon=True)
    child.ahead = Ahead(run, channel, sending)
    run.began = time.monotonic()
    channel.start()
    sending.start()


def bind_kept(child: Spawned, tasks: list) -> tuple[int, int]:
    """Size a GPU child's memory file for its outputs to what its tasks send when right (half a
    task's cap, grading.AssignmentGrading.task, for each output: a benchmark keeps one, a
    correctness case sends two, its first call's and its followup's), before the child has its
    job and any student code runs, its pages made ahead here (this process's, not the child's
    memory); the file's number and fingerprints' seed for its Job. An output larger than the right
    one (within its cap) finds no room and goes through the channel. (-1, 0) without a file (none
    where no task sends an output there: a shown baseline's child's), or once it is sized (a child
    is given one job). A child that died leaves its file to the grading (the outputs it sent lie
    there); run_tasks starts a few children at most."""
    kept = child.kept
    if kept is None or kept.seed:
        return -1, 0
    sent = {"bench": 1, "case": 2}
    right = sum(task.max_output_bytes // 2 * sent.get(task.kind, 0) for task in tasks)
    if not right:
        kept.close()
        child.kept = None
        return -1, 0
    kept.seed = secrets.randbits(62) or 1
    kept.bound(right, ahead=right)
    return kept.fd, kept.seed


def await_start(child: Spawned, timeout_s: float) -> bool:
    """Wait for a child started ahead to be up (or gone); False where it outlived `timeout_s` plus
    its waits at the gate, and was killed."""
    run, channel = child.ahead.run, child.ahead.channel
    while not channel.up.wait(timeout=1.0):
        if time.monotonic() - run.began - run.waited(time.monotonic()) > timeout_s:
            child.watchdog.kill_all()
            channel.up.wait(timeout=30)
            return False
    return True


def pass_gate(gate: Callable[[str], None], stage: str, run: ChildRun, child: Spawned) -> None:
    """The child waits at its gate for `stage`: the wait is recorded in `run` (it counts against no
    time limit), then the gate's byte lets the child on, unless the gate raised."""
    run.gates.append((time.monotonic(), None))
    try:
        tell(gate, stage, run, child.watchdog)
    finally:
        # A wait at the gate that never closed would move the child's deadline for ever.
        run.gates[-1] = (run.gates[-1][0], time.monotonic())
    if run.gate_error is None:
        let_through(child.gate_opener)


def tell(gate: Callable[[str], None], stage: str, run: ChildRun, watchdog) -> None:
    """Pass `stage` to the gate (it returns once the phase may go on); where it raises (the
    grader's own fault) the child is ended, and run_child raises it once the child is gone."""
    try:
        gate(stage)
    except BaseException as error:
        run.gate_error = error
        watchdog.kill_all()


def send_line(process: subprocess.Popen, line: bytes, done: bool = True) -> None:
    """A line to the child's standard input (its job, or a child's tasks that follow it), closed
    after the last. It returns once the child has read what the pipe's buffer does not hold."""
    try:
        process.stdin.write(line)
        process.stdin.flush()
        if done:
            process.stdin.close()
    except (BrokenPipeError, OSError):
        pass  # the child is already gone: its death says why


def let_through(gate_opener: int) -> None:
    """The gate's byte: the child waiting there goes on."""
    try:
        os.write(gate_opener, b"g")
    except OSError:
        pass  # the child is gone: its death says why


def importing_after(gate, timer: Spawned | None):
    """A correctness phase's gate (grading.AssignmentGrading.gpu) that lets a held timing child
    import once the correctness child has (its stage "cuda"), before that child waits for the GPU."""
    if gate is None or timer is None:
        return gate

    def opened(stage: str):
        if stage == "cuda":
            timer.let_import()
        gate(stage)

    return opened
