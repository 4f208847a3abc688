"""Reading the witness's lines (witness.c) in the parent: untrusted text, capped and parsed.

The child's process writes them, so student code could write lines of its own into the pipe too
(it shares the process). What that could add is judged like anything else the witness saw: a
forged kernel is one more kernel of the call, a forged window mark breaks the windows' order or
their count, and either costs the student. What it cannot do is take back a line the witness
already wrote. Every size and count is capped, and a line that does not parse is counted and
dropped, never raised: nothing here can crash or hang the parent.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

MAX_BYTES = 1 << 30  # what the parent reads of one child's witness before it stops keeping lines
MAX_RECORDS = 4_000_000
MAX_NAME = 2048


@dataclass(frozen=True)
class Kernel:
    start: int
    end: int
    stream: int
    correlation: int
    grid: int  # programs (blocks) launched
    block: int  # threads per block
    registers: int
    static_shared: int
    dynamic_shared: int
    local: int  # local memory per thread (spills), bytes
    name: str  # demangled


@dataclass(frozen=True)
class Copy:
    start: int
    end: int
    stream: int
    correlation: int
    kind: int  # CUPTI's copy kind: 1 host to device, 2 device to host, 8 device to device, ...
    bytes: int


@dataclass(frozen=True)
class Memset:
    start: int
    end: int
    stream: int
    correlation: int
    value: int
    bytes: int


@dataclass(frozen=True)
class ApiCall:
    start: int
    end: int
    thread: int
    correlation: int
    domain: str  # "R" runtime, "D" driver
    callback: int


@dataclass
class Witnessed:
    """Everything one child's witness said, in the order it said it. `flushes` holds, for each
    flush the harness asked for (one per finished task), how many records had arrived by then."""

    kernels: list[Kernel] = field(default_factory=list)
    copies: list[Copy] = field(default_factory=list)
    memsets: list[Memset] = field(default_factory=list)
    calls: list[ApiCall] = field(default_factory=list)
    flushes: list[tuple[int, int, int]] = field(default_factory=list)  # (kernels, copies, memsets) seen by each
    cuda_thread: int = 0  # the OS thread that started CUDA
    started: bool = False
    problems: list[str] = field(default_factory=list)  # X lines: what the witness could not do
    garbled: int = 0  # lines that did not parse
    overflow: bool = False  # more than MAX_BYTES or MAX_RECORDS: the rest was read and dropped

    @property
    def records(self) -> int:
        return len(self.kernels) + len(self.copies) + len(self.memsets) + len(self.calls)


def _ints(fields: list[str], count: int) -> list[int] | None:
    if len(fields) < count:
        return None
    try:
        return [int(f) for f in fields[:count]]
    except ValueError:
        return None


def parse_line(line: str, into: Witnessed, names: dict[str, str]) -> None:
    tag, _, rest = line.partition(" ")
    if tag == "K":
        fields = rest.split(" ", 10)
        values = _ints(fields, 10)
        if values is None or len(fields) < 11:
            into.garbled += 1
            return
        name = fields[10][:MAX_NAME]
        into.kernels.append(Kernel(*values, names.setdefault(name, name)))
    elif tag in ("C", "S"):
        values = _ints(rest.split(" "), 6)
        if values is None:
            into.garbled += 1
            return
        (into.copies if tag == "C" else into.memsets).append((Copy if tag == "C" else Memset)(*values))
    elif tag == "A":
        fields = rest.split(" ")
        values = _ints(fields[:4], 4)
        if values is None or len(fields) < 6 or fields[4] not in ("R", "D") or not fields[5].isdigit():
            into.garbled += 1
            return
        into.calls.append(ApiCall(*values, fields[4], int(fields[5])))
    elif tag == "F":
        into.flushes.append((len(into.kernels), len(into.copies), len(into.memsets)))
    elif tag == "I":
        values = _ints(rest.split(" "), 2)
        into.started, into.cuda_thread = True, values[1] if values else 0
    elif tag == "X":
        into.problems.append(rest[:300])
    else:
        into.garbled += 1


class Reader(threading.Thread):
    """Reads one child's witness pipe to its end (the child and everything it started gone)."""

    def __init__(self, fd: int):
        super().__init__(daemon=True, name="witness")
        self.fd, self.found = fd, Witnessed()

    def run(self) -> None:
        names: dict[str, str] = {}
        total, pending = 0, b""
        # A TA's diagnosis of the witness itself: each child's raw lines, kept in this folder.
        keep = os.environ.get("GRADER_WITNESS_KEEP")
        copy = open(os.path.join(keep, f"witness-{os.getpid()}-{id(self)}.txt"), "wb") if keep else None
        with os.fdopen(self.fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(1 << 20):
                if copy is not None and total < MAX_BYTES:
                    copy.write(chunk)
                total += len(chunk)
                if self.found.overflow:
                    continue  # drained, so the child never blocks on a full pipe
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    parse_line(line.decode(errors="replace"), self.found, names)
                if total > MAX_BYTES or self.found.records > MAX_RECORDS or len(pending) > 1 << 16:
                    self.found.overflow = True
        if copy is not None:
            copy.close()

    def result(self, timeout: float = 10.0) -> Witnessed:
        self.join(timeout)
        if self.is_alive():  # a descendant still holds the pipe open: what came so far is what we have
            self.found.problems.append("the witness's pipe was still open after the child ended")
        return self.found
