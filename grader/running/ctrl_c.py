"""A Ctrl-C held while the grader does what cannot be broken off cleanly, and taken after it.

Python raises KeyboardInterrupt wherever the signal lands. Landing inside numpy's or torch's start,
it was dropped (the command then graded on: 7 of 100 `--help` runs interrupted 0.15-1.1 s in
exited 0), left numpy half loaded, or aborted torch; landing inside a Dask cluster's start, it left
a half-started cluster that nobody closed. Inside `held()` the first Ctrl-C is noted and raised as
KeyboardInterrupt when the block ends (an error the block ends with after it is taken as the
Ctrl-C's: a cluster's workers, starting, take it too); a second is raised at once. A Ctrl-C
ignored at the start (a background job's) stays ignored, and off the main thread nothing changes.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def held() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    taken: list[int] = []

    def hold(signum, frame):
        taken.append(signum)
        if len(taken) > 1:
            raise KeyboardInterrupt

    before = signal.getsignal(signal.SIGINT)
    if before is not signal.default_int_handler:
        yield  # ignored, or handled by someone else: left as it is
        return
    signal.signal(signal.SIGINT, hold)
    try:
        yield
    except Exception as error:
        if taken:  # what failed after the Ctrl-C failed for it (a cluster's workers took it too)
            raise KeyboardInterrupt from error
        raise
    finally:
        signal.signal(signal.SIGINT, before)
    if taken:
        raise KeyboardInterrupt
