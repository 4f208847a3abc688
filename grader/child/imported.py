"""What a submission's import ran, and the threads a task left running: judged as a call's work.

A file's top level runs once per process, before its first call, where no monitor looked: with
`grade`'s published seeds it could build a table of answers with torch, and each call would only
look its answer up, copy it and launch an empty kernel. The import now runs under a call's
monitor (monitor.CallMonitor: the profiler on every thread, the launch log, the allocation mode),
and what it saw travels with every later task of the process, in the task's activity, judged by
the parent as a call's work: the torch ops it ran (their line marked as run at import), and on a
GPU the kernels that no launch of the student's at import accounts for. Its launches are left
out: a kernel of the student's run at import did no call's work.

Every later task, and not only the part whose file was imported: a helper module imported by one
part's file stays imported, and serves whichever part uses it, its table with it.

A thread that a task started (at import or in a call) and that is still running when the task
ends works where no monitor looks, between calls: it is named with that task and every later one,
and the parent counts it as tampering.
"""

from __future__ import annotations

import threading

from grader.child import host_reads
from grader.child.guard import NOTED
from grader.messages.reports import Activity, KernelCount, OpCount


class Carried:
    """What a task's activity carries besides its own: every import's work and every thread left
    running (each later task's too), and the gateways' uses noted since the last task (its own)."""

    def __init__(self):
        self.at_import = Activity()
        self.threads: list[str] = []
        self.reads: list = []  # the guard's NOTED records since the last account

    def imported(self, activity: Activity, file: str) -> None:
        """An import's activity, and the gateways it used, carried by every later task."""
        add_to(self.at_import, evidence(activity, file))
        reads, self.reads = host_reads.ops(self.reads), []
        self.at_import.ops += evidence(Activity(ops=reads), file).ops

    def failed(self, error: BaseException) -> None:
        """A task's exception: threads a call left running are carried from now on."""
        if isinstance(error, LeftRunning):
            self.threads += error.threads

    def noted(self, refusals: list) -> list:
        """Keep the gateways' uses from the guard's records; return the rest."""
        self.reads += [r for r in refusals if r.kind == NOTED]
        return [r for r in refusals if r.kind != NOTED]

    def add_to(self, activity: Activity) -> None:
        activity.refused += self.threads
        activity.ops += host_reads.ops(self.reads)
        self.reads = []
        add_to(activity, self.at_import)


def evidence(activity: Activity, file: str) -> Activity:
    """What an import's activity holds against the student: its ops, and its GPU kernels but the
    ones its own launches account for."""
    ops = [OpCount(op.name, op.count, op.threads, f"{op.where or 'a line of yours'} (as {file} was imported)")
           for op in activity.ops]  # fmt: skip
    launched = {launch.kernel for launch in activity.launches if launch.own}
    kernels = [kernel for kernel in activity.kernels if kernel.op or _base(kernel.name) not in launched]
    return Activity(ops=ops, kernels=kernels)


def add_to(activity: Activity, found: Activity) -> None:
    """Put an import's evidence into a task's activity."""
    activity.ops += [OpCount(op.name, op.count, op.threads, op.where) for op in found.ops]
    activity.kernels += [KernelCount(k.name, k.count, k.op, k.graph, k.unlaunched) for k in found.kernels]


def running() -> set[threading.Thread]:
    """The Python threads alive now."""
    return set(threading.enumerate())


class LeftRunning(Exception):
    """A call returned with a thread it started still running."""

    def __init__(self, threads: list[str]):
        super().__init__("; ".join(threads))
        self.threads = threads


def check_threads(before: set[threading.Thread]) -> None:
    """Raise LeftRunning for the threads started since `before` that are still alive."""
    left = left_running(before)
    if left:
        raise LeftRunning(left)


def left_running(before: set[threading.Thread]) -> list[str]:
    """Threads started since `before` that are still alive, each in words."""
    found = []
    for thread in threading.enumerate():
        if thread not in before and thread.is_alive():
            target = getattr(thread, "_target", None)
            named = getattr(target, "__qualname__", None) or type(thread).__qualname__
            found.append(f"a thread of yours ({named}) still running after your code returned, where no monitor "
                         "sees what it does")  # fmt: skip
    return found


def _base(name: str) -> str:
    """A GPU kernel's name without its parameters, as a launch names it."""
    return name.split("(", 1)[0].strip()
