"""What student code can reach: the child runs inside bubblewrap, the sandbox Flatpak relies on.

`command()` wraps the child's command line in `bwrap` with:
- new user, mount, PID, network, IPC and UTS namespaces (`--unshare-all`): no network at all,
  and every process the student starts lives and dies with the sandbox (`--die-with-parent`);
- no capabilities (`--cap-drop ALL`), no new user namespace inside (`--disable-userns`), and a
  seccomp filter (built with libseccomp) that refuses mount, umount, unshare, setns, ptrace and
  the like: the walls were put up by bwrap before the student's process started, and that
  process can take none of them down (measured: umount2 and remount fail with EPERM, unshare
  with EINVAL, CapEff 0);
- a read-only view of the system's directories, the Python installation, the repository's
  grader/ and assignments/ (never the repository itself: no solutions/, no tests/), and the
  student's own copy of the submission; nothing else of the host;
- a private /dev holding only the null-like devices and the GPU's nodes, a private /proc, and
  size-limited tmpfs for /tmp (its scratch space, Triton's cache) and /dev/shm, which the
  parent's watchdog counts against the assignment's host memory (limits.py).

Where bwrap is missing or the OS refuses it (no user namespaces in some containers), the child
runs without a sandbox and every report says so (`sandbox: none (...)`): Landlock then shows it
what the sandbox would have and nothing else, and it loads the same seccomp filter itself
(exec_walls.py); the parent still kills every process the child left behind (isolation.py).
`batch` refuses to grade a class so unless given --no-sandbox (batch.py). Either way, each child
has a memory cgroup of its own where the machine offers one (memory_cgroup.py).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from grader.running import landlock, memory_cgroup
from grader.assignment.spec import REPO_ROOT

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
SHOWN_IN_REPO = ("grader", "assignments", ".venv")  # all the child may see of the repository
PACKAGE_FOLDERS = ("site-packages", "dist-packages")  # where an import path holds installed packages
SHM_BYTES = 64 << 20
# Refused inside the sandbox, whatever the process's privileges: what would reshape the sandbox,
# reach into another process, or load code into the kernel.
DENIED_SYSCALLS = (
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "ptrace", "process_vm_readv",
    "process_vm_writev", "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf",
    "keyctl", "add_key", "request_key", "swapon", "swapoff", "reboot", "syslog", "acct", "settimeofday",
    "clock_settime", "clock_adjtime", "adjtimex", "userfaultfd", "open_by_handle_at", "name_to_handle_at",
    "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "quotactl", "lookup_dcookie", "vhangup",
)  # fmt: skip
# Refused too where no memory cgroup counts what a child holds (memory_cgroup.py): memory that no
# process maps and no capped tmpfs holds, which the watchdog cannot see.
NO_CGROUP_SYSCALLS = ("memfd_create", "shmget")
NAMESPACE_FLAGS = (0x20000, 0x10000000, 0x20000000, 0x40000000, 0x04000000, 0x08000000, 0x02000000)
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_MASKED_EQ = 7


def SCMP_ACT_ERRNO(code: int) -> int:  # noqa: N802 (libseccomp's own name)
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


@dataclass
class View:
    """What one child sees: read-only paths, its own scratch space, and where it starts."""

    readable: list[Path]
    cwd: Path
    scratch_bytes: int
    env: dict[str, str] = field(default_factory=dict)


def bwrap() -> str | None:
    return shutil.which("bwrap")


def _inside_repo_allowed(path: Path) -> bool:
    """A path of the repository may be shown only inside one of SHOWN_IN_REPO."""
    if path == REPO_ROOT or path in REPO_ROOT.parents:
        return False
    return not path.is_relative_to(REPO_ROOT) or any(path.is_relative_to(REPO_ROOT / n) for n in SHOWN_IN_REPO)


def _is_grader_path(path: Path) -> bool:
    """A Python installation or a checkout of the grader under /tmp (Gradescope's unpacked
    autograder, a TA's scratch checkout), and the package folders on its import path (a venv
    that reuses another's packages, as bootstrap.py sets up, names them in a .pth file) stay in
    sight; the rest of /tmp does not."""
    return path.is_relative_to("/tmp") and (path == Path(sys.prefix) or Path(sys.prefix).is_relative_to(path)
                                            or path.is_relative_to(REPO_ROOT) or path.name in PACKAGE_FOLDERS)


def python_paths() -> list[Path]:
    """The Python installation the child runs on: prefixes, the standard library, every import path."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, os.path.dirname(sys.executable)}
    found.update(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib"))
    found.update(p for p in sys.path if p)
    for variable in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH"):
        found.update(p for p in os.environ.get(variable, "").split(os.pathsep) if p)
    # Triton builds its launcher with the C compiler and nvcc builds CUDA parts: each needs its
    # whole installation (cc1, as, ld, headers), not only the bin/ folder on the PATH.
    for tool in (os.environ.get("CC", ""), "cc", "gcc", "nvcc", "ptxas"):
        where = shutil.which(tool) if tool else None
        if where:
            found.add(str(Path(os.path.realpath(where)).parent.parent))
    real = {Path(os.path.realpath(p)) for p in found if os.path.isabs(p) and os.path.exists(p)}
    real = {p for p in real if _inside_repo_allowed(p) and not any(p.is_relative_to(s) for s in map(Path, SYSTEM))}
    real = {p for p in real if p != Path("/") and not any(p.is_relative_to(d) for d in ("/proc", "/dev", "/tmp", "/sys"))
            or _is_grader_path(p)}
    return sorted(p for p in real if not any(q != p and p.is_relative_to(q) for q in real))


def _system_arguments() -> list[str]:
    arguments = []
    for path in SYSTEM:
        if os.path.islink(path):
            arguments += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            arguments += ["--ro-bind", path, path]
    return arguments


def _device_arguments(scratch_bytes: int) -> list[str]:
    arguments = ["--proc", "/proc", "--dev", "/dev", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
    for node in sorted(Path("/dev").glob("nvidia*")):  # the GPU's nodes, and nothing else of the host's /dev
        arguments += ["--dev-bind", str(node), str(node)]
    for path in ("/sys", *_nvidia_sockets()):  # CUDA reads the PCI topology; read-only suffices (measured)
        arguments += ["--ro-bind", path, path]
    return arguments + ["--size", str(scratch_bytes), "--tmpfs", "/tmp"]


def _nvidia_sockets() -> list[str]:
    return [str(socket) for socket in sorted(Path("/run").glob("nvidia*"))]


def readable_paths(readable: list[Path]) -> list[Path]:
    """Every path a child is shown read-only, beside its own `readable` ones: the Python
    installation, the grader's code and the assignments. Without the sandbox, Landlock allows
    these and the system's folders (exec_walls.py)."""
    return [*python_paths(), REPO_ROOT / "grader", REPO_ROOT / "assignments", *readable]


def unsandboxed_readable(readable: list[Path]) -> list[str]:
    """What Landlock lets a child without the sandbox read: what the sandbox would show it."""
    return [*SYSTEM, "/sys", *_nvidia_sockets(), *map(str, readable_paths(readable))]


def command(child: list[str], view: View, seccomp_fd: int | None, shared: Path | None = None) -> list[str]:
    """`child` wrapped in bwrap with the given view. The paths under /tmp are bound after the
    private /tmp is made, so a grader or a venv that lives there stays in sight. `shared` is
    bound writable: the one folder the children of one grading share (compiled kernels)."""
    arguments = [bwrap() or "bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
                 "--new-session", "--cap-drop", "ALL", *_system_arguments(), *_device_arguments(view.scratch_bytes)]  # fmt: skip
    for path in readable_paths(view.readable):
        if path.exists():
            arguments += ["--ro-bind", str(path), str(path)]
    if shared is not None:
        arguments += ["--bind", str(shared), str(shared)]
    for name, value in view.env.items():
        arguments += ["--setenv", name, value]
    if seccomp_fd is not None:
        arguments += ["--seccomp", str(seccomp_fd)]
    return [*arguments, "--chdir", str(view.cwd), "--", *child]


def seccomp_filter(counted: bool = True) -> int | None:
    """A file descriptor holding the BPF program of DENIED_SYSCALLS (and of clone with a namespace
    flag), for bwrap's --seccomp or the launcher (exec_walls.py); None where libseccomp is not
    installed. Where the child's memory is not `counted` by a cgroup, NO_CGROUP_SYSCALLS too."""
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    context = ctypes.c_void_p(lib.seccomp_init(SCMP_ACT_ALLOW))
    refuse = SCMP_ACT_ERRNO(errno.EPERM)
    for call in DENIED_SYSCALLS + (() if counted else NO_CGROUP_SYSCALLS):
        number = lib.seccomp_syscall_resolve_name(call.encode())
        if number >= 0:
            lib.seccomp_rule_add_array(context, refuse, number, 0, None)
    clone = lib.seccomp_syscall_resolve_name(b"clone")
    for flag in NAMESPACE_FLAGS:  # clone's first argument: a new namespace of any kind is refused
        condition = _ArgCmp(0, SCMP_CMP_MASKED_EQ, flag, flag)
        lib.seccomp_rule_add_array(context, refuse, clone, 1, ctypes.byref(condition))
    # clone3 passes its flags in memory, where a filter cannot look: ENOSYS makes libc use clone.
    lib.seccomp_rule_add_array(context, SCMP_ACT_ERRNO(errno.ENOSYS), lib.seccomp_syscall_resolve_name(b"clone3"), 0, None)
    fd = os.memfd_create("grader-seccomp", 0)
    exported = lib.seccomp_export_bpf(context, fd)
    lib.seccomp_release(context)
    if exported != 0:
        os.close(fd)
        return None
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


PROBE = "import os; print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])"


@functools.cache
def probe() -> str:
    """What a child gets on this machine, found once per process by starting a sandbox that runs
    nothing: the `sandbox` line of every grade's environment. Starts with "none" where it fails."""
    if bwrap() is None:
        return "none (bubblewrap is not installed: `apt-get install bubblewrap`)"
    seccomp = seccomp_filter()
    view = View(readable=[], cwd=Path("/"), scratch_bytes=16 << 20)
    try:
        done = subprocess.run(command([sys.executable, "-I", "-c", PROBE], view, seccomp), capture_output=True,
                              text=True, timeout=60, pass_fds=(seccomp,) if seccomp is not None else ())  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"none (bubblewrap failed: {error})"
    finally:
        if seccomp is not None:
            os.close(seccomp)
    if done.returncode != 0 or done.stdout.strip() != "0000000000000000":
        return f"none (bubblewrap refused: {(done.stderr.strip() or done.stdout.strip())[-300:]})"
    filtered = "a seccomp filter" if seccomp is not None else "no seccomp filter (libseccomp is not installed)"
    return (f"bubblewrap: user, mount, PID, network and IPC namespaces, no capabilities, {filtered}; "
            "read-only system, Python and grader, a private /dev, /proc and size-limited /tmp")


def walls(sandboxed: bool = True) -> str:
    """The `sandbox` line of a grade: the walls a child of this process gets (`sandboxed` False:
    the grading was told to run without the sandbox)."""
    found = probe()
    if not sandboxed and not found.startswith("none"):
        found = "none (switched off: --no-sandbox)"
    if found.startswith("none"):
        found = f"{found}; {landlock.describe()}"
    return f"{found}; {memory_cgroup.describe()}"


def warning(environment: dict) -> str:
    """The sentence a class summary puts first when its children ran without the sandbox ('' when not)."""
    line = str(environment.get("sandbox", ""))
    if not line.startswith("none"):
        return ""
    return ("Warning: graded without a sandbox. Student code ran as the grader's user, walled only by what this "
            f"line names: {line}")  # fmt: skip
