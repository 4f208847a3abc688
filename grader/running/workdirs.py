"""A grading's scratch folder, and the folders of gradings that died without removing theirs.

A grading copies the submission, its compiled kernels and every case's outputs (gigabytes for
the large cases) into a folder under the system's temporary directory, and removes it as it
ends. A grading that was killed cannot: kill -9, the kernel's OOM killer, a Dask worker ended by
its nanny when a TA's Ctrl-C stops a batch. So each folder carries a lock its grading holds for
as long as it lives (`flock`: the kernel lets go of it when the process dies, however it dies),
and each new grading removes the folders whose lock nobody holds.

A grading's results do not wait for its folder to go: `remove(later=True)` deletes it on a thread
of its own (the largest assignments' took 0.35 s and 0.6 s after the last judging of a warm GPU
grade, on an H200), holding the lock until it is gone; `wait_for_removals` joins them, and every
way out of a grading process that skips the interpreter's end (os._exit) calls it first. A process
killed meanwhile leaves a folder whose lock nobody holds: the next grading's sweep removes it.

Why a lock and not the owner's PID: a PID may be reused by an unrelated process, and a grader
in a container that shares the temporary directory sees other PIDs, or none.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Callable

PREFIX = "grade-"
LOCK = ".held"  # the lock file inside each folder
_removals: list[threading.Thread] = []  # folders being removed on threads of their own (`remove(later=True)`)


class Workdir:
    """A grading's folder, held while the object lives; `remove` lets go of it and deletes it."""

    def __init__(self, name: str):
        sweep()  # each grading's start: a batch's workers and the service live through many
        self.path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{name}-"))
        # Locked before it bears its name: a sweep that opens the lock file finds it held already.
        partial = self.path / f"{LOCK}.new"
        self._held = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._held, fcntl.LOCK_EX)
        partial.rename(self.path / LOCK)

    def remove(self, later: bool = False, then: Callable[[], None] = lambda: None) -> None:
        """Delete the folder, and then call `then`: now, or on a thread of its own (`later`)."""
        if not later:
            self._remove(then)
            return
        # Not a daemon: an interpreter that ends normally waits for it too.
        thread = threading.Thread(target=self._remove, args=(then,), name=f"remove {self.path.name}")
        thread.start()
        _removals[:] = [t for t in _removals if t.is_alive()] + [thread]

    def _remove(self, then: Callable[[], None]) -> None:
        try:
            shutil.rmtree(self.path, ignore_errors=True)
            then()
        finally:
            os.close(self._held)


def wait_for_removals() -> None:
    """Every folder that `remove(later=True)` began to remove is gone."""
    while _removals:
        _removals.pop().join()


def sweep(root: Path | None = None) -> list[Path]:
    """Remove the grading folders under `root` (the temporary directory) whose lock nobody holds;
    returns them. A folder without a lock is left alone: one being made, or not a grading's."""
    root = Path(root or tempfile.gettempdir())
    removed = []
    try:
        candidates = [p for p in root.iterdir() if p.name.startswith(PREFIX)]
    except OSError:
        return removed
    for folder in candidates:
        try:
            if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
                continue
            held = os.open(folder / LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(held)  # its grading lives
            continue
        try:
            shutil.rmtree(folder, ignore_errors=True)  # locked by this process meanwhile: no other sweep races it
            removed.append(folder)
        finally:
            os.close(held)
    return removed
