"""The assignments of one submission graded at once on one GPU (`grade` on the GPU tier).

Graded one after another, a submission's assignments leave the GPU idle while each child starts
(the sandbox, torch, a CUDA context: 5-10 s on an H100) and while kernels compile, and leave all
but one of the machine's cores idle. Here each assignment is graded in a process of its own, as
a batch's workers do, and the processes share the GPU through its lock (gpu_lock.py): their
correctness runs overlap, each timed phase has the GPU to itself. A process of its own, not a
thread: a grading process reaps and kills the orphans its children leave behind (isolation.py),
which it could not tell from a sibling thread's children.

They also share the GPU's memory: no more gradings start than their assignments' caps
(`gpu_memory_gib`, plus CONTEXT_GIB each for what no cap counts) fit, as many as fit at once
(`_next`). On the CPU tier assignments are graded one after another: there, every
child's time counts against its limit, and children that share two cores would slow each other.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import shutil
import tempfile
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Callable

from grader.running import early_workers, gpu_lock

# What a grading holds on its GPU beside torch's capped allocator (assignment.toml's gpu_memory_gib):
# its CUDA contexts (the correctness child's, the timing child's, which starts beside it, and the
# judging parent's: 529 MiB each with torch and Triton's utilities loaded, on an H200 on 2026-12-03),
# cuBLAS's workspace, Triton's and CuPy's own buffers.
CONTEXT_GIB = 2.0


def gradings_per_gpu(gpu_gib: float, caps_gib: list[float]) -> int:
    """How many gradings one GPU of `gpu_gib` holds at once, if each takes the most its
    assignment allows (its cap, plus what no cap counts): never fewer than one."""
    return max(1, int(gpu_gib // (max(caps_gib, default=0.0) + CONTEXT_GIB)))


def smallest_gpu_gib() -> float:
    """The memory of the smallest GPU this process sees, in GiB."""
    import torch

    return min(torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count())) / 2**30


def _quiet(text: str) -> None:
    pass


def _need(assignment) -> float:
    return assignment.gpu_memory_gib + CONTEXT_GIB


def _most_that_fit(assignments, room: float) -> int:
    """How many of `assignments` fit in `room` at once (the smallest first)."""
    count = 0
    for need in sorted(_need(a) for a in assignments):
        if need > room:
            break
        room, count = room - need, count + 1
    return count


def _next(pending: list, running: dict, gpu_gib: float):
    """The next pending assignment to start (`pending` largest first): the largest whose start
    still lets as many gradings start as fit beside the running ones at all; the first, if none
    runs and none fits. For solutions/ on an H100 (79.6 GiB), largest first started the two
    32 GiB assignments and one more, and the other three waited 86 s for a place; this starts
    five of the six. (A few passes over the pending ones per choice, not one per subset of them:
    a course may list many assignments.)"""
    room = gpu_gib - sum(_need(a) for a in running.values())
    most = _most_that_fit(pending, room)
    for i, assignment in enumerate(pending):
        rest = pending[:i] + pending[i + 1 :]
        if most and _need(assignment) <= room and 1 + _most_that_fit(rest, room - _need(assignment)) == most:
            return assignment
    return pending[0] if pending and not running else None


def grade_side_by_side(submission: Path, assignments: list, settings, gpu_gib: float, grade_one: Callable,
                       progress: Callable[[str], None] = _quiet) -> dict[str, tuple[list, object]]:  # fmt: skip
    """Each assignment's (tests, phases) from `grade_one(assignment, submission, settings)`
    (grading.grade_assignment), in up to `settings.parallel` processes at once that share this
    process's GPU through `settings.gpu_lock` (the machine's: gpu_lock.py), or, where it has none,
    a lock in a folder of their own, removed after."""
    from grader.running.gpu_lock import GpuLock

    join_workers()  # an earlier grading's (a process that grades again and again holds none past its next)
    folder = Path(tempfile.mkdtemp(prefix="grader-gpu-lock-"))
    shared = dataclasses.replace(settings, progress=_quiet, gpu_lock=settings.gpu_lock or GpuLock(folder, "0"))
    pending = sorted(assignments, key=lambda a: -a.gpu_memory_gib)
    running: dict[Future, object] = {}
    graded: dict[str, tuple[list, object]] = {}
    workers = max(1, min(settings.parallel, len(assignments)))
    # Started as the command began, where it did (early_workers.py); never a fork of a parent that
    # holds a CUDA context and threads.
    pool = early_workers.take(workers) or ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        while pending or running:
            while len(running) < settings.parallel and (assignment := _next(pending, running, gpu_gib)):
                pending.remove(assignment)
                running[pool.submit(grade_one, assignment, submission, shared)] = assignment
            progress(f"grading {', '.join(a.name for a in running.values())} side by side "
                     f"({len(graded)} of {len(assignments)} done)")  # fmt: skip
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                graded[running.pop(future).name] = future.result()
        gpu_lock.note("every assignment graded")
    except BaseException:
        pool.shutdown(wait=True)  # a grading that failed, or a Ctrl-C: the others end first, as ever
        raise
    else:
        # Each worker has nothing left to do; its end (the interpreter's, CUDA's: half a second on
        # an H200's host) goes on while the caller writes the results: `join_workers` waits for it.
        # The pool itself is kept until then: collected here, its weakref callback waits for the lock
        # its manager thread holds while it joins the workers (Python 3.12 and later), and so the
        # caller waited for their end all the same (0.45 s of a warm GPU grade on an H200, after
        # the last verdict).
        _ending.append((pool, getattr(pool, "_executor_manager_thread", None)))  # it joins them: `join_workers`
        pool.shutdown(wait=False)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return graded


# The pools whose workers were told to end (grade_side_by_side), each with its manager thread,
# which joins the pool's processes once they have (a pool told not to wait forgets its own).
_ending: list = []


def join_workers() -> None:
    """Wait until every side-by-side worker of this process has ended: after a grade's results
    are written and shown, before the command ends (no process of a grading outlives it)."""
    while _ending:
        pool, manager = _ending.pop()
        if manager is not None:
            manager.join()
        del pool  # collected now, its workers gone: its callback finds the lock free
        gpu_lock.note("side-by-side workers ended")
