# Hostile: hunts for the harness's key and job through frames, gc and /proc, then raises with what it found.
import gc
import sys


def add(x, y):
    found = []
    for attempt in (lambda: sys._getframe(1).f_locals, lambda: len(gc.get_objects()),
                    lambda: open("/proc/self/environ").read()[:100]):
        try:
            found.append(repr(attempt())[:80])
        except Exception as error:  # refused: keep looking
            found.append(f"{type(error).__name__}")
    raise RuntimeError(f"found: {found}")
