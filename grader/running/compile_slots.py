"""The machine's compiling slots: at most a core each but one of precompiling children at once,
whoever started them.

A grading of every assignment grades them side by side, each in a process of its own
(overlap.py), and each assignment's precompile pass (precompile.py) had its share of the cores:
on an H200 with 16 cores, 15 // 6 = 2 compiling children each. FlashAttention's 266 kernels then
compiled in 2 processes for 202 s, while the smaller assignments' passes had ended after 18 s and
left their cores idle (alone, in 15 processes, the same kernels took 40 s; docs/measurements.md,
"Where a GPU grading's time goes"). So every pass may start as many children as its process has
cores but one: two of its own at once (precompile.OWN_CHILDREN: a small pass is done in seconds,
and its timed phase goes on while a large one compiles), and each further child first takes one
of the machine's slots. The cores a small pass leaves go to the large one, and two gradings at
once (two terminals, a batch's workers) compile on the machine's cores, not on twice as many.

A slot is a file locked with flock(2) in the folder of the GPU locks (gpu_lock.machine_folder),
held by the grading process (never the child) for its child's life: the kernel makes the
processes agree, and a grading that dies releases its slots. A slot not found in time is advice
lost: that share of kernels is compiled where the graded child launches it, as without the pass.
"""

from __future__ import annotations

import fcntl
import os
import random
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from grader.running import gpu_lock

POLL_S = 0.05  # between two looks for a free slot: a compiling child runs for seconds


def cores() -> int:
    """The cores this process may run on (a batch worker's share where it is pinned)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def machine_slots() -> int:
    """The machine's compiling slots: a core each but one (one is left for the timed phases and
    the gradings' own processes), and at least one."""
    return max(1, cores() - 1)


@contextmanager
def slot(within_s: float, folder: Path | None = None, count: int | None = None) -> Iterator[bool]:
    """Hold one of the machine's `count` slots (`machine_slots`) for the body; yields whether one
    was found within `within_s` (the body runs either way, and decides)."""
    folder = folder or gpu_lock.machine_folder()[0]
    count = count or machine_slots()
    folder.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + within_s
    # Each slot's file opened once: a lock of flock(2) belongs to its open file, so this process's
    # other descriptors of a slot never hold it, and closing the one that does releases it.
    slots = [gpu_lock.open_lock(folder / f"compile-slot-{number}") for number in range(count)]
    try:
        while True:
            for fd in random.sample(slots, count):  # in no fixed order: waiters do not pile on slot 0
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                yield True
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)
        yield False
    finally:
        for fd in slots:
            os.close(fd)
