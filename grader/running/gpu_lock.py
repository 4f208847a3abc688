"""Workers that share a GPU: their correctness runs overlap, a timed phase has the GPU to itself.

Building, compiling and checking a student's cases is mostly CPU work, so several gradings can
share one GPU; a timed phase cannot share it with anyone, or another student's kernels would run
inside its timings. Per GPU, a reader-writer lock held by the grading process (the parent, never
the child, which cannot reach it: the sandbox's /tmp is its own): a correctness phase holds it
shared (and so does the parent's judging, whose float64 references run on the GPU), a timing
phase exclusively until its last benchmark is timed, and then shared while its outputs cross
and its child ends (`Timed.share`; no other timed phase starts before that, since student code
ran in that child; the judging of those outputs comes after). Each phase holds it from the
moment its first child is up and waiting at its gate (isolation.run_child) to the phase's end,
so that starting a child (the sandbox, torch, a CUDA context: about 5 s on an H100) overlaps
other students' phases. It favours the timing phase: one that waits holds a turnstile that
every new correctness phase must pass, so a stream of correctness runs cannot starve it; every
one that waits is in a queue, which a new correctness phase lets go first as a whole (between
two timed phases the GPU goes to the next one, not to a correctness run that would hold it
until its cases end; `timing_waits`). A correctness phase under way runs its cases to the end:
ending its child early would change what its student's code finds in its process
(grading.AssignmentGrading.gpu). The grader's own short
holds that bring a student to the queue (judging the cases, a child's start of CUDA) do not
wait at the turnstile (`beside`), though never during a timed phase.

The lock is three files locked with flock(2) in one folder per machine, which every grading on
it uses whoever started it: `make grade` in two terminals, two students on one node, a batch
beside a student (on an H200, four gradings that each held a lock of their own cost honest
solutions points: another's kernels ran inside their timed calls). By default the folder is
DEFAULT_FOLDER, made sticky and writable by every user like /tmp itself, its files readable by
all (flock needs no more than a descriptor open for reading); GRADER_GPU_LOCKS names another (a
cluster's workers of one node, say). A folder another user made unusable is passed over for one
of this user's own, and every report says that other users' gradings are not kept out then. The
kernel makes the processes agree, and a grading that dies releases what it held. The GPU is
named by its UUID, so that two processes that number it differently (CUDA_VISIBLE_DEVICES)
still share its lock. A user who holds the lock forever keeps every other grading off the GPU:
only detected (the hold log names who waits), not prevented.

An autotuner times its candidates too: a correctness child's picks are timed beside other
students' work, so a timing child does not reuse them. It tunes in its warm-up calls, with the GPU
to itself, and keeps those picks apart (child/timed_picks.py), for the next grading of the same
files. Reusing a correctness run's picks, an autotuned vector addition's bfloat16 ratio fell from
1.00 to 0.71 in a class of 20 with eight workers on an H200 (tools/batch_parity.py, 2026-11-26);
tuning afresh in every grading, the solution's causal FlashAttention backward moved by 2.3%
between a cold and a warm grading of the same files on an H100, where the autotuner picked other
tiles in each (tools/warm_parity.py, 2026-11-26).
"""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Callable, Iterator

ENVIRONMENT = "GRADER_GPU_LOCKS"  # the folder of the locks, where not the default (never in a child's environment)
DEFAULT_FOLDER = Path(tempfile.gettempdir()) / "kernel-grader-gpu-locks"
# Where a worker appends one line per hold, to see where a shared GPU's time went (optional):
# "exclusive|shared <asked> <got> <released>" in seconds since the epoch, the process id, and the hold's label;
# and "mark" lines, a grading's moments between its holds (`note`).
LOG_ENVIRONMENT = "GRADER_GPU_LOCK_LOG"


