"""What a child reported, read back as it runs: its captured stdout and stderr (head and tail,
so a chatty submission cannot flood the report), and its signed channel, read by a thread with
caps on every size and count (`Channel`), into one `ChildRun`. A frame that fails its signature,
breaks a cap or does not parse ends the reading and costs the task in flight."""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from grader.messages import frames, kept_file
from grader.messages.decoding import ProtocolError
from grader.messages.job import Task
from grader.running import gpu_lock
from grader.messages.reports import BenchReport, Done, Failure, Finished, Hello, Imported, Output, Start
from grader.reporting.text import printable
from grader.witness import stream as witness_stream

CAPTURE_BYTES = 16 * 1024  # kept from the head and from the tail of each output stream
FRAMES_PER_TASK = 8  # Start, Done and a few outputs: more is a flood
OUTPUT_DTYPES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
                 "int8": 1, "uint8": 1, "bool": 1}  # fmt: skip


def _nbytes(dtype: str, shape: list[int]) -> int:
    """The bytes of a tensor of this dtype and shape (-1: a dtype no output may have)."""
    size = OUTPUT_DTYPES.get(dtype)
    if size is None:
        return -1
    numel = 1
    for extent in shape:
        numel *= max(extent, 0)
    return numel * size


class Capture(threading.Thread):
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
        """What was kept, as text with no control sequences: it may reach a terminal or a report."""
        if self.total <= CAPTURE_BYTES:
            kept = self.head
        elif self.total - 2 * CAPTURE_BYTES <= 0:
            kept = self.head + self.tail[-(self.total - len(self.head)):]
        else:
            kept = self.head + f"\n[... {self.total - 2 * CAPTURE_BYTES} bytes of output left out ...]\n".encode() + self.tail
        return printable(kept.decode(errors="replace"))


@dataclass
class OutputFile:
    """An output tensor as the parent wrote it to its own file (`path` is None when not sent)."""

    dtype: str
    shape: list[int]
    path: Path | None
    # Or where it lies in a timing child's kept outputs' file (messages/kept_file.py), with the
    # harness's fingerprint of it: `load` reads it from there.
    kept: kept_file.KeptFile | None = None
    kept_at: int = 0
    fingerprint: int = 0

    @property
    def sent(self) -> bool:
        return self.path is not None or self.kept is not None

    def load(self, device: str):
        """The bytes, as a uint8 tensor on `device`: kept_file.Rewritten where the kept outputs'
        file no longer holds what the harness put there."""
        if self.kept is not None:
            return self.kept.load(self.kept_at, _nbytes(self.dtype, self.shape), self.fingerprint, device)
        return self.read().to(device)

    def read(self):
        """The file's bytes, read once into a uint8 tensor of their own: read_bytes and a bytearray
        of it were two copies (8 s of a gibibyte's on the 2-core machine, where this is 1.5 s)."""
        import torch

        raw = torch.empty(self.path.stat().st_size, dtype=torch.uint8)
        view, done = memoryview(raw.numpy()), 0
        with open(self.path, "rb", buffering=0) as file:
            while done < len(view):  # one read gives at most about 2 GiB
                count = file.readinto(view[done:])
                if not count:
                    raise ValueError(f"{self.path} ended at {done} of its {len(view)} bytes")
                done += count
        return raw


