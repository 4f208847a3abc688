"""Host memory and process-count limits on a child, enforced from the parent.

The parent polls every process of the child (its session, and its PID namespace where the
sandbox made one) and kills them all when there are more of them than `max_processes`, or when
their resident memory together passes the assignment's `host_memory_gib`. Resident memory is
RSS, read without locks from /proc/<pid>/stat: a page shared by several processes counts in
each (PSS would split it, but reading it locks the address space of a process that may be
forking as fast as it can, which stalled the watchdog for seconds).

Why not rlimits: RLIMIT_AS breaks CUDA, which reserves terabytes of virtual addresses at start;
RLIMIT_DATA counts those private mappings too on recent kernels, and cannot be checked without a
GPU. RLIMIT_NPROC is never enforced for root (user id 0, also when mapped into a user
namespace), and graders often run as root in a container; for other users it counts every
process of that user on the machine, unless the child has a user namespace of its own (Linux
5.14 and later count per namespace). A watchdog works the same way everywhere and names the
limit in the verdict. Its price is latency: a poll every POLL_S, so a fast allocation overshoots
by what it can touch in that time. What no RSS shows (a memfd, shared memory) the child's memory
cgroup counts, where the machine offers one (memory_cgroup.py).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

POLL_S = 0.05
DISK_EVERY = 20  # polls between two walks of a folder on disk (once a second)
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Limits:
    host_memory_bytes: int
    max_processes: int


def _stat(pid: str) -> tuple[int, int, int] | None:
    """(parent id, session id, resident bytes) of a live process, or None if it is gone, a zombie
    waiting to be reaped, or not ours to read. Reading it takes no lock that the process holds."""
    try:  # os.open, not open(): the watchdog reads every process's stat 20 times a second, and a
        # buffered file object per read took half its time (a poll of 70 processes: 3 ms, now 1.7 ms)
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        try:
            fields = os.read(fd, 4096).rsplit(b")", 1)[1].split()
        finally:
            os.close(fd)
    except OSError:
        return None
    if fields[0] == b"Z":
        return None
    return int(fields[1]), int(fields[3]), int(fields[21]) * PAGE  # fields after the command name: state is [0]


def _scratch_bytes(pid: int) -> int:
    """The bytes held in the sandbox's private tmpfs (its /tmp and /dev/shm), seen through the
    process's own root: tmpfs pages are memory that no process's RSS counts."""
    used = 0
    for mount in ("tmp", "dev/shm"):
        try:  # the process may exit between any two looks: then it holds nothing
            stat = os.statvfs(f"/proc/{pid}/root/{mount}")
            own = os.stat(f"/proc/{pid}/root/{mount}").st_dev != os.stat(f"/{mount}").st_dev  # not the host's
        except OSError:
            continue
        if own:
            used += (stat.f_blocks - stat.f_bfree) * stat.f_frsize
    return used


def folder_bytes(folder: Path) -> int:
    """The bytes of the files under `folder` (links not followed); files that vanish while it
    looks count nothing."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def _descends(pid: int, ancestor: int, stats: dict) -> bool:
    for _ in range(64):
        parent = stats.get(pid, (0,))[0]
        if parent == ancestor:
            return True
        if parent <= 1 or parent not in stats:
            return False
        pid = parent
    return False


def _namespace(pid: int | str, link: str = "pid") -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{link}")
    except OSError:
        return None


