"""How many CPU threads torch runs in each process of a GPU grading: the grading's share of the cores.

A GPU grading's CPU work is incidental: its children draw a case's inputs from the CPU's generator
and convert them (cases.case_inputs), its judging process draws them again. torch gives each process
a pool of one OpenMP thread per core for that work. Graded side by side (overlap.py, a batch's
workers), six gradings' processes each brought a pool of 16 to an H200 host's 16 cores: up to 76
threads were ready to run at once, and each correctness child took 1.6 to 2.3 times as long as
with one thread each (the slowest 6.0 s against 3.6 s; `solutions/` warm, 2026-12-04, tools/load_sampler.py).
Timings moved by no more than they do between two gradings alike: the timed code runs on the GPU.

So each process of a GPU grading runs `threads(gradings)`: the cores split evenly over the
gradings that share them, two processes of each computing at once (its child, and its judging or
its timing child's start). The CPU tier keeps torch's own count: there one child runs at a time.
"""

from __future__ import annotations

import os

PROCESSES_PER_GRADING = 2  # of one grading's processes, those that use the CPU at once
AT_ONCE = "GRADER_GRADINGS_AT_ONCE"  # set for a batch's workers: how many share the host's cores


def threads(gradings: int, cores: int | None = None) -> int:
    """Each process's threads where `gradings` gradings share the host's `cores` (this one's)."""
    cores = cores or len(os.sched_getaffinity(0))
    return max(1, cores // (PROCESSES_PER_GRADING * max(1, gradings)))


def gradings_here() -> int:
    """How many gradings share this host's cores, where the process that started this one said so
    (batch.worker_specs tells each worker of its cluster); else one."""
    given = os.environ.get(AT_ONCE, "")
    return int(given) if given.isdigit() and int(given) > 0 else 1


def take(gradings: int) -> int:
    """This grading process's share, for torch's own work here; its children are given the same
    (isolation.child_environment reads it back). Returns the thread count."""
    import torch

    count = threads(gradings)
    torch.set_num_threads(count)
    return count


def variables(count: int) -> dict[str, str]:
    """A thread count as the variables torch's OpenMP, MKL and numpy's OpenBLAS read as they load."""
    return {name: str(count) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


def child_threads() -> dict[str, str]:
    """A GPU-tier child's thread count, as variables: the count of the process that starts it."""
    import torch

    return variables(torch.get_num_threads())
