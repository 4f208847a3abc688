"""Files that C++ writes, where CPython raises no `open` audit event: a gate raises one first.

The guard (guard.py) refuses student code a file written through Python (`open` for writing,
os.rename, os.mkdir...) with a PermissionError that says why. Some writers open their file in C++
and raise no audit event: torch.save's zip writer (torch._C.PyTorchFileWriter), torch.from_file
with shared=True (a writable mapping of the file, created if missing), a TorchScript module's save,
c10d's FileStore, os.mkfifo and os.mknod. A submission planted a file in the persistent compile
cache with torch.save and torch.from_file. Each writer is taken away before student code runs
(switches.take_away, the keeper of the profiler's switches) and a gate stands in for it: the gate
raises `open` for the file it would write, which the guard judges as any other write (student code
is refused, the library and the harness are not), then asks the guard's hook for the writer, which
only the hook holds. A writer given a Python stream (torch.save into io.BytesIO) writes through
that stream, whose file, if any, was opened through Python: no event is raised for it here.

What stays: anything that writes a file from C++ through a function not named here (a native
extension's own), against which the compile cache mounted read-only for student code is the wall.
"""

from __future__ import annotations

import os
import sys

from grader.child.guard import KEPT_EVENT

# Writers by owner: functions of modules, methods of classes (a class that writes, by its
# __init__: the class itself stays reachable, from its subclasses' bases). Every holder of each is
# given the gate, torch._C's types that Python calls immutable included (switches._set_on_type).
WRITER_GATES = {
    "torch._C": ("_save_jit_module", "_save_mobile_module"),
    "torch": ("from_file",),
    "torch._C.StorageBase": ("from_file",),
    "torch._C.PyTorchFileWriter": ("__init__",),
    "torch._C.ScriptModule": ("save", "_save_for_mobile"),
    "torch._C._distributed_c10d.FileStore": ("__init__",),
    "os": ("mkfifo", "mknod"),
}  # fmt: skip
SHARED_ONLY = ("from_file",)  # writes only with shared=True (after the file name): otherwise a private copy
_FLAGS = os.O_WRONLY | os.O_CREAT
_audit = sys.audit


def gate(name: str):
    """A function to stand in for the writer `name`, holding no reference to it."""

    def writer_gate(*args, **kwargs):
        path = written(name, args, kwargs)
        if path is not None:
            _audit("open", path, "w", _FLAGS)  # the guard refuses it to student code, as any write
        box = []
        _audit(KEPT_EVENT, name, args, box)
        if not box:
            raise PermissionError(f"the grader refuses {name} in graded code")
        return box[0](*args, **kwargs)

    writer_gate.__name__ = writer_gate.__qualname__ = name.rpartition(".")[2]
    return writer_gate


def written(name: str, args: tuple, kwargs: dict) -> str | None:
    """The file a call of the writer `name` would write: its first argument naming a file (a method's
    first is its object), or None (a stream, or a mapping that is not shared)."""
    values = (*args, *kwargs.values())
    at = next((i for i, value in enumerate(values) if isinstance(value, (str, bytes, os.PathLike))), None)
    if at is None:
        return None
    if name.rpartition(".")[2] in SHARED_ONLY:
        shared = args[at + 1] if at + 1 < len(args) else kwargs.get("shared")
        if not shared:
            return None
    path = os.fspath(values[at])
    return path if isinstance(path, str) else os.fsdecode(path)
