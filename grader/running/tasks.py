"""A phase's tasks run in children: a new child after each one that dies, every task's outcome or
the reason it never reported, and where the grading's time went (`Phases`)."""

from __future__ import annotations

import dataclasses
import time
from contextlib import contextmanager
from pathlib import Path

from grader.judging.verdicts import TaskResult
from grader.messages.job import Job, Task
from grader.messages.reports import Activity, CaseReport, Failure
from grader.running import child_run, isolation
from grader.witness import judge as witness_judge

MAX_CHILDREN = 8  # processes per phase; each crash starts one more for the remaining tasks
# Phases whose children time, and so hold the GPU alone: a student's benchmarks, and a shown
# baseline's own child (shown_figures.py), which runs no student code.
TIMED_PHASES = ("timing", "shown")


class Budget:
    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


def failure(reason: str, message: str, died: bool = False) -> TaskResult:
    return TaskResult(Failure(reason, message), died=died)


def _collect(run: child_run.ChildRun) -> dict[str, TaskResult]:
    results = {}
    owed = {task for task, _ in run.owed()}
    witnessed = witness_judge.for_tasks(run.witness, run.started)
    for task_id, done in run.outcomes.items():
        outputs = {name: found for (task, name), found in run.outputs.items() if task == task_id}
        outcome = done.outcome if task_id not in owed else _unsent(run)
        results[task_id] = TaskResult(outcome, done.activity, outputs, seconds=run.task_seconds.get(task_id, 0.0),
                                      witness=witnessed.get(task_id))  # fmt: skip
    return results


def _unsent(run: child_run.ChildRun) -> Failure:
    """A benchmark timed, whose kept output the child was to send after its last task, and did not."""
    if run.finished:  # the harness sends what it owes before it says it finished: code in the process stopped it
        return Failure("tampering", "the process said it had finished without sending the output of a timed call, "
                                    "which the harness sends before that: code in it interfered with the harness")  # fmt: skip
    reason, message = run.death()
    return Failure(reason, f"the process ended after this benchmark was timed, before the output of its timed call "
                           f"could be sent for the check: {message}")  # fmt: skip


class Phases(dict):
    """Seconds one grading spent in each phase: `start` (children starting: the sandbox and the
    harness's imports), `build` (nvcc), `correctness` and `timing` (the children's time after
    their start: importing the student's file, compiling, autotuning and running), `shown` where
    it timed the machine's shown baselines (shown_figures.py); on a GPU shared with other workers
    also `waiting`, for the GPU's lock (not counted against the time limit).
    This process's own: `sizing` (each case's output size, where no process kept them: the first
    use of torch's meta device imports its compiler modules), `judging` (the verdicts, float64
    references included) and `caches` (the kept compilers' cache restored and kept). On a GPU,
    `gpu_reserved_bytes` is the most memory torch's allocator held in any child;
    `warm` says the grading found the kernels an earlier grading of the same files compiled;
    `precompile`, on the GPU tier, is the wait for the precompile pass (precompile.py), and
    `precompiled` what it did; `compiles`, on the CPU tier, the kernels compiled for the GPU, by
    Triton's key, each with whether the cache held it already; `launchers`, per phase, how many
    launchers Triton built there (gcc, about a second each). Shown, never graded."""

    gpu_reserved_bytes: int = 0
    warm: bool = False
    precompiled: str = ""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.compiles: dict[str, bool] = {}
        self.launchers: dict[str, int] = {}  # per phase, the launchers Triton built in it (compile_cache.launchers)

    def add(self, phase: str, seconds: float) -> None:
        self[phase] = self.get(phase, 0.0) + seconds

    @contextmanager
    def timed(self, phase: str):
        """The block's seconds, added to `phase`."""
        began = time.monotonic()
        try:
            yield
        finally:
            self.add(phase, time.monotonic() - began)

    def add_child(self, phase: str, run: child_run.ChildRun) -> None:
        start = run.ready_s if run.ready_s is not None else (0.0 if run.ahead else run.seconds - run.gated_s)
        self.add("start", start)
        # Its gate's wait is `waiting`; a child started ahead counts its seconds from its tasks' sending.
        self.add(phase, max(run.seconds - (0.0 if run.ahead else start) - run.gated_s, 0.0))
        self.gpu_reserved_bytes = max(self.gpu_reserved_bytes, run.gpu_reserved_bytes)
        # The CPU tier's compiles for the GPU, each once, and whether Triton's cache held it already
        for done in run.outcomes.values():
            targets = getattr(done.outcome, "activity", Activity()).targets
            self.compiles.update({target.key: target.cached for target in targets if target.ok})

    def line(self) -> str:
        line = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.items())
        notes = ["kernels compiled by an earlier grading of these files"] if self.warm else []
        notes += [self.precompiled] if self.precompiled else []
        if self.compiles:
            found = sum(self.compiles.values())
            notes.append(f"{found} of {len(self.compiles)} kernels compiled for the GPU found in the cache")
        if any(self.launchers.values()):
            built = ", ".join(f"{count} in {phase}" for phase, count in self.launchers.items() if count)
            notes.append(f"launchers built: {built}")
        if self.gpu_reserved_bytes:
            notes.append(f"GPU memory held by torch: at most {self.gpu_reserved_bytes / 2**30:.1f} GiB")
        return line + (f" ({'; '.join(notes)})" if notes else "")


