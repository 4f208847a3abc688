"""The shown baselines' figures (spec.Shown: torch.compile of the chain a part fuses), timed once per
machine, never per student.

A shown baseline is the course's own code on the course's own inputs: what it takes on a GPU says
nothing of a student. Timed in each student's timing child, it cost every GPU grading the
compile of each shape (torch.compile's cache is never kept: a child could plant what inductor
loads, compile_cache.py) in the child's start, under a hold of the GPU that kept every timed
phase waiting (4.6 s warm, 9.6 s cold, for a part of eight shapes on an H200), and its timing
inside the timed phase (1.6 s in all for the solutions' three parts that show one). Now a child
that runs no student code times it, on every benchmark of each part that shows one, by the same
protocol and holds as a timed phase (holds.phase_hold), the first time a grading on this machine
needs it; the figures are kept in a file under the grader's cache folder named by what they
depend on (the GPU, the assignment's files, the grader, torch and Triton), and every later
grading of the machine reads them (kept.py: a batch's other workers wait for the file rather
than each time it too). Each report shows the student's time against that figure. A figure that
could not be measured (its child died, or ran out of time) is not kept: the next grading tries
again.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tempfile
from pathlib import Path

import torch

from grader.assignment import output_sizes
from grader.judging.verdicts import TaskResult
from grader.messages.job import Task, task_id
from grader.messages.reports import BenchReport, Timings
from grader.running.compile_cache import CACHE_ROOT
from grader.running.kept import kept
from grader.running.tasks import Budget, run_tasks
from grader.assignment.spec import Assignment, Part

ROOT = CACHE_ROOT.parent / "shown"
LIMIT_S = 600.0  # the child's time limit: every shape compiled, then timed
MAX_SAMPLES = 1000


def file_for(assignment: Assignment, gpu: str) -> Path:
    """One file per GPU model and assignment files, grader, torch and Triton: a change to any starts another."""
    import triton

    digest = hashlib.sha256(f"{gpu}|{torch.__version__}|{torch.version.cuda}|{triton.__version__}".encode())
    digest.update(output_sizes.depends_on(assignment).encode())
    return ROOT / f"{_group(assignment, gpu)}-{digest.hexdigest()[:32]}.json"


def _group(assignment: Assignment, gpu: str) -> str:
    """The file's group (kept.py removes the group's older files): per assignment and GPU model, so
    that machines of two models that share a home folder keep a file each."""
    return f"{assignment.name}-{re.sub(r'[^A-Za-z0-9]+', '_', gpu).strip('_') or 'gpu'}"


def shown_task(part: Part, index: int) -> Task:
    """A shown baseline's task on a part's benchmark: its seed plays no part in the figure."""
    return Task(task_id(part.name, "shown", index), part.name, "shown", index, 0, 1, 0)


def figures(grading, parts: list[Part]) -> dict[str, dict]:
    """The kept figures of the shown baselines of `parts` (those with one), by benchmark task id:
    {"event_ms": [...]} or {"error": why}; measured now by a child of `grading`'s where this
    machine has none kept."""
    shown = [part for part in parts if part.shown]
    if not shown:
        return {}
    gpu = torch.cuda.get_device_name(0)
    path = file_for(grading.assignment, gpu)
    try:
        found = kept(path, _group(grading.assignment, gpu), _read, lambda: _measure(grading), json.dumps)
    except Unmeasured:
        return {}  # each report says its figure could not be measured; the next grading tries again
    return {task_id(part.name, "bench", i): found[task_id(part.name, "shown", i)]
            for part in shown for i in range(len(part.benchmarks)) if task_id(part.name, "shown", i) in found}  # fmt: skip


def _measure(grading) -> dict[str, dict]:
    """Every shown baseline of the assignment, on every benchmark, timed in a child of its own that
    runs no student code, holding the GPU as a timed phase does. Raises where one could not be
    measured at all (nothing is kept then)."""
    tasks = [shown_task(part, i) for part in grading.assignment.parts if part.shown for i in range(len(part.benchmarks))]
    # Compilers' caches of its own, new: the grading's are written by the student's children, which
    # could plant a kernel under the key of one inductor generates, or a module inductor loads, and
    # so time their code as the course's for every student of the machine.
    own = Path(tempfile.mkdtemp(prefix="shown-compiled-", dir=grading.workdir))
    with grading.gpu("shown") as gate:
        results = run_tasks(grading.job, tasks, grading.workdir, grading.view, Budget(LIMIT_S), grading.phases,
                            "shown", gate, own)  # fmt: skip
    measured = {task.id: _figure(results[task.id]) for task in tasks}
    lost = [f"{name}: {figure['lost']}" for name, figure in measured.items() if "lost" in figure]
    if lost:
        raise Unmeasured("; ".join(lost))
    return measured


class Unmeasured(Exception):
    """A shown baseline's child died or ran out of time: no figure to keep."""


def _figure(result: TaskResult) -> dict:
    report = result.outcome
    if not isinstance(report, BenchReport):
        return {"lost": getattr(report, "message", "no report")[:300]}
    if report.shown is None or not report.shown.event_ms:
        return {"error": report.shown_error or "it was not timed"}
    return {"event_ms": report.shown.event_ms[:MAX_SAMPLES]}


def _read(path: Path) -> dict[str, dict] | None:
    """The kept figures; None where there are none, or where the file is not what this module writes."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict):
        return None
    for figure in found.values():
        samples = figure.get("event_ms") if isinstance(figure, dict) else None
        if isinstance(figure, dict) and isinstance(figure.get("error"), str) and len(figure) == 1:
            continue
        if not (isinstance(samples, list) and samples and len(figure) == 1
                and all(type(v) is float and math.isfinite(v) and v > 0 for v in samples)):  # fmt: skip
            return None
    return found


def attach(tasks: list[Task], results: dict[str, TaskResult], found: dict[str, dict], parts: dict[str, Part]) -> None:
    """Each timed benchmark's report gets its part's shown figure from `found` (`figures`), or why
    there is none: whatever the timing child said of a shown baseline is replaced."""
    for task in tasks:
        report = results[task.id].outcome
        if not isinstance(report, BenchReport) or not parts[task.part].shown:
            continue
        figure = found.get(task.id, {"error": "this machine's figure could not be measured"})
        report.shown = Timings(list(figure["event_ms"])) if "event_ms" in figure else None
        report.shown_error = figure.get("error", "")
