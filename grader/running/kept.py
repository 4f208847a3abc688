"""A value worked out once per machine and kept in a file under the grader's cache folder.

The first process that needs it works it out and writes it; the others (a batch's other workers,
which wait at the lock for that file rather than each work it out, or the next `make grade`) read
it. Each file is named by what the value depends on, so a change to any of that starts another
file, and the older ones of the same group are removed then. The files are the TA's, out of every
sandbox's sight (where the OS refuses the sandbox, a child could rewrite them, as it could every
other file of the TA's): `read` checks what a file holds all the same, and a folder or file that
cannot be made or read costs only the work.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")


def kept(path: Path, group: str, read: Callable[[Path], T | None], work_out: Callable[[], T],
         text: Callable[[T], str]) -> T:  # fmt: skip
    """The value kept in `path` (a file named `<group>-<what it depends on><suffix>`), as `read`
    gives it (None: no file, or not one this grader wrote); else `work_out()`, written there as
    `text` gives it."""
    root = path.parent
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = os.open(root / f"{group}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one process works it out, the others wait and read
            value = read(path)
            if value is None:
                value = work_out()
                partial = path.with_suffix(f".{os.getpid()}.partial")
                partial.write_text(text(value))
                partial.replace(path)
                for stale in root.glob(f"{group}-*{path.suffix}"):  # of what it no longer depends on
                    if stale != path:
                        stale.unlink(missing_ok=True)
        finally:
            os.close(lock)  # closing releases it
    except OSError:
        value = work_out()
    return value