@dataclass
class ChildRun:
    returncode: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    stdout: str = ""
    stderr: str = ""
    limit_hit: tuple[str, str] | None = None  # (reason, message) when the parent killed it for a limit
    violation: ProtocolError | None = None  # what ended the reading of the channel early
    ready: bool = False  # the harness was up before any student code ran
    began: float = 0.0  # time.monotonic() when the child was started
    ready_s: float | None = None  # seconds from start until the harness was up (the sandbox, torch's import), waits left out
    ahead: bool = False  # started ahead of its tasks (isolation.start_ahead): `began`, `seconds` count from their sending
    started: list[str] = field(default_factory=list)
    task_began: dict[str, float] = field(default_factory=dict)  # time.monotonic() of each task's Start
    task_seconds: dict[str, float] = field(default_factory=dict)  # from each task's Start to its Done, on our clock
    outcomes: dict[str, Done] = field(default_factory=dict)
    outputs: dict[tuple[str, str], OutputFile] = field(default_factory=dict)
    finished: bool = False
    gpu_reserved_bytes: int = 0  # the child's own figure (Finished), within its cap; 0 if none came
    imported: bool = False  # with a gate: the child imported torch and waited to start CUDA
    gates: list[tuple[float, float | None]] = field(default_factory=list)  # each wait at the gate (monotonic)
    gate_error: BaseException | None = None  # what the gate raised (a fault of the grader's), re-raised to the caller
    witness: witness_stream.Witnessed | None = None  # what the witness saw of the child, where one recorded it

    def waited(self, now: float) -> float:
        """Seconds spent at the gate so far (both of its stages): they count against no time limit."""
        return sum((opened if opened is not None else now) - began for began, opened in self.gates)

    @property
    def gated_s(self) -> float:
        """How long the child waited at its gate, in the stages that opened."""
        return sum(opened - began for began, opened in self.gates if opened is not None)

    def owed(self) -> set[tuple[str, str]]:
        """The outputs that Done reports said would follow the last task (a benchmark's kept
        output, worker.Worker.pay) and that have not come: the only outputs taken after their
        task's Done, each once."""
        said = {(task, done.outcome.kept.returned.output) for task, done in self.outcomes.items()
                if isinstance(done.outcome, BenchReport) and done.outcome.kept is not None
                and done.outcome.kept.returned.kind == "tensor"}  # fmt: skip
        return said - self.outputs.keys()

    def stopped(self) -> bool:
        """Whether the child reported a dead CUDA context: it ends after that Done, on purpose,
        and sends nothing more (the outputs it kept for later are lost with the context)."""
        return any(isinstance(done.outcome, Failure) and done.outcome.fatal for done in self.outcomes.values())

    @property
    def in_flight(self) -> str | None:
        """The task that had started and not finished when the child ended."""
        return next((t for t in reversed(self.started) if t not in self.outcomes), None)

    def death(self) -> tuple[str, str]:
        """Why the child ended early, as a reason code and a sentence."""
        code = self.returncode
        tail = "\n".join(self.stderr.strip().splitlines()[-12:])
        detail = f"\nLast lines of stderr:\n{tail}" if tail else ""
        if self.violation:
            return self.violation.reason, f"{self.violation.message}{detail}"
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
        return "crash", f"the process exited with status {code} in the middle of the call (sys.exit or os._exit?){detail}"


