import threading

_lock = threading.Lock()


def add(x, y):
    with _lock:
        with _lock:  # not reentrant: waits for itself forever
            return x + y
