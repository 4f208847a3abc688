"""Cases hidden until the deadline run in a child of their own, after every visible case is done.

When every case ran in one child, a submission could remember a hidden case's inputs and raise
them in the next visible case's error, which the student reads before the deadline (its report,
a `visible` Gradescope test, the terminal); and the job a child is handed lists every task's seed.
So a grading's visible cases run first, in children whose jobs name no hidden task; then the
hidden ones, in a child of their own. (Each group's tasks whose kernel no launch could be tied to
run once more in a fresh child: tasks.launch_lost.) That child starts from a copy of the kernels the grading
compiled (compile_cache.restore: the compilers' own files, nothing else a child left there), and
everything it could write is thrown away with it: the
grading's own compiled folder, which later children (the timing child) read and the next grading
of the same files starts from (compile_cache.py), never sees it. The submission's copy and its
built libraries are read-only to every child (sandbox.py).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

from grader.assignment.spec import Assignment
from grader.messages.job import Task
from grader.running import compile_cache
from grader.running.tasks import launch_lost

WITHHELD = "(a hidden case's: what it said is shown after the deadline)"
HIDDEN_CACHE = "compiled-hidden"  # under the grading's work folder: the hidden child's own, thrown away
# tasks.run_tasks with all but (tasks, compiled=, spawned=) given: one group of tasks through children.
Run = Callable[..., dict]


def is_hidden(assignment: Assignment, task: Task) -> bool:
    """Whether a correctness task is one of a hidden case (a CPU-tier probe is of its part's first case)."""
    part = next(p for p in assignment.parts if p.name == task.part)
    return part.cases[task.index].hidden


def visible_then_hidden(run: Run, tasks: list[Task], assignment: Assignment, compiled: Path, workdir: Path,
                        spawned=None) -> dict:  # fmt: skip
    """Every task's result: the visible ones' first (in `spawned`, the child started ahead, where
    given), then the hidden ones' in a child of their own with a throwaway copy of what the
    compilers left in `compiled`."""
    hidden = [task for task in tasks if is_hidden(assignment, task)]
    visible = [task for task in tasks if task not in hidden]
    results = _run_group(run, visible, compiled, spawned) if visible else {}
    if hidden:
        own = workdir / HIDDEN_CACHE
        shutil.rmtree(own, ignore_errors=True)
        own.mkdir(mode=0o700)
        try:
            compile_cache.restore(compiled, own)
            results.update(_run_group(run, hidden, own))
        finally:
            shutil.rmtree(own, ignore_errors=True)
    return results


def _run_group(run: Run, tasks: list[Task], compiled: Path, spawned=None) -> dict:
    found = run(tasks, compiled=compiled, spawned=spawned)
    again = [t for t in tasks if t.id in found and launch_lost(found[t.id])]
    if again:  # once, in a fresh child: a kernel no launch can be tied to is judged only if it comes back
        found.update(run(again, compiled=compiled))
    return found


def shown(verdicts: list[tuple[bool, object]]) -> list:
    """(hidden, verdict) pairs as a test a student reads may quote them: a hidden case's verdict
    keeps its reason, never its message or metrics (the child that ran it knew its inputs)."""
    return [dataclasses.replace(v, message=WITHHELD, metrics={}) if hidden else v for hidden, v in verdicts]