class GpuLock:
    def __init__(self, folder: Path, gpu: str):
        folder.mkdir(parents=True, exist_ok=True)
        name = "".join(c if c.isalnum() or c in "-_" else "_" for c in gpu) or "default"
        self.turnstile, self.gpu = folder / f"gpu-{name}.turnstile", folder / f"gpu-{name}.lock"
        self.queue = folder / f"gpu-{name}.queue"  # held shared by every timed phase that waits

    @classmethod
    def for_this_gpu(cls) -> GpuLock:
        """The lock of the GPU this process sees first, in the machine's folder (`machine_folder`)."""
        return cls(machine_folder()[0], gpu_identity())

    @contextmanager
    def shared(self, label: str = "", defer: bool = True) -> Iterator[float]:
        """A correctness phase: beside other correctness phases, never during a timed one. Gives
        the seconds it waited. It passes the turnstile behind a timed phase that holds it, and,
        where it `defer`s, only once no other timed phase is queued either: between two timed
        phases the GPU goes to the next one, not to a correctness run that would hold it until
        its cases end (a timed phase's own start of CUDA, short and running no student code,
        does not defer)."""
        started = time.monotonic()
        with _logged("shared", label) as got, ExitStack() as held:
            while True:
                with _locked(self.turnstile, fcntl.LOCK_EX):
                    if not defer or not self.timing_waits():
                        # Inside the turnstile no exclusive hold can exist (it keeps the turnstile
                        # until it turns shared), so this never blocks.
                        held.enter_context(_locked(self.gpu, fcntl.LOCK_SH))
                        break
                with _locked(self.queue, fcntl.LOCK_EX):
                    pass  # until every queued timed phase has had the GPU
            got()
            yield time.monotonic() - started

    @contextmanager
    def beside(self, label: str = "") -> Iterator[float]:
        """The grader's own short work on the GPU, no student code in it (the parent's judging of a
        student's cases, a child's start of CUDA): never during a timed phase, but not behind
        one that waits either. It takes the GPU's lock shared without the turnstile, as flock grants
        a shared lock beside shared ones while an exclusive one waits. A timed phase that waits for
        correctness runs may wait for it too (about a second), but its student joins the queue to
        time at once: behind the turnstile, judgings and starts of CUDA had waited 4 to 6 s each for
        the timed phase there, and the queue ran dry in between (an H200, a class of 20, eight
        workers). Gives the seconds it waited."""
        started = time.monotonic()
        with _logged("shared", label) as got, _locked(self.gpu, fcntl.LOCK_SH):
            got()
            yield time.monotonic() - started

    @contextmanager
    def exclusive(self, label: str = "") -> Iterator[float]:
        """A timing phase: the GPU to itself, no correctness phase starting while it waits. Gives
        the seconds it waited."""
        with self.timed(label) as hold:
            yield hold.waited

    @contextmanager
    def timed(self, label: str = "") -> Iterator[Timed]:
        """An exclusive hold that can end shared (`Timed.share`): a timed phase whose timings are
        done, sending its outputs, lets other students' correctness runs back onto the GPU, while
        no other timed phase starts before it lets go."""
        started, asked = time.monotonic(), time.time()
        hold = Timed(os.environ.get(LOG_ENVIRONMENT), label)
        try:
            with _locked(self.queue, fcntl.LOCK_SH):  # in the queue until it has the GPU
                hold.turnstile = open_lock(self.turnstile)
                fcntl.flock(hold.turnstile, fcntl.LOCK_EX)
                hold.gpu = open_lock(self.gpu)
                fcntl.flock(hold.gpu, fcntl.LOCK_EX)
            hold.waited, hold.since = time.monotonic() - started, (asked, time.time())
            yield hold
        finally:
            if hold.gpu >= 0 and hold.since[1]:
                hold.log("shared" if hold.shared else "exclusive", " sending" if hold.shared else "")
            for fd in (hold.gpu, hold.turnstile):
                if fd >= 0:
                    os.close(fd)  # closing releases the lock

    def timing_waits(self) -> bool:
        """Whether a timed phase waits for the GPU (each holds the queue shared while it waits).
        Asked by a correctness phase about to take the GPU."""
        fd = open_lock(self.queue)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing releases it, where it was taken
        return False


