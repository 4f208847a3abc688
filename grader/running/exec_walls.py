"""The walls a child gets before its first instruction: run between the parent's fork and the exec
of the child (or of bubblewrap), as `python -I -S exec_walls.py SPEC -- COMMAND...`.

In order, each step one the next cannot undo:
1. join the child's memory cgroup (memory_cgroup.py), so every process the child or the sandbox
   starts is counted in it; and, for a child that compiles beside other gradings' timed phases
   (a correctness child on the GPU tier), lower its priority (`niceness`), which neither it nor
   any process it starts can raise again;
2. without the sandbox only: Landlock (landlock.py) confines what the child reads, writes and
   reaches; the child's own /proc folder stays open to it through a descriptor it inherits, and
   no other process's;
3. without the sandbox only: the seccomp filter the sandbox would have loaded (sandbox.py),
   loaded here, since there is no bubblewrap to load it;
4. exec COMMAND. Nothing here is left in the process: the kernel keeps the walls across exec.

A step that fails ends the launch (exit status LAUNCH_FAILED, the reason on stderr): a child
never runs with fewer walls than the parent's report says it has. This file imports nothing of
the grader but landlock.py, so the launch costs one bare interpreter's start (about 20 ms).
"""

from __future__ import annotations

import json
import os
import sys

LAUNCH_FAILED = 125
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
# Global /proc files the child's libraries read (CPU and memory sizes, the GPU driver's
# parameters, kernel settings); every other process's folder stays out of its reach.
PROC_SHARED = ("cpuinfo", "meminfo", "stat", "version", "filesystems", "devices", "modules", "loadavg", "uptime",
               "sys", "driver", "cgroups", "swaps", "vmstat", "zoneinfo", "pressure")  # fmt: skip


class Walls:
    """What the launcher does before exec; every part optional. (A plain class: the launcher's
    own start imports no more than it needs.)"""

    def __init__(self, cgroup_procs: str | None = None, readable: list[str] | None = None,
                 writable: list[str] | None = None, seccomp_fd: int | None = None, niceness: int = 0):  # fmt: skip
        self.cgroup_procs = cgroup_procs  # the memory group's cgroup.procs file
        self.niceness = niceness  # added to the child's nice value (0: left as it is)
        self.readable = readable or []  # Landlock, where not empty
        self.writable = writable or []
        self.seccomp_fd = seccomp_fd  # a BPF program to load here (no sandbox to load it)

    def command(self, argv: list[str]) -> list[str]:
        """`argv`, launched through this file; unchanged where there is nothing to do."""
        if not (self.cgroup_procs or self.readable or self.seccomp_fd is not None or self.niceness):
            return argv
        return [sys.executable, "-I", "-S", os.path.realpath(__file__), json.dumps(vars(self)), "--", *argv]


def _join(procs: str) -> None:
    with open(procs, "w") as file:
        file.write(str(os.getpid()))


def _own_proc() -> list[str]:
    """This process's /proc folder (first), held open (and inherited across exec) so that the folder
    the rule names is the one every later look finds, and the shared /proc files."""
    held = os.open(f"/proc/{os.getpid()}", os.O_PATH | os.O_DIRECTORY)
    os.set_inheritable(held, True)
    return [f"/proc/{os.getpid()}", *(f"/proc/{name}" for name in PROC_SHARED)]


def _load_seccomp(fd: int) -> None:
    import ctypes  # here: a launch that only joins a cgroup does without it

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    program = os.read(fd, 1 << 20)
    os.close(fd)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))  # 8 bytes per BPF instruction
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER,
                                                                      ctypes.byref(fprog), 0, 0) != 0:  # fmt: skip
        raise OSError(ctypes.get_errno(), "loading the seccomp filter")


def main(spec: str, argv: list[str]) -> None:
    walls = Walls(**json.loads(spec))
    try:
        if walls.cgroup_procs:
            _join(walls.cgroup_procs)
        if walls.niceness:
            os.nice(walls.niceness)
        if walls.readable:
            sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))))
            from grader.running import landlock

            own, *shared = _own_proc()
            landlock.restrict([*walls.readable, *shared], walls.writable, own)
        if walls.seccomp_fd is not None:
            _load_seccomp(walls.seccomp_fd)
        os.execv(argv[0], argv)
    except OSError as error:
        print(f"grader: the child's walls could not be put up: {error}", file=sys.stderr)
        os._exit(LAUNCH_FAILED)


if __name__ == "__main__":
    split = sys.argv.index("--")
    main(sys.argv[1], sys.argv[split + 1 :])