class Watchdog(threading.Thread):
    """Watches the processes of one child (`leader`, a session leader) until stopped."""

    def __init__(self, leader: int, limits: Limits, known: set[int] | None = None,
                 disk: tuple[Path, int] | None = None, siblings: set[int] | None = None):  # fmt: skip
        super().__init__(daemon=True, name=f"limits-{leader}")
        self.leader, self.limits = leader, limits
        self.disk = disk  # a folder on the host's disk that the child may write, and its limit in bytes
        self.polls = 0
        # Processes reparented to this one (the grader is a subreaper) that were not its children
        # before the child started: daemons the child left behind, whatever session they made.
        # `siblings`, the live set of children this process started, are never among them: a child
        # started while this one waits for its job (grading.AssignmentGrading.spawn_timer) is not its.
        self.known, self.siblings = known, siblings if siblings is not None else set()
        self.own_namespace = _namespace("self")
        self.namespace: str | None = None  # the child's PID namespace, once it has made one
        self.verdict: tuple[str, str] | None = None  # (reason, message) when a limit was hit
        self.peak_bytes, self.peak_processes = 0, 0
        self.stopped = threading.Event()
        # Processes known not to descend from this one, by pid and the inode of their /proc entry (a
        # pid used again is another inode): no member ever does, so their stat is read only once.
        self._outsiders: dict[int, int] = {}
        self._looking = threading.Lock()  # the watch and a kill_all from another thread

    def members(self) -> dict[int, int]:
        """Every live process of the child, with its resident bytes: its session, its PID
        namespace, its descendants, and orphans it left that were reparented here."""
        made = _namespace(self.leader, "pid_for_children")
        if made and made != self.own_namespace:
            self.namespace = made
        with self._looking:
            return self._members()

    def _members(self) -> dict[int, int]:
        """Every member descends from this process: the leader is its child, and the orphans of its
        descendants are reparented to it (a subreaper) or to their PID namespace's init, one of them.
        So a process seen not to descend from it (`_outside`) never becomes a member, and only the
        others' stat is read again: a poll read every process of the machine's (70 on an idle
        2-core machine, hundreds beside a batch), now about ten. The rules are those of a full look."""
        seen = {int(entry.name): entry.inode() for entry in os.scandir("/proc") if entry.name.isdigit()}
        self._outsiders = {pid: inode for pid, inode in self._outsiders.items() if seen.get(pid) == inode}
        stats = {pid: s for pid, inode in seen.items() if self._outsiders.get(pid) != inode and (s := _stat(str(pid)))}
        me = os.getpid()
        found = {}
        for pid, (parent, session, resident) in stats.items():
            mine = session == self.leader or pid == self.leader or _descends(pid, self.leader, stats)
            adopted = (self.known is not None and parent == me and pid not in self.known and pid != self.leader
                       and pid not in self.siblings)  # fmt: skip
            if mine or adopted or (self.namespace is not None and _namespace(pid) == self.namespace):
                found[pid] = resident
            elif self._outside(pid, stats, me):
                self._outsiders[pid] = seen[pid]
        return found

    def _outside(self, pid: int, stats: dict, me: int) -> bool:
        """Whether `pid`'s line of parents, read in this look, reaches the top (0) or a process known
        to be outside without passing through this process. A line broken by a process that ended
        meanwhile says nothing: that process is looked at again next time."""
        for _ in range(64):
            parent = stats[pid][0]
            if parent == me:
                return False
            if parent == 0 or parent in self._outsiders:
                return True
            if parent not in stats:
                return False
            pid = parent
        return False

    def over_limit(self) -> tuple[str, str] | None:
        members = self.members()
        self.peak_processes = max(self.peak_processes, len(members))
        if len(members) > self.limits.max_processes:  # first: a fork bomb's children share their pages
            return "crash", (f"it ran {len(members)} processes at once, over the assignment's limit of "
                             f"{self.limits.max_processes} (max_processes): a fork bomb?")  # fmt: skip
        used = sum(members.values()) + max((_scratch_bytes(pid) for pid in members), default=0)
        self.peak_bytes = max(self.peak_bytes, used)
        if used > self.limits.host_memory_bytes:
            limit = self.limits.host_memory_bytes / 2**30
            return "out_of_memory", (f"its processes held {used / 2**30:.2f} GiB of host memory, over the "
                                     f"assignment's limit of {limit:g} GiB (host_memory_gib)")  # fmt: skip
        self.polls += 1
        if self.disk and self.polls % DISK_EVERY == 0:
            folder, limit = self.disk
            written = folder_bytes(folder)
            if written > limit:
                return "out_of_memory", (f"its compiled kernels took {written / 2**30:.2f} GiB of disk, over the "
                                         f"assignment's limit of {limit / 2**30:g} GiB (scratch_gib)")  # fmt: skip
        return None

    def run(self) -> None:
        while not self.stopped.wait(POLL_S):
            try:
                self.verdict = self.over_limit()
            except OSError:
                # /proc changes under every look (processes come and go, as a student's short-lived
                # ones can be made to): a failed look is retried, never the end of the watch.
                continue
            if self.verdict:
                self.kill_all()
                return

    def kill_all(self) -> None:
        """SIGKILL for every process of the child, until none is left (a fork bomb keeps forking
        between one look and the next)."""
        for _ in range(200):
            members = self.members()
            if not members:
                return
            if self.leader in members:  # not yet reaped: its group id is still its own
                os.killpg(self.leader, signal.SIGKILL)
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.005)

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)
