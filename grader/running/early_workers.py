"""The side-by-side workers of a `grade` on a GPU (overlap.py), started as the command begins.

Each worker is a new interpreter (multiprocessing's spawn) that imports torch and the grader
before its first assignment: about 2 s on an H200's host. Started once the command had imported
the same (its own 2 s) and found its GPU, they began their assignments 4 s after the command did;
started here, from `python -m grader`'s first lines, they import while the command does. Only for
`grade` where a GPU may be (an NVIDIA device node, and no `--device cpu`): a grade that ends up
on the CPU tier, or grades a single assignment, never takes them (`take`), and they end with the
command (`close`).
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor

from grader.running import cpu_share

DEVICE_NODE = "/dev/nvidiactl"  # present wherever NVIDIA's driver is loaded
_pool: ProcessPoolExecutor | None = None
_size = 0


def start(argv: list[str], device_node: str = DEVICE_NODE) -> None:
    """Start the workers for the command line `argv` (without the program's name), where it may
    grade side by side: `grade`, a GPU's device node, and more than one assignment to grade."""
    global _pool, _size
    if _pool is not None or not argv or argv[0] != "grade" or not os.path.exists(device_node):
        return
    if _option(argv, "--device") == "cpu":
        return
    size = at_once(_assignment_count(argv))
    if size < 2:
        return
    _pool = ProcessPoolExecutor(size, mp_context=multiprocessing.get_context("spawn"), initializer=_import_grading,
                                initargs=(cpu_share.threads(size),))  # fmt: skip
    _size = size
    for _ in range(size):  # a pool of spawned workers starts one more at each task that finds none idle
        _pool.submit(int)


def at_once(count: int) -> int:
    """How many of `count` assignments a GPU grade grades at once, as the cores allow (a grading's
    children keep about two cores busy); overlap.py then starts as many as the GPU's memory holds."""
    return max(1, min(count, (os.cpu_count() or 2) // 2))


def take(size: int) -> ProcessPoolExecutor | None:
    """The workers started ahead, where there are at least `size`; None where none were started."""
    global _pool
    pool = _pool if _size >= size else None
    _pool = None if pool is not None else _pool
    return pool


def close() -> None:
    """End the workers that no grading took."""
    global _pool
    if _pool is not None:
        _pool.shutdown(wait=False, cancel_futures=True)
        _pool = None


def _option(argv: list[str], name: str) -> str | None:
    for i, word in enumerate(argv):
        if word == name and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(name + "="):
            return word.partition("=")[2]
    return None


def _assignment_count(argv: list[str]) -> int:
    """How many assignments the command grades: those it names, else every one of the course."""
    named = sum(1 for word in argv if word == "--assignment" or word.startswith("--assignment="))
    if named:
        return named
    from grader.assignment.loading import assignment_names

    return len(assignment_names())


def _import_grading(threads: int) -> None:
    """What a grading imports that takes the time: torch, Triton and the grader's judging and
    children (not grader.grading itself, which imports this module); with `threads`, the
    grading's share of the cores (cpu_share.py), as the CPU libraries' variables before they load.
    Without them, each worker's numerical libraries started a pool of a thread per core as they
    were imported: at a warm GPU grade's start on an H200's host, 68 threads were ready to run on
    16 cores while the command imported torch (tools/load_sampler.py)."""
    os.environ.update(cpu_share.variables(threads))
    import torch  # noqa: F401
    import triton  # noqa: F401

    import grader.judging.verdicts  # noqa: F401
    import grader.running.isolation  # noqa: F401

    end_quickly()


def end_quickly() -> None:
    """Let this process end, once its work is done, without its interpreter's teardown: registered
    after torch's import, the hook runs before the exit handlers torch and Triton registered, and
    before the collection of every module's objects. A pool's worker ends after it has sent its
    last result (the pool's queues are written at once), so nothing of it is lost; its ending had
    taken 1.3 s of a warm GPU grade's wall time on an H200's host (2026-12-03), with nothing to show."""
    atexit.register(_exit_now)


def _exit_now() -> None:
    from grader.running import workdirs

    workdirs.wait_for_removals()  # the folders of the assignments it graded (grading.Settings.remove_later)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    os._exit(0)
