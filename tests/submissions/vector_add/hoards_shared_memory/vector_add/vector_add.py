# Hostile: holds host memory that no process maps (a memfd_create file filled with os.write), past the assignment's limit.
import os
import time
from pathlib import Path

CHUNK = 64 << 20


def _goal_gib() -> float:
    """Past vector_add's host_memory_gib (6), or the amount a test names beside this file."""
    named = Path(__file__).with_name("hoard_gib.txt")
    return float(named.read_text()) if named.is_file() else 6.5


def add(x, y):
    fd = os.memfd_create("hoard")  # an anonymous file: its pages are in no RSS and in no tmpfs
    chunk, held = b"\xff" * CHUNK, 0
    while held < _goal_gib() * 2**30:
        os.write(fd, chunk)
        held += CHUNK
    time.sleep(5)
    raise RuntimeError(f"held {held / 2**30:.1f} GiB in a memfd for 5 s: nothing stopped it")
