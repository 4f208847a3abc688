# Hostile: leaves a daemon behind (double fork, a new session) that wakes up after the grading.
import os
import time


def add(x, y):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(30)  # long after the grading: by then it should be dead
        os._exit(0)
    raise NotImplementedError
