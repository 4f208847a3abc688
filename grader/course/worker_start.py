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
    """Run on each worker (`Client.run`) by a batch stopped by a Ctrl-C, before it closes the
    cluster: a worker busy grading would log the scheduler's going as an error."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL)
