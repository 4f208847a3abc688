"""What student code can reach: Linux namespaces set up in the child before it loads any.

The child (see isolation.BOOT) calls `enter` first thing, while it is still one thread:
- new user, mount, network and PID namespaces (`unshare`), so nothing it does is seen outside;
- a fork: the grandchild is PID 1 of the new PID namespace and runs the worker, so every process
  the student starts lives and dies inside it (none can slip out with setsid); the middle process
  only waits and then exits the way the grandchild did, so the parent reads the same exit status;
- the network namespace has only a loopback that is down: no connection leaves, not even to a
  socket the grader's machine listens on;
- an empty tmpfs over every directory the child does not need (home directories, other checkouts,
  the repository's solutions/, tests/, outputs, the batch's folders), keeping only the Python
  installation, the repository's grader/, assignments/ and .venv/, and its own temporary folder;
  a private tmpfs over the temporary directories, so other children's folders are out of sight;
- everything read-only except its own temporary folder and the private tmpfs.

Where the OS refuses (no user namespaces in a container, a seccomp filter), the child goes on
without them and says so: `status` is reported as the grade's `sandbox` entry, never a crash.
Uses only the standard library: it runs before torch is imported, while there is one thread.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
# mount(2) flags a remount must repeat, or the kernel refuses it inside a user namespace
# (ST_* of statvfs and MS_* of mount share their values on Linux).
KEPT_FLAGS = MS_NOSUID | MS_NODEV | 8 | 1024 | 2048 | 4096  # nosuid nodev noexec noatime nodiratime relatime
# Top-level directories of the system itself: visible, read-only. Everything else at the root is
# covered, except the paths the child needs.
SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "dev", "proc", "sys", "var")
SCRATCH_SIZE = "size=512m"  # a private /tmp: tmpfs pages escape the RSS limit, so they are capped
COVER_SIZE = "size=1m"


class SandboxError(OSError):
    """One step of the setup was refused; the message says which."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise SandboxError(code, f"{what}: {os.strerror(code)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def encode(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    result = _libc().mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags), encode(data))
    _check(result, f"mount {target}")


def _unshare() -> str:
    """New namespaces for this process, with this user's identity kept inside the user namespace."""
    libc, uid, gid = _libc(), os.getuid(), os.getgid()
    others = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID
    if libc.unshare(CLONE_NEWUSER | others) == 0:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
        return "user, mount, network and PID namespaces"
    refused = ctypes.get_errno()
    if os.geteuid() == 0 and libc.unshare(others) == 0:  # root without user namespaces still has these
        return f"mount, network and PID namespaces (user namespace refused: {os.strerror(refused)})"
    raise SandboxError(refused, f"unshare: {os.strerror(refused)}")


def _become_init() -> None:
    """Fork into the new PID namespace; this process stays outside and mirrors the child's end."""
    child = os.fork()
    if child == 0:
        _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the middle process killed: PID 1 and all it started die
        return
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def _ancestors(path: Path) -> list[Path]:
    return [p for p in path.parents if p != Path("/")]


def _within(path: Path, roots) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _real(paths, repo: Path) -> set[Path]:
    real = {Path(os.path.realpath(p)) for p in paths if p.is_absolute() and p.exists()}
    return {p for p in real if p != repo and p not in repo.parents and p != Path("/")}


def needed_paths(repo: Path) -> tuple[set[Path], set[Path]]:
    """What the child reads: (the grader, the assignments' data and the Python installation, kept
    wherever they are, under /tmp included; the directories of PATH and the CUDA variables, kept
    unless they lie in a shared temporary directory). Never the repository root itself, nor a
    folder that holds it."""
    essential = {repo / "grader", repo / "assignments"}
    essential.update(Path(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix))
    essential.update(Path(p) for p in sys.path if p)
    helpful = set()
    for variable in ("LD_LIBRARY_PATH", "PATH", "CUDA_HOME", "CUDA_PATH"):
        helpful.update(Path(p) for p in os.environ.get(variable, "").split(os.pathsep) if p)
    # Triton builds a small C launcher with the C compiler on a GPU, and nvcc builds CUDA parts:
    # each needs its whole installation (cc1, as, ld, headers), not only the bin/ folder on PATH.
    for tool in (os.environ.get("CC", ""), "cc", "gcc", "nvcc", "ptxas"):
        found = shutil.which(tool) if tool else None
        if found:
            helpful.add(Path(os.path.realpath(found)).parent.parent)
    return _real(essential, repo), _real(helpful, repo)


