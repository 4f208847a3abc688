# Hostile: the call ends the process without a word (no exception, no cleanup).
import os


def add(x, y):
    os._exit(0)
