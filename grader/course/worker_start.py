"""What each local Dask worker process of a batch does as it starts (Nanny's `preload`), and as
a batch stopped by a Ctrl-C closes it.

A TA's Ctrl-C reaches every process of the terminal's group: the batch and its workers. The batch
takes it, says which grades are kept, and ends the workers as it closes its cluster; a worker
that took it too printed a traceback of its own (two screens of asyncio for two workers) over the
batch's words. So a worker ignores it. The grading children are in sessions of their own and
never see a terminal's Ctrl-C.
"""

import logging
import signal
import threading


def dask_setup(worker) -> None:
    """Called in the worker process as it starts (Dask's preload protocol)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def quiet() -> None:
    """Run on each worker (`Client.run`), and in the batch itself, by a batch stopped by a Ctrl-C
    before it closes the cluster: a worker busy grading would log the scheduler's going as an
    error, and the batch's client a result it was still fetching from a worker that went first
    (tornado logs that one, an asyncio callback's error). Dask gives some of its loggers levels
    of their own, so the process's logging is turned down as a whole: nothing it logs matters
    once the batch has said what it kept."""
    logging.disable(logging.ERROR)