class Channel(threading.Thread):
    """Reads the child's frames until the end, a cap, or a frame that is not the harness's."""

    def __init__(self, fd: int, key: bytes, folder: Path, tasks: list[Task], run: ChildRun, on_violation,
                 gpu_cap_bytes: int = 0, open_gate: Callable[[str], None] | None = None,
                 kept: kept_file.KeptFile | None = None):  # fmt: skip
        super().__init__(daemon=True)
        self.kept, self.kept_at = kept, 0  # a timing child's kept outputs' file, and where the next one starts
        self.gpu_cap_bytes, self.open_gate = gpu_cap_bytes, open_gate
        self.file = os.fdopen(fd, "rb")
        self.reader = frames.FrameReader(self.file, key, folder, 0, 0)
        self.take_tasks(tasks)
        self.run_, self.on_violation = run, on_violation
        self.up = threading.Event()  # the harness said it was up (Hello), or the channel ended before
        self.on_end: Callable[[], None] | None = None  # called as the reading ends, on this thread
        self.mark = ""  # a timing child's label for the hold log's marks of its end (gpu_lock.note)
        self.read = 0  # frames read

    def take_tasks(self, tasks: list[Task]) -> None:
        """The tasks the child runs, and the caps they set: given at the start, or, for a child
        started ahead (isolation.start_ahead), once its harness is up and before the child has them."""
        caps = [t.max_output_bytes for t in tasks]
        self.reader.payload_cap, self.reader.budget = max(caps, default=0), 3 * sum(caps) + (1 << 20)
        self.tasks = {t.id: t for t in tasks}
        self.limit = FRAMES_PER_TASK * len(tasks) + 4

    def run(self) -> None:
        try:
            while True:
                frame = self.reader.read()
                self.read += 1
                if self.read > self.limit:
                    raise ProtocolError("tampering", f"more than {self.limit} messages on the result channel")
                self.take(frame)
        except EOFError:
            pass
        except ProtocolError as error:
            self.run_.violation = error
            self.on_violation()
        finally:
            self.file.close()
            if self.on_end is not None:
                self.on_end()
            self.up.set()

    def take(self, frame: frames.Frame) -> None:
        message, run = frame.message, self.run_
        if isinstance(message, Imported):
            if run.imported or run.ready or self.open_gate is None:
                raise ProtocolError("tampering", "an Imported out of turn on the result channel")
            run.imported = True
            self.open_gate("cuda")
        elif isinstance(message, Hello):
            if run.ready or (self.open_gate is not None and not run.imported):
                raise ProtocolError("tampering", "a Hello out of turn on the result channel")
            now = time.monotonic()
            run.ready, run.ready_s = True, now - run.began - run.waited(now)
            if self.open_gate is not None:
                self.open_gate("run")
            self.up.set()
        elif isinstance(message, Start) and message.task in self.tasks:
            run.started.append(message.task)
            run.task_began[message.task] = time.monotonic()
        elif isinstance(message, Output) and (message.task == run.in_flight or (message.task, message.name) in run.owed()):
            self.output(message, frame)
        elif isinstance(message, Done) and message.task == run.in_flight:
            run.outcomes[message.task] = message
            run.task_seconds[message.task] = time.monotonic() - run.task_began[message.task]
            if self.open_gate is not None and len(run.outcomes) == len(self.tasks) and not run.stopped():
                self.open_gate("timed")  # every task is done: what is left to send is no timing
        elif isinstance(message, Finished):
            run.finished = True
            if self.mark:
                # every kept output is in; how much of it through the kept outputs' file
                gpu_lock.note(f"{self.mark} finished ({self.kept_at} bytes in the file)")
            # Only shown: a figure torch's capped allocator could not have reached is dropped.
            if 0 <= message.gpu_reserved_bytes <= self.gpu_cap_bytes:
                run.gpu_reserved_bytes = message.gpu_reserved_bytes
        else:
            raise ProtocolError("tampering", f"an out-of-order message on the result channel ({type(message).__name__})")

    def output(self, message: Output, frame: frames.Frame) -> None:
        expected = _nbytes(message.dtype, message.shape) if len(message.shape) <= 8 else -1
        if message.kept_at >= 0:
            self.kept_output(message, frame, expected)
            return
        if expected < 0 or (message.sent and frame.payload_bytes != expected):
            raise ProtocolError("tampering", f"an output whose bytes do not match its shape and dtype ({message.dtype})")
        path = frame.payload if message.sent else None
        self.run_.outputs[(message.task, message.name)] = OutputFile(message.dtype, message.shape, path)

    def kept_output(self, message: Output, frame: frames.Frame, expected: int) -> None:
        """An output whose bytes lie in the child's memory file: a running task's (a correctness
        case's), once, or one kept for after the last task (a benchmark's); each right after the
        one before, within the file and its task's cap."""
        kept, task, run = self.kept, self.tasks.get(message.task), self.run_
        named = (message.task, message.name)
        taken = named in run.owed() or (message.task == run.in_flight and named not in run.outputs)
        if kept is None or not taken or task is None:
            raise ProtocolError("tampering", "an output said to lie in a kept outputs' file where none was owed")
        if (not message.sent or frame.payload_bytes or expected <= 0 or expected > task.max_output_bytes
                or message.kept_at != self.kept_at or message.kept_at + expected > kept.size):  # fmt: skip
            raise ProtocolError("tampering", f"a kept output of {expected} bytes said to lie at {message.kept_at} of "
                                f"the kept outputs' file ({kept.size} bytes; the next one starts at {self.kept_at})")  # fmt: skip
        self.kept_at += expected
        self.run_.outputs[(message.task, message.name)] = OutputFile(message.dtype, message.shape, None, kept,
                                                                     message.kept_at, message.fingerprint)  # fmt: skip
