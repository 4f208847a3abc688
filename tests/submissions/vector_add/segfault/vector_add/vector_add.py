# Hostile: the call kills its own process with SIGSEGV (a null-pointer dereference in C).
import faulthandler


def add(x, y):
    faulthandler._sigsegv()
