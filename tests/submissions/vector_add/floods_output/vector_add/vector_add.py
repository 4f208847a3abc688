# Hostile: prints 10 MB to stdout and to stderr at import and in every call, and never does the work.
import sys

LINE = "debug: " + "x" * 1017 + "\n"  # 1 KiB a line


def _flood(megabytes: int = 10) -> None:
    for stream in (sys.stdout, sys.stderr):
        stream.write(LINE * (1024 * megabytes))
        stream.flush()


_flood()


def add(x, y):
    _flood()
    raise NotImplementedError