class Timed:
    """An exclusive hold of a timed phase, and the way to end it shared."""

    def __init__(self, log: str | None, label: str):
        self.path, self.label = log, label
        self.turnstile = self.gpu = -1
        self.waited, self.since, self.shared = 0.0, (0.0, 0.0), False

    def share(self) -> None:
        """The GPU shared from now on. No gap: flock converts a lock by dropping it and taking the
        new one, and in that instant only a shared hold can slip in, since any exclusive one waits
        at the turnstile, which this hold keeps until the GPU is shared. Then the turnstile goes:
        a timed phase waiting there keeps new correctness runs out again."""
        if self.shared:
            return
        fcntl.flock(self.gpu, fcntl.LOCK_SH)
        now = self.log("exclusive")
        os.close(self.turnstile)
        self.turnstile, self.since, self.shared = -1, (now, now), True

    def log(self, how: str, stage: str = "") -> float:
        """One line in the hold log (LOG_ENVIRONMENT), where there is one, ending now."""
        now = time.time()
        if self.path:
            _write_line(self.path, how, *self.since, now, self.label + stage)
        return now


@contextmanager
def _logged(how: str, label: str) -> Iterator[Callable[[], None]]:
    """One line in the hold log (LOG_ENVIRONMENT) once the hold ends, where there is one."""
    log = os.environ.get(LOG_ENVIRONMENT)
    times = [time.time()]
    try:
        yield lambda: times.append(time.time())
    finally:
        if log and len(times) == 2:
            _write_line(log, how, times[0], times[1], time.time(), label)


def note(label: str) -> None:
    """A moment of a grading in the hold log, where there is one ("mark", its time three times):
    to see what a grading did between its holds."""
    log = os.environ.get(LOG_ENVIRONMENT)
    if log:
        now = time.time()
        _write_line(log, "mark", now, now, now, label)


def _write_line(log: str, how: str, asked: float, got: float, released: float, label: str) -> None:
    line = f"{how} {asked:.3f} {got:.3f} {released:.3f} {os.getpid()} {label}\n"
    with open(log, "a") as out:  # one short write in append mode: lines of workers do not mix
        out.write(line)


@contextmanager
def _locked(path: Path, how: int) -> Iterator[None]:
    fd = open_lock(path)
    try:
        fcntl.flock(fd, how)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def open_lock(path: Path) -> int:
    """A lock file, made readable by every user where this process makes it (flock needs only a
    descriptor open for reading), never through a link another user planted."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except PermissionError:  # another user's file in a folder this user may not write: read it as it is
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    if os.fstat(fd).st_uid == os.getuid():
        os.fchmod(fd, 0o644)  # whatever this process's umask made of it
    return fd


def machine_folder() -> tuple[Path, str]:
    """The folder of the GPU locks that every grading on this machine shares, and, where it could
    not be that one, why (for the report: other users' gradings are then not kept out)."""
    named = os.environ.get(ENVIRONMENT)
    if named:
        return Path(named), ""
    folder = DEFAULT_FOLDER
    try:
        folder.mkdir(mode=0o1777, exist_ok=True)
        found = os.lstat(folder)  # the folder itself: a link planted in its place is not followed
        if not stat.S_ISDIR(found.st_mode):
            raise PermissionError(f"{folder} is not a folder")
        if found.st_uid == os.getuid() and stat.S_IMODE(found.st_mode) != 0o1777:
            os.chmod(folder, 0o1777)  # the umask took the others' rights: every user's gradings lock here
        elif found.st_uid not in (0, os.getuid()) and stat.S_IMODE(found.st_mode) & 0o1777 != 0o1777:
            raise PermissionError(f"{folder} is another user's, closed to others")
    except OSError as error:
        own = Path.home() / ".cache" / "kernel-grader" / "gpu-locks"
        own.mkdir(parents=True, exist_ok=True)
        return own, f"the GPU lock is this user's own ({error}): other users' gradings are not kept out of timed phases"
    return folder, ""


def gpu_identity() -> str:
    """The UUID of the first GPU this process sees (its number where torch cannot say)."""
    import torch

    try:
        return str(torch.cuda.get_device_properties(0).uuid)
    except (RuntimeError, AttributeError, AssertionError):
        return os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0] or "0"
