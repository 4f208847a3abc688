"""The harness's marks for the grader's witness (grader/witness), around every call of student code.

Where the witness records this process (the parent loaded it into CUDA at start: the library
named by CUDA_INJECTION64_PATH), the harness marks each call on the GPU's current stream: a
memset of one of ROLES's values before it, of CLOSE after it, each of MARK_BASE + n bytes into a
buffer of its own for the call's number n. The witness sees the two memsets, with their GPU and
host times, and everything the call started in between; the parent reads those windows
(witness/windows.py). The memsets go through the driver's own entry (cuMemsetD8Async), held
here since before any student code ran, and take about a microsecond of the GPU each.

At the end of every task the harness asks the witness to flush (`flush`), so the parent finds
each task's records before the line that ends it. Where no witness records the process (the CPU
tier, or a GPU machine without CUPTI), every method does nothing and costs nothing.
"""

from __future__ import annotations

import ctypes
import os
from contextlib import contextmanager

from grader.witness.windows import CLOSE, MARK_BASE, ROLES

OPEN = {role: value for value, role in ROLES.items()}
MAX_WINDOWS = 1 << 20


class Marks:
    def __init__(self, library: str):
        import torch

        self._torch = torch
        self._buffer = torch.empty(MARK_BASE + MAX_WINDOWS, dtype=torch.uint8, device="cuda")
        self._address = self._buffer.data_ptr()
        driver = ctypes.CDLL("libcuda.so.1")
        self._memset = driver.cuMemsetD8Async
        self._memset.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, ctypes.c_void_p]
        witness = ctypes.CDLL(library)
        self._flush = witness.witness_flush
        self._started = witness.witness_started
        self._current_stream = torch.cuda.current_stream
        self.count = 0
        self.last = 0  # the number of the window opened last
        self.taken: list[int] = []  # the student's windows (calls, imports) opened since the last `take`

    @property
    def recording(self) -> bool:
        return bool(self._started())

    def _mark(self, value: int, number: int) -> None:
        stream = ctypes.c_void_p(self._current_stream().cuda_stream)
        if self._memset(self._address, value, MARK_BASE + number, stream) != 0:
            raise RuntimeError("the grader could not mark a call for its witness (cuMemsetD8Async failed)")

    @contextmanager
    def window(self, role: str = "student"):
        """Marks around one call: what it starts in between is the call's, on any stream or thread."""
        self.count += 1
        number = self.count
        if number >= MAX_WINDOWS:
            raise RuntimeError("more calls than the grader's witness can mark in one process")
        self.last = number
        if role in ("student", "import"):
            self.taken.append(number)
        self._mark(OPEN[role], number)
        try:
            yield number
        finally:
            self._mark(CLOSE, number)

    def take(self) -> list[int]:
        taken, self.taken = self.taken, []
        return taken

    def flush(self) -> None:
        """Every record so far reaches the parent before the next line the harness sends: a task's
        records before its report. The GPU is idle first, so every kernel's record is complete."""
        self._torch.cuda.synchronize()
        if self._flush() != 0:
            raise RuntimeError("the grader's witness could not flush its records")


class NoMarks:
    """No witness records this process: nothing to mark."""

    recording = False
    last = 0

    @contextmanager
    def window(self, role: str = "student"):
        yield 0

    def take(self) -> list[int]:
        return []

    def flush(self) -> None:
        pass


_current: Marks | NoMarks = NoMarks()  # this process's marks: set once, before any student code runs


def install(device: str) -> Marks | NoMarks:
    """This process's marks, real where the parent loaded the witness and it started. Called by the
    harness before its snapshot (snapshot.py): a submission that rebinds `_current` is named."""
    global _current
    library = os.environ.get("CUDA_INJECTION64_PATH", "")
    if device == "cuda" and library:
        found = Marks(library)
        _current = found if found.recording else NoMarks()
    return _current


def current() -> Marks | NoMarks:
    return _current
