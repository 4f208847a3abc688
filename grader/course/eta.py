"""The batch's time left, weighted by what each assignment costs to grade.

Rich's own estimate divides the tasks left by the rate at which tasks finished lately. The tasks of
a class differ by a factor of ten (a warm-up grades in seconds, a tiled kernel in minutes), and the
cheap ones finish first: at 2 of 24 it said 1:20 left of a batch that took 3:02. Here each task
costs what its assignment's tasks cost: the mean of those finished in this batch, else of this
assignment's grades in the gradebook (an earlier batch on this device), else the assignment's time
limit (`cpu_timeout_s`, `gpu_timeout_s`: each set from its slowest grading) scaled by how the tasks
finished so far compare with theirs. The time left plays the rest of the batch out: each running
task finishes what its cost leaves of it, and each queued one goes to the first worker free.
"""

from __future__ import annotations

import time
from collections import defaultdict

from rich.progress import ProgressColumn
from rich.text import Text


class Estimate:
    """The time left of a batch of tasks, each named by its assignment, on `workers` workers that
    take the tasks in the order given (as Dask hands out tasks submitted one after another)."""

    def __init__(self, tasks: list[str], workers: int, limits: dict[str, float], known: dict[str, float] | None = None,
                 clock=time.monotonic):  # fmt: skip
        self.limits = limits  # each assignment's time limit: what its cost is weighed by before any is measured
        self.known = dict(known or {})  # each assignment's mean seconds in earlier batches
        self.measured: dict[str, list[float]] = defaultdict(list)
        self.clock = clock
        self.workers = max(1, workers)
        self.queued = list(tasks[self.workers:])
        self.running = [(name, clock()) for name in tasks[: self.workers]]  # (assignment, when it started)

    def finished(self, assignment: str, seconds: float | None) -> None:
        """A task of `assignment` finished after `seconds` of grading (None: it failed inside the
        grader); its worker takes the next task."""
        now = self.clock()
        started = [i for i, (name, _) in enumerate(self.running) if name == assignment]
        if started:
            del self.running[started[0]]
        elif assignment in self.queued:  # handed out before an earlier one
            self.queued.remove(assignment)
        if self.queued:
            self.running.append((self.queued.pop(0), now))
        if seconds is not None:
            self.measured[assignment].append(seconds)

    def cost(self, assignment: str) -> float | None:
        """What one task of `assignment` is expected to take; None before anything is known."""
        if found := self.measured.get(assignment):
            return sum(found) / len(found)
        if assignment in self.known:
            return self.known[assignment]
        # Measured so far, as a share of their assignments' limits: the same share of this one's.
        shares = [s / self.limits[a] for a, found in self.measured.items() for s in found if self.limits.get(a)]
        if shares and self.limits.get(assignment):
            return self.limits[assignment] * sum(shares) / len(shares)
        return None

    def remaining(self) -> float | None:
        """Seconds left, or None while some task's cost cannot be told: the tasks running finish
        what their cost leaves, then each queued task goes to the first worker free."""
        now = self.clock()
        free = []
        for name, started in self.running:
            if (cost := self.cost(name)) is None:
                return None
            free.append(max(cost - (now - started), 0.0))  # one past its cost is about to finish
        free += [0.0] * (self.workers - len(free))  # idle workers
        for name in self.queued:
            if (cost := self.cost(name)) is None:
                return None
            free[free.index(min(free))] += cost
        return max(free, default=0.0)


class TimeLeft(ProgressColumn):
    """The progress bar's column of the Estimate's time left ("-:--:--" until it can tell)."""

    def __init__(self, estimate: Estimate):
        super().__init__()
        self.estimate = estimate

    def render(self, task) -> Text:
        left = self.estimate.remaining()
        if left is None:
            return Text("-:--:--", style="progress.remaining")
        minutes, seconds = divmod(round(left), 60)
        return Text(f"{minutes // 60}:{minutes % 60:02d}:{seconds:02d}", style="progress.remaining")