def _plan(repo: Path, writable: Path) -> tuple[list[Path], set[Path], list[Path]]:
    """(directories to cover with an empty tmpfs, shallowest first; the paths to keep in sight;
    the scratch directories, whose tmpfs is private but writable)."""
    scratch = {Path(os.path.realpath(p)) for p in (tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm", "/run")}
    scratch = {p for p in scratch if p.is_dir()}
    essential, helpful = needed_paths(repo)
    # From the shared temporary directories, only the child's own folder and what it cannot run
    # without (a checkout or a venv that lives under /tmp): every folder on the way there is
    # covered too, so its other entries (other children's folders) stay out of sight.
    shown = essential | {p for p in helpful if not _within(p, scratch) and not any(p in s.parents for s in scratch)}
    shown.add(writable)
    shown.update(p for s in scratch if s.name == "run" for p in s.glob("nvidia*"))  # the driver's sockets
    # A directory on the way to a kept path is covered too, its other entries hidden, unless it
    # belongs to the system; the repository and the folders that hold it always are.
    through = {a for p in shown for a in _ancestors(p) if a.parts[1] not in SYSTEM or _within(a, scratch)}
    through.update([repo, *_ancestors(repo)] if repo.parts[1] not in SYSTEM else [repo])
    top = {Path("/", name) for name in os.listdir("/") if name not in SYSTEM}
    top = {p for p in top if p.is_dir() and not p.is_symlink()}
    covered = {p for p in top | through | scratch if not _within(p, shown)}
    return sorted(covered, key=lambda p: len(p.parts)), shown, sorted(scratch)


def _cover(directory: Path, restore: list[Path], size: str) -> None:
    """An empty tmpfs over `directory`, then `restore` (some of its entries) bound back in from
    the originals, opened before they went out of sight."""
    fds = {entry: os.open(entry, os.O_PATH) for entry in restore}
    try:
        _mount("tmpfs", str(directory), "tmpfs", MS_NOSUID | MS_NODEV, f"{size},mode=755")
        try:
            for entry, fd in fds.items():
                entry.mkdir() if os.path.isdir(f"/proc/self/fd/{fd}") else entry.touch()
                _mount(f"/proc/self/fd/{fd}", str(entry), None, MS_BIND | MS_REC)
        except OSError:
            _libc().umount2(str(directory).encode(), MNT_DETACH)  # as it was: better seen than missing
            raise
    finally:
        for fd in fds.values():
            os.close(fd)


def _hide(repo: Path, writable: Path) -> tuple[int, list[Path]]:
    """Cover what the child must not see; returns how many directories were covered, and the
    scratch directories (writable again after everything is made read-only)."""
    covered, shown, scratch = _plan(repo, writable)
    on_the_way = shown | {a for p in shown for a in _ancestors(p)}
    for directory in covered:
        restore = [p for p in on_the_way if p.parent == directory and os.path.lexists(p)]
        _cover(directory, restore, SCRATCH_SIZE if directory in scratch else COVER_SIZE)
    return len(covered), [s for s in scratch if s.name != "run"]


def _mount_points() -> list[str]:
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    points = [line.split()[4].encode().decode("unicode_escape") for line in lines]
    return sorted(set(points), key=len)


# Left as they are: CUDA fails to start (error 304, "OS call failed") when these are read-only,
# and they hold no course files (measured on an H200 machine, 2026-11-22).
DEVICE_TREES = ("/dev", "/proc", "/sys")


def _read_only_except(writable: list[Path]) -> None:
    """Every mount read-only but the kernel's and the devices', then the child's own folder and its
    private tmpfs writable again."""
    for point in _mount_points():
        if any(point == tree or point.startswith(tree + "/") for tree in DEVICE_TREES):
            continue
        try:
            flags = os.statvfs(point).f_flag & KEPT_FLAGS
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except OSError as error:
            if error.errno not in (errno.ENOENT, errno.EACCES, errno.EINVAL):  # a mount hidden by a cover
                raise
    for path in writable:
        _mount(None, str(path), None, MS_REMOUNT | MS_BIND | (os.statvfs(path).f_flag & KEPT_FLAGS))


def _isolate_files(repo: Path, writable: Path) -> str:
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here propagates back out
    proc = "own /proc"
    try:
        # Other processes' command lines and environments (the batch's, say) out of sight.
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV)
    except SandboxError as error:
        proc = f"the host's /proc ({error.strerror})"
    count, scratch = _hide(repo, writable)
    _read_only_except([*scratch, writable])
    return f"{count} directories covered, read-only but for its own folder and a private /tmp, {proc}"


def enter(repo: str, job_path: str) -> str:
    """Set up the sandbox for the job's child and return what it holds, in words."""
    workdir = Path(os.path.realpath(Path(job_path).parent))
    try:
        namespaces = _unshare()
    except OSError as error:
        return f"none ({error.strerror or error})"
    _become_init()
    try:
        files = _isolate_files(Path(repo), workdir)
    except OSError as error:
        return f"{namespaces}; files: not all hidden ({error.strerror or error})"
    return f"{namespaces}; {files}"


PROBE = (
    "import sys; sys.path.insert(0, sys.argv[1]); from grader import sandbox; "
    "print(sandbox.enter(*sys.argv[1:]), flush=True)"
)


@functools.cache
def probe() -> str:
    """What a child gets on this machine, found once per process by a child that sets up the
    sandbox and runs nothing: the `sandbox` line of every grade's environment."""
    from grader.spec import REPO_ROOT

    with tempfile.TemporaryDirectory(prefix="grade-probe-") as folder:
        job = Path(folder) / "job.json"
        job.write_text("{}")
        try:
            done = subprocess.run([sys.executable, "-I", "-c", PROBE, str(REPO_ROOT), str(job)],
                                  capture_output=True, text=True, timeout=60)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"none (the probe failed: {error})"
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else f"none (the probe failed: {done.stderr.strip()[-300:]})"
