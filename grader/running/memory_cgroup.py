"""A memory cgroup per child: the kernel counts everything the child holds against its limit.

The parent's watchdog (limits.py) adds up resident memory and the sandbox's tmpfs, and misses
what no process maps and no tmpfs holds: a `memfd_create` file written with os.write, System V
shared memory detached after use, files in the host's /dev/shm. A memory cgroup counts all of
it (anonymous and shared pages, tmpfs and memfd, and on cgroup v2 the kernel's own allocations
for the group): past the limit the kernel reclaims the group's page cache, then its
out-of-memory killer ends a process of the group, and the group's `oom_kill` counter says so.

Each child gets a group of its own, `<base>/kernel-grader/<token>`, limited to the assignment's
`host_memory_gib`, with no swap; the child's launcher (exec_walls.py) joins it before exec, so
the sandbox and every process of the child start inside. The parent reads the counters once the
child has ended, names the limit in the verdict, and removes the group.

Where the groups live, as the machine offers them (`probe()` finds out once per process):
- cgroup v1 (the memory controller mounted on its own, as on hybrid hosts): under this
  process's own memory group, whose limits still bound the children's;
- cgroup v2: beside this process's own group (a v2 group that holds processes cannot have
  children with controllers), in a `kernel-grader` group with the memory controller on;
- neither (not root, no delegated subtree, no memory controller): no group. The child's seccomp
  filter then refuses `memfd_create` and System V shared memory (sandbox.NO_CGROUP_SYSCALLS), and its
  /dev/shm is the sandbox's capped tmpfs, which the watchdog counts (without the sandbox, Landlock
  keeps the child out of the host's /dev/shm).
"""

from __future__ import annotations

import errno
import functools
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

GROUP = "kernel-grader"
REMOVE_TRIES = 50  # a group whose last process is still exiting is busy for a moment


@dataclass(frozen=True)
class Hierarchy:
    version: int  # 1 or 2
    base: Path  # the folder that holds one group per child


@dataclass(frozen=True)
class Usage:
    oom_kills: int
    peak_bytes: int  # the most the group held (v2 without memory.peak: what it held at the end)


def _mounts() -> dict[str, Path]:
    """The mount points of the cgroup v2 hierarchy ("2") and of v1's memory controller ("1")."""
    found: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        if tail[0] == "cgroup2":
            found.setdefault("2", Path(fields[4]))
        elif tail[0] == "cgroup" and "memory" in tail[2].split(","):
            found.setdefault("1", Path(fields[4]))
    return found


