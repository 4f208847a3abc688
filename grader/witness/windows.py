"""The graded calls as the witness saw them: windows between the harness's marks, and what ran in each.

The harness marks each call of student code (and each timed call of torch's reference) with two
memsets on the GPU's current stream: one of OPEN_<role> before the call, one of CLOSE after it,
each of MARK_BASE + n bytes for the call's number n in the process (child/marks.py). The witness
records both memsets (their GPU times) and the host calls that issued them (their host times).
A kernel or a copy belongs to a window when the host call that started it falls between the
window's two marks on the host: on any stream, from any thread. Where CUPTI kept no record of
that host call, its GPU start inside the window decides.

Which task a window belongs to: the harness asks the witness to flush at the end of every task,
so the records of task k are all written before the k-th flush line.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

from grader.witness.stream import ApiCall, Copy, Kernel, Witnessed

MARK_BASE = 256  # a mark's memset is this many bytes plus its window's number
ROLES = {0x51: "student", 0x52: "baseline", 0x53: "shown", 0x54: "import"}  # the OPEN mark's value: whose call
CLOSE = 0xA5
HOST_TO_DEVICE, DEVICE_TO_HOST = 1, 2


@dataclass
class Window:
    number: int
    role: str
    task: int  # the index of the task (in the child's order) whose records hold it
    host: tuple[int, int]  # host times of the calls that issued the two marks (0, 0: not recorded)
    gpu: tuple[int, int]  # the open mark's end and the close mark's start on the GPU
    kernels: list[Kernel] = field(default_factory=list)
    copies: list[Copy] = field(default_factory=list)

    @property
    def duration_ms(self) -> float:
        """The GPU time between the marks: what the call kept its stream busy for."""
        return max(self.gpu[1] - self.gpu[0], 0) / 1e6

    def escaped(self, slack_ns: int = 2000) -> list[Kernel]:
        """Kernels of the call that ran before the open mark or after the close mark: work on
        another stream that the stream between the marks never waited for."""
        return [k for k in self.kernels if k.start < self.gpu[0] - slack_ns or k.end > self.gpu[1] + slack_ns]


@dataclass
class Seen:
    """A child's windows, and what the witness saw outside them."""

    windows: dict[int, Window]
    strays: list[Kernel | Copy]  # started by a thread other than the harness's, outside every window
    problems: list[str]  # the marks do not make windows: missing, doubled, out of order


def _task_of(index: int, flushes: list[int]) -> int:
    """The task whose records hold the memset at `index`: the first flush that came after it."""
    return bisect.bisect_right(flushes, index)


def _marks(found: Witnessed, calls: dict[int, ApiCall]) -> tuple[dict[int, Window], list[str], int]:
    opened: dict[int, tuple[int, object]] = {}
    windows: dict[int, Window] = {}
    problems: list[str] = []
    threads: Counter = Counter()
    flushed = [memsets for _, _, memsets in found.flushes]
    for index, memset in enumerate(found.memsets):
        if memset.bytes < MARK_BASE or (memset.value not in ROLES and memset.value != CLOSE):
            continue
        number = memset.bytes - MARK_BASE
        call = calls.get(memset.correlation)
        if call is not None:
            threads[call.thread] += 1
        if memset.value in ROLES:
            if number in opened or number in windows:
                problems.append(f"window {number} was opened twice")
            opened[number] = (index, memset)
            continue
        if number not in opened:
            problems.append(f"window {number} was closed without being opened")
            continue
        index, first = opened.pop(number)
        opening = calls.get(first.correlation)
        host = (opening.start, call.start) if opening is not None and call is not None else (0, 0)
        windows[number] = Window(number, ROLES[first.value], _task_of(index, flushed), host, (first.end, memset.start))
    problems += [f"window {n} was never closed" for n in sorted(opened)]
    harness = threads.most_common(1)[0][0] if threads else 0
    return windows, problems, harness


def windows(found: Witnessed) -> Seen:
    """The windows of one child's witness, each with the kernels and copies that ran in it."""
    calls = {call.correlation: call for call in found.calls}
    marked, problems, harness = _marks(found, calls)
    ordered = sorted((w for w in marked.values() if w.host[1]), key=lambda w: w.host[0])
    opens = [w.host[0] for w in ordered]
    for earlier, later in zip(ordered, ordered[1:]):
        if later.host[0] < earlier.host[1]:
            problems.append(f"windows {earlier.number} and {later.number} overlap")
    by_gpu = sorted(marked.values(), key=lambda w: w.gpu[0])
    gpu_opens = [w.gpu[0] for w in by_gpu]
    strays: list[Kernel | Copy] = []
    for record in [*found.kernels, *found.copies]:
        call = calls.get(record.correlation)
        window = None
        if call is not None:
            at = bisect.bisect_right(opens, call.start) - 1
            if at >= 0 and call.start <= ordered[at].host[1]:
                window = ordered[at]
        else:
            at = bisect.bisect_right(gpu_opens, record.start) - 1
            window = by_gpu[at] if at >= 0 and record.start <= by_gpu[at].gpu[1] else None
        if window is not None:
            (window.kernels if isinstance(record, Kernel) else window.copies).append(record)
        elif call is not None and harness and call.thread != harness:
            strays.append(record)
    return Seen(marked, strays, problems)
