"""A grading's holds on a GPU shared with other workers (gpu_lock.py): each phase's, as a gate for
its children (`phase_hold`); a timing child's while it starts ahead of its tasks (`starting`); and
the grading process's own while it judges (`judging`). Each is nothing where the GPU is not
shared (the CPU tier, or a grading given no lock)."""

from __future__ import annotations

from contextlib import ExitStack, contextmanager, nullcontext
from typing import Callable

from grader.running.gpu_lock import GpuLock
from grader.running.tasks import TIMED_PHASES


def lock_of(grading) -> GpuLock | None:
    """The lock of a GPU the grading shares with other workers (None where it shares none)."""
    return grading.settings.gpu_lock if grading.device == "cuda" else None


def starting(grading) -> Callable[[str], None] | None:
    """The gate of a timing child started ahead (isolation.start_ahead), where the GPU is shared:
    beside the others while it starts CUDA and calls the baselines, as any child's start
    (`phase_hold`), until its harness is up. Called on the thread that reads the child."""
    lock = lock_of(grading)
    if lock is None:
        return None
    held = ExitStack()

    def gate(stage: str) -> None:
        if stage != "cuda":  # "ready" or "gone": the start is over
            held.close()
            return
        waited = held.enter_context(lock.beside(f"{grading.assignment.name} timing cuda start"))
        grading.budget.deadline += waited
        grading.phases.add("waiting", waited)

    return gate


@contextmanager
def judging(grading, label: str = "judging", after_timing: bool = False):
    """Judging here, in the parent, runs the float64 references on the GPU: on a GPU shared with
    other workers it holds the lock shared, so no reference runs inside another student's timed
    phase. A student's cases are judged beside a timed phase that waits (gpu_lock `beside`),
    so that the student joins the queue to time at once. The outputs of a timed phase are
    judged `after_timing`: behind the timed phase at the turnstile (the next, which waited for
    this one's child to end: it would otherwise wait for this judging too), not behind the
    whole queue (gpu_lock: it does not `defer`), so the judging runs beside that phase's own
    sending. Letting the whole queue go first, a worker whose student was judged while others
    queued went on only once the queue was empty: the students came in waves, with no one
    ready to time in between."""
    lock, name = lock_of(grading), f"{grading.assignment.name} {label}"
    hold = nullcontext() if lock is None else lock.shared(name, defer=False) if after_timing else lock.beside(name)
    with hold as waited, grading.phases.timed("judging"):
        if lock is not None:
            grading.phases.add("waiting", waited)
        yield


@contextmanager
def phase_hold(grading, phase: str):
    """A phase's hold on a GPU shared with other workers, as a gate for its children (None where
    the GPU is not shared). A child imports torch while others use the GPU; its gate's first
    stage ("cuda") holds the GPU shared while the child starts CUDA, so that no context starts
    during another student's timed phase (on an H100, one that did slowed a timed 0.09 ms kernel
    to a median of 0.11 ms), but not behind a timed phase that waits (gpu_lock `beside`: no
    student code has run in the child yet, and its start, 0.3 to 1.6 s on an H200 beside other
    students' work, is then not part of the phase's own hold); its second stage ("run") takes
    the phase's own hold before any student code runs: shared while correctness runs, alone
    while timing. The hold is kept until the phase ends (a second child of the phase passes at
    once). A timed phase that waits lets no new correctness phase start (gpu_lock's turnstile),
    but one under way runs its cases to the end in the same child. Ending that child between
    two cases to let the timed phase go first (as the grader once did) changed verdicts: code
    whose behaviour depends on what ran before it in the process then met a fresh process
    part-way, when and only when another student was waiting to time. attorch's GELU, whose
    kernel fails Triton's first compile in a process and passes every later one, lost its
    first case graded alone and three cases in a class of 20 sharing an H100 (2026-11-26).
    Waiting costs this grading none of its time limit."""
    lock = lock_of(grading)
    if lock is None:
        yield None
        return
    with ExitStack() as hold:
        starting = hold.enter_context(ExitStack())  # a child's hold while it starts CUDA
        taken, timed = [], []  # the phase's own hold, once taken; its exclusive holds

        def take(how: str, stage: str = "") -> ExitStack:
            label = f"{grading.assignment.name} {phase}{stage}"
            stack = hold.enter_context(ExitStack())
            if how == "timed":
                timed.append(stack.enter_context(lock.timed(label)))
                waited = timed[-1].waited
            else:
                waited = stack.enter_context(lock.shared(label) if how == "shared" else lock.beside(label))
            grading.budget.deadline += waited
            grading.phases.add("waiting", waited)
            return stack

        def gate(stage: str) -> None:
            if stage == "timed":  # a timed phase's timings are over: sending and judging its outputs are not
                for exclusive in timed:
                    exclusive.share()
                return
            if taken:
                return  # the phase holds the GPU already
            if stage == "cuda":  # no student code has run in the child yet
                starting.enter_context(take("beside", stage=" cuda start"))
                return
            starting.close()
            take("timed" if phase in TIMED_PHASES else "shared")
            taken.append(phase)

        yield gate
