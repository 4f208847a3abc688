"""Landlock: the walls of a child that runs without bubblewrap (`grade` where the OS refuses
namespaces, `batch --no-sandbox`).

Landlock is the kernel's unprivileged access control (Linux 5.13 and later): a process restricts
itself, and everything it starts, to an allow-list of paths, and no later call can widen it.
The child's launcher (grader/running/exec_walls.py) applies it after fork and before exec, so the rules
hold from the first instruction of the child's Python, before any student code:
- read (and execute) only what the sandbox would have shown: the system's folders, the Python
  installation, the grader and the assignments, the student's own copy, /proc and /sys;
- write only its own scratch folder and its grading's compilers' cache, and the null-like and
  GPU device nodes; nothing else: not /dev/shm, not /tmp, where other gradings keep their files;
- no TCP connection or listening port (ABI 4), which keeps it off a batch's Dask scheduler;
- no signal to, and no abstract UNIX socket of, a process outside its own domain (ABI 6);
- and, whatever the rules, a process in a Landlock domain cannot ptrace, or read the memory or
  the environment (/proc/PID/mem, /proc/PID/environ) of, a process outside it: its parent, the
  batch, another student's child.
Paths that do not exist are left out; a kernel without Landlock (or a seccomp profile that hides
it) runs the child without these walls, and every report says so (`abi()` is 0).
"""

from __future__ import annotations

import ctypes
import os
import stat

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same number on every architecture
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights, by the ABI that introduced them (include/uapi/linux/landlock.h).
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
# IOCTL_DEV (ABI 5) is left unhandled: CUDA drives the GPU through ioctls on its device nodes.
FS_RIGHTS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1}
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

READ = EXECUTE | READ_FILE | READ_DIR
FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE  # the rights a rule on a non-folder may hold
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip


class _PathBeneath(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is packed: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class LandlockError(OSError):
    """The kernel refused a step of the ruleset: the child must not start without its walls."""


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def abi() -> int:
    """The Landlock ABI version the kernel offers; 0 where it has none (or it is switched off)."""
    libc = _libc()
    version = libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(int(version), 0)


def describe() -> str:
    version = abi()
    if not version:
        return "no Landlock (the kernel offers none): the child can read whatever this user can"
    walls = ["reads only the system, Python, the grader and its own copy", "writes only its scratch and cache folders",
             "cannot reach other processes' memory or environment"]  # fmt: skip
    if version >= 4:
        walls.append("no TCP")
    if version >= 6:
        walls.append("no signals out")
    return f"Landlock ABI {version}: " + ", ".join(walls)


def restrict(readable: list[str], writable: list[str], own_process: str | None = None) -> int:
    """Restrict this process (single-threaded: rules bind the calling thread) and whatever it
    execs or starts to `readable` and `writable` (and the device nodes the child needs); returns
    the ABI used, 0 where the kernel has no Landlock. Raises LandlockError if a step fails.
    `own_process`, the process's own /proc folder, is readable and its files writable: CUDA's
    driver writes there as it starts (on an H200, cudaGetDeviceCount failed with error 304, 'OS
    call failed', until it could); what a process writes of its own /proc reaches no other."""
    version = min(abi(), 7)
    if not version:
        return 0
    libc = _libc()
    fs = FS_RIGHTS.get(version, FS_RIGHTS[3])
    attr = _RulesetAttr(fs, NET_BIND_TCP | NET_CONNECT_TCP if version >= 4 else 0,
                        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0)  # fmt: skip
    ruleset = libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0)
    if ruleset < 0:
        raise LandlockError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for path in readable:
            _allow(libc, ruleset, path, READ, fs)
        for path in writable:
            _allow(libc, ruleset, path, fs, fs)
        for path in [*DEVICES, *_gpu_nodes(), *([own_process] if own_process else [])]:
            _allow(libc, ruleset, path, READ | WRITE_FILE | TRUNCATE, fs)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise LandlockError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) != 0:
            raise LandlockError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return version


def _gpu_nodes() -> list[str]:
    try:
        return sorted(f"/dev/{name}" for name in os.listdir("/dev") if name.startswith("nvidia"))
    except OSError:
        return []


def _allow(libc, ruleset: int, path: str, rights: int, handled: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # not on this machine: nothing to allow
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_ONLY
        rule = _PathBeneath(rights & handled, fd)  # a right the ruleset does not handle is refused
        if libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise LandlockError(ctypes.get_errno(), f"landlock_add_rule({path})")
    finally:
        os.close(fd)