def run_tasks(job: Job, tasks: list[Task], workdir: Path, view, budget: Budget, phases: Phases | None = None,
              phase: str = "correctness", gate=None, compiled: Path | None = None,
              spawned: isolation.Spawned | None = None) -> dict[str, TaskResult]:  # fmt: skip
    """Every task's outcome: a child's report, or the reason it never reported. Each child's
    seconds go to `phases` under `phase`; `compiled` is the compilers' cache of the grading;
    `spawned`, a child started ahead, takes the first job (a later child starts afresh; one that
    got no job is the caller's to discard)."""
    phases = Phases() if phases is None else phases
    results: dict[str, TaskResult] = {}
    pending = list(tasks)
    for _ in range(MAX_CHILDREN):
        if not pending or budget.left() <= 0:
            break
        run = isolation.run_child(dataclasses.replace(job, tasks=pending), workdir, view, budget.left(), gate, compiled,
                                  spawned, timed=phase in TIMED_PHASES)  # fmt: skip
        spawned = None
        phases.add_child(phase, run)
        found = _collect(run)
        if run.stopped() and not run.finished:
            # It stopped after a dead CUDA context, and the outputs it kept for later went with it:
            # those benchmarks are timed again in the next child, under the same exclusive hold
            # (the gate was not told "timed"); MAX_CHILDREN bounds how often.
            lost = {task for task, _ in run.owed()}
            found = {task: result for task, result in found.items() if task not in lost}
        results.update(found)
        pending = [t for t in pending if t.id not in results]
        if not pending:
            break
        reason, message = run.death()
        in_flight = run.in_flight
        if in_flight is None and run.outcomes and not run.timed_out and not run.violation:
            continue  # it stopped between tasks (after a CUDA error, on purpose): go on in a fresh one
        if in_flight is None:  # it died or hung outside any task: a new child would fare no better
            if not run.ready and not run.timed_out:  # before any student code ran: not the student's doing
                message = ("the grading process died before running any of your code: a fault of the grader "
                           f"or of this machine, please report it. {message}")
            for task in pending:
                results[task.id] = failure(reason, message)
            break
        results[in_flight] = failure(reason, message, died=True)
        # A bug that kills the process would kill every later call of that part too: one child, not one per case.
        dead_part = next(t.part for t in pending if t.id == in_flight)
        note = f"not run: the process died in an earlier call of this part ({reason})"
        for task in pending:
            if task.part == dead_part and task.id != in_flight:
                results[task.id] = failure(reason, note)
        pending = [t for t in pending if t.id not in results]
        if run.timed_out:
            break
    for task in pending:
        results.setdefault(task.id, failure("timeout", "not run: the assignment's time limit was spent"))
    return results


def launch_lost(result: TaskResult) -> bool:
    """Whether a case's call ran a kernel that no recorded launch, and so no op or call, can be
    tied to (reports.KernelCount.unlaunched): the profiler lost the record of a launch, which the
    kernel would be judged foreign for (integrity.foreign_kernels). Seen once in 60,420 launches of
    honest code, for no known reason; a kernel that a student's code could launch outside what the
    profiler records would have to be lost again in the second run, and is judged then."""
    report = result.outcome
    return isinstance(report, CaseReport) and any(k.unlaunched for k in report.activity.kernels)