def _own(version: int) -> str | None:
    """This process's group in the hierarchy, as /proc/self/cgroup names it."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, path = line.split(":", 2)
        unified = number == "0" and controllers == ""
        if (version == 2 and unified) or (version == 1 and "memory" in controllers.split(",")):
            return path
    return None


def _v1_base(mount: Path) -> Path | None:
    own = _own(1)
    if own is None:
        return None
    base = mount / own.lstrip("/") / GROUP
    base.mkdir(exist_ok=True)
    return base


def _v2_base(mount: Path) -> Path | None:
    own = _own(2)
    if own is None or "memory" not in (mount / "cgroup.controllers").read_text().split():
        return None
    parent = (mount / own.lstrip("/")).parent if own not in ("/", "") else mount
    if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
        (parent / "cgroup.subtree_control").write_text("+memory")
    base = parent / GROUP
    base.mkdir(exist_ok=True)
    if "memory" not in (base / "cgroup.subtree_control").read_text().split():
        (base / "cgroup.subtree_control").write_text("+memory")
    return base


@functools.cache
def hierarchy() -> Hierarchy | str:
    """Where this process can make a memory group per child, or why it cannot (a sentence)."""
    mounts = _mounts()
    attempts = [(2, _v2_base), (1, _v1_base)] if "1" not in mounts else [(1, _v1_base), (2, _v2_base)]
    why = "no memory cgroup is mounted"
    for version, make in attempts:
        if str(version) not in mounts:
            continue
        try:
            base = make(mounts[str(version)])
        except OSError as error:
            why = f"cgroup v{version}: {error.strerror or error} ({error.filename or 'a group'})"
            continue
        if base is None:
            why = f"cgroup v{version} has no memory controller for this process"
            continue
        _remove_stale(base)
        try:
            _try(Hierarchy(version, base))
        except OSError as error:
            why = f"cgroup v{version}: {error.strerror or error} ({error.filename or 'a group'})"
            continue
        return Hierarchy(version, base)
    return why


def _try(found: Hierarchy) -> None:
    """Make a group, limit it and move a process into it, as a child's launch will: a group
    must take both, not merely exist (a delegated or namespaced hierarchy may refuse the move)."""
    group = Group.make(found, 1 << 30)
    waiting = subprocess.Popen([sys.executable, "-I", "-S", "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        group.procs.write_text(str(waiting.pid))
    finally:
        waiting.kill()
        waiting.wait()
        group.remove()


def _remove_stale(base: Path) -> None:
    """Groups left by a grader process that was killed before it could remove them (their
    processes are gone with it): a group is named after the process that made it."""
    for group in base.glob("child-*-*"):
        maker = group.name.split("-")[1]
        if maker.isdigit() and not Path(f"/proc/{maker}").exists():
            Group(Hierarchy(0, base), group, 0).remove()


def describe() -> str:
    found = hierarchy()
    if isinstance(found, Hierarchy):
        return (f"memory: a cgroup v{found.version} group per child, limited to host_memory_gib with no swap "
                "(shared memory, memfd and tmpfs counted)")  # fmt: skip
    return (f"memory: no cgroup ({found}): memfd_create and System V shared memory refused, /dev/shm capped; "
            "the watchdog counts resident memory and the sandbox's tmpfs")  # fmt: skip


@dataclass
class Group:
    """One child's memory group."""

    hierarchy: Hierarchy
    path: Path
    limit_bytes: int

    @classmethod
    def make(cls, hierarchy: Hierarchy, limit_bytes: int) -> Group:
        path = hierarchy.base / f"child-{os.getpid()}-{secrets.token_hex(4)}"
        path.mkdir()
        group = cls(hierarchy, path, limit_bytes)
        try:
            group._limit()
        except OSError:
            group.remove()
            raise
        return group

    def _limit(self) -> None:
        limit = str(self.limit_bytes)
        if self.hierarchy.version == 2:
            (self.path / "memory.max").write_text(limit)
            _write_if_there(self.path / "memory.swap.max", "0")
            _write_if_there(self.path / "memory.oom.group", "1")  # the whole child goes, not one process
            return
        (self.path / "memory.limit_in_bytes").write_text(limit)
        # No swap: with swap accounting the limit covers memory and swap together; without it,
        # the group is told not to swap.
        if not _write_if_there(self.path / "memory.memsw.limit_in_bytes", limit):
            _write_if_there(self.path / "memory.swappiness", "0")

    @property
    def procs(self) -> Path:
        """The file a process writes its id into to join the group."""
        return self.path / "cgroup.procs"

    def usage(self) -> Usage:
        """The out-of-memory kills and the most the group held; zeros where a file is unreadable."""
        if self.hierarchy.version == 2:
            kills = _counter(self.path / "memory.events", "oom_kill")
            peak = _number(self.path / "memory.peak") or _number(self.path / "memory.current")
        else:
            kills = _counter(self.path / "memory.oom_control", "oom_kill")
            peak = _number(self.path / "memory.max_usage_in_bytes")
        return Usage(kills, peak)

    def verdict(self) -> tuple[str, str] | None:
        """(reason, message) where the kernel's out-of-memory killer ended a process of the group."""
        usage = self.usage()
        if not usage.oom_kills:
            return None
        return "out_of_memory", (f"its processes held {usage.peak_bytes / 2**30:.2f} GiB of host memory, the "
                                 f"assignment's limit of {self.limit_bytes / 2**30:g} GiB (host_memory_gib), which "
                                 "counts shared memory, memfd and tmpfs too: the kernel's out-of-memory killer "
                                 "ended it")  # fmt: skip

    def remove(self) -> None:
        """Remove the group once its processes are gone (the caller has reaped them)."""
        for _ in range(REMOVE_TRIES):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as error:
                if error.errno != errno.EBUSY:
                    return
                time.sleep(0.02)


def _write_if_there(path: Path, text: str) -> bool:
    try:
        path.write_text(text)
        return True
    except OSError:
        return False


def _number(path: Path) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _counter(path: Path, name: str) -> int:
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def group_for(limit_bytes: int) -> Group | None:
    """A fresh group for one child, or None where this machine offers none (see `describe`)."""
    found = hierarchy()
    if not isinstance(found, Hierarchy):
        return None
    try:
        return Group.make(found, limit_bytes)
    except OSError:
        return None
