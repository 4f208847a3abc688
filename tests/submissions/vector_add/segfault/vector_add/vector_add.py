# Hostile: the call dereferences a null pointer, killing the process with SIGSEGV.
import ctypes


def add(x, y):
    return ctypes.string_at(0)
