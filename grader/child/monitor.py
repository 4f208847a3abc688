"""One monitored stretch of student calls: its allocations guarded, its launches logged, its ops profiled.

`CallMonitor` puts together the three witnesses of a graded call: the dispatch mode that poisons
and guards each allocation (allocations.py), the log of Triton launches (hooks.py) and the
profiler that sees torch ops on every thread and, on a GPU, every kernel (activity.py). Its
`activity()` is what the parent will judge the call by.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Callable

import torch

from grader.child import marks, resources
from grader.child.activity import Session, summarize
from grader.child.allocations import Allocations, GuardedAllocations
from grader.child.hooks import LaunchLog
from grader.messages.reports import Activity, KernelCount, LaunchCount, OpCount


class CallMonitor:
    def __init__(self, own_root: Path, device: str, is_library: Callable[[str], bool]):
        self.own_root, self.device, self.is_library = own_root, device, is_library
        self.record = Allocations()

    def __enter__(self) -> CallMonitor:
        self.log = LaunchLog(self.own_root).__enter__()
        # torch's profiler records kernels through CUPTI, which has room for one client a process:
        # where the grader's witness records this one (marks.py), the witness sees the kernels.
        self.session = Session(kernels=self.device == "cuda" and not marks.current().recording).__enter__()
        self.mode = GuardedAllocations(self.is_library, self.record)
        self.mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.mode.__exit__(*exc)
        if self.device == "cuda":
            torch.cuda.synchronize()  # the kernels' records arrive once they have run
        self.session.__exit__(*exc)
        self.log.__exit__(*exc)

    @property
    def allocations(self):
        return self.record.guarded

    def overrun_of(self, tensor: torch.Tensor) -> int:
        return self.mode.overrun_of(tensor)

    def activity(self) -> Activity:
        found = summarize(self.session, self.record.excluded, self.record.where)
        found.launches = self.log.entries()
        found.loads = self.log.loads()  # GPU tier; the CPU tier's come from gpu_target (worker.py)
        found.resources = launched_resources(self.log)
        return found


class TimingMonitor:
    """The timed stretch of a benchmark: launches logged, torch ops of every thread profiled on the
    host only (no kernel records: they would add GPU time to every timed kernel, activity.py)."""

    def __init__(self, own_root: Path):
        self.own_root = own_root

    def __enter__(self) -> TimingMonitor:
        self.log = LaunchLog(self.own_root).__enter__()
        self.session = Session(kernels=False).__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.session.__exit__(*exc)
        self.log.__exit__(*exc)

    @property
    def harness(self) -> str:
        return self.session.harness

    def activity(self) -> Activity:
        found = summarize(self.session)
        found.launches = self.log.entries()
        found.resources = launched_resources(self.log)
        return found


def launched_resources(log: LaunchLog) -> list:
    """GPU tier: the resources of each kernel of the student's own files that the block launched, in
    the specialization it launched last: an autotuner's trials come before the launch of the config
    it picked (hooks.py keeps the compiled kernels in the order of their last launch). Advice,
    never judged (compiled_kernels.py)."""
    last = {(name, file): compiled for compiled, name, file in log.compiled.values()
            if Path(file).resolve().is_relative_to(log.own_root)}  # fmt: skip
    return [resources.of_compiled(compiled, name, file) for (name, file), compiled in last.items()]


def merge(first: Activity, second: Activity) -> Activity:
    """Two stretches of calls of one task as one account."""
    ops: Counter = Counter()
    threads: dict[str, int] = {}
    where: dict[str, str] = {}
    for op in first.ops + second.ops:
        ops[op.name] += op.count
        threads[op.name] = max(threads.get(op.name, 0), op.threads)
        where[op.name] = where.get(op.name) or op.where
    kernels: Counter = Counter()
    for kernel in first.kernels + second.kernels:
        kernels[(kernel.name, kernel.op, kernel.graph, kernel.unlaunched)] += kernel.count
    launches: Counter = Counter()
    for launch in first.launches + second.launches:
        launches[(launch.kernel, launch.file, launch.own)] += launch.count
    return Activity(
        ops=[OpCount(name, n, threads[name], where[name]) for name, n in sorted(ops.items())],
        launches=[LaunchCount(k, f, own, n) for (k, f, own), n in sorted(launches.items())],
        kernels=[KernelCount(name, n, *rest) for (name, *rest), n in sorted(kernels.items())],
        profiler_lost=first.profiler_lost or second.profiler_lost,
        refused=first.refused + second.refused,
        patched=sorted(set(first.patched + second.patched)),
        patched_at_import=first.patched_at_import or second.patched_at_import,
        targets=first.targets + second.targets,
        loads=first.loads + second.loads,
        windows=first.windows + second.windows,
        # A case's second call launches what the first picked, without an autotuner's trials.
        resources=second.resources or first.resources,
    )
