"""The sandbox's walls, attacked from inside with native code (ctypes), as if the child's guard had
already fallen: each attack that once worked (issue: umount2 on a cover, a read-write remount, a
note left in the host's /dev for a later grading, an unlimited scratch folder) fails here.

Runs only where bubblewrap is installed and the OS lets it make namespaces; the machine's probe
says which (every grade's `sandbox` line).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from grader.running import isolation, landlock, sandbox
from grader.running.exec_walls import Walls
from grader.assignment.spec import REPO_ROOT

STATUS = sandbox.probe()
requires_sandbox = pytest.mark.skipif(STATUS.startswith("none"), reason=f"no sandbox here: {STATUS}")

ATTACKS = r"""
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
repo = sys.argv[1]
seen = {}
def attempt(name, result):
    seen[name] = "ok" if result == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
mounts = [line.split()[4] for line in open("/proc/self/mountinfo")]
seen["umount"] = {m: (libc.umount2(m.encode(), 2) == 0) for m in mounts}
attempt("remount / read-write", libc.mount(None, b"/", None, 32 | 4096, None))
attempt("remount /usr read-write", libc.mount(None, b"/usr", None, 32 | 4096, None))
attempt("unshare user", libc.unshare(0x10000000))
attempt("unshare mount", libc.unshare(0x20000))
fd = os.open("/proc/1/ns/mnt", os.O_RDONLY)
attempt("setns to init's mounts", libc.setns(fd, 0))
attempt("ptrace init", libc.ptrace(16, 1, None, None))
seen["capabilities"] = open("/proc/self/status").read().split("CapEff:")[1].split()[0]
for path in (f"{repo}/grader/planted.py", "/usr/planted", "/etc/planted"):
    try:
        open(path, "w").write("x"); seen[path] = "written"
    except OSError as error:
        seen[path] = errno.errorcode[error.errno]
seen["solutions"] = os.path.exists(f"{repo}/solutions") or os.path.exists(f"{repo}/tests")
seen["dev"] = sorted(os.listdir("/dev"))
print(json.dumps(seen))
"""


def _run(script: str, tmp_path: Path, *arguments: str, scratch: int = 64 << 20) -> subprocess.CompletedProcess:
    (tmp_path / "attack.py").write_text(script)
    view = sandbox.View([tmp_path], tmp_path, scratch)
    seccomp = sandbox.seccomp_filter()
    command = sandbox.command([sys.executable, "-I", str(tmp_path / "attack.py"), *arguments], view, seccomp)
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=120,
                              pass_fds=(seccomp,) if seccomp is not None else ())  # fmt: skip
    finally:
        if seccomp is not None:
            os.close(seccomp)


@requires_sandbox
def test_no_wall_can_be_taken_down_from_inside(tmp_path):
    done = _run(ATTACKS, tmp_path, str(REPO_ROOT))
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert not any(seen["umount"].values()), f"a mount came down: {seen['umount']}"
    for attack in ("remount / read-write", "remount /usr read-write", "unshare user", "unshare mount",
                   "setns to init's mounts", "ptrace init"):  # fmt: skip
        assert seen[attack] != "ok", f"{attack} succeeded inside the sandbox"
    assert seen["capabilities"] == "0000000000000000"
    assert all(seen[p] in ("EROFS", "EACCES", "ENOENT", "EPERM") for p in
               (f"{REPO_ROOT}/grader/planted.py", "/usr/planted", "/etc/planted")), seen  # fmt: skip
    assert not (REPO_ROOT / "grader" / "planted.py").exists()
    assert seen["solutions"] is False, "solutions/ or tests/ is in sight"
    assert not [d for d in seen["dev"] if d not in {"core", "fd", "full", "null", "ptmx", "pts", "random", "shm",
                                                      "stderr", "stdin", "stdout", "tty", "urandom", "zero"}
                and not d.startswith("nvidia")], seen["dev"]  # fmt: skip


LEAVE_A_NOTE = r"""
import os, sys
for folder in ("/tmp", "/dev/shm"):
    open(f"{folder}/note-from-an-earlier-grading", "w").write("hello")
print(sorted(os.listdir("/tmp")), sorted(os.listdir("/dev/shm")))
"""

READ_THE_NOTE = r"""
import os
print(sorted(os.listdir("/tmp")) + sorted(os.listdir("/dev/shm")))
"""


@requires_sandbox
def test_nothing_written_in_one_sandbox_is_seen_by_the_next(tmp_path):
    first = _run(LEAVE_A_NOTE, tmp_path)
    assert first.returncode == 0 and "note-from-an-earlier-grading" in first.stdout, first.stderr[-1000:]
    second = _run(READ_THE_NOTE, tmp_path)
    assert second.returncode == 0, second.stderr[-1000:]
    assert "note" not in second.stdout
    assert not list(Path("/dev/shm").glob("note-from-*")), "a note reached the host's /dev/shm"


FILL_THE_SCRATCH = r"""
import errno
written = 0
try:
    with open("/tmp/big", "wb") as file:
        for _ in range(4096):
            file.write(b"x" * (1 << 20)); file.flush(); written += 1
except OSError as error:
    print(errno.errorcode[error.errno], written)
"""


@requires_sandbox
def test_the_scratch_space_is_capped(tmp_path):
    done = _run(FILL_THE_SCRATCH, tmp_path, scratch=32 << 20)
    code, written = done.stdout.split()
    assert code == "ENOSPC" and int(written) <= 32, done.stdout


SHARED = r"""
import errno, json, os, sys
seen = {}
for path in (os.path.join(sys.argv[1], "kernel.cubin"), os.path.join(sys.argv[2], "planted")):
    try:
        open(path, "w").write("x"); seen[path] = "written"
    except OSError as error:
        seen[path] = errno.errorcode[error.errno]
print(json.dumps(seen))
"""


@requires_sandbox
def test_the_gradings_shared_folder_is_the_only_new_place_a_child_can_write(tmp_path):
    shared, shown = tmp_path / "compiled", tmp_path / "shown"
    shared.mkdir(), shown.mkdir()
    (shown / "attack.py").write_text(SHARED)
    view = sandbox.View([shown], shown, 64 << 20)
    command = sandbox.command([sys.executable, "-I", str(shown / "attack.py"), str(shared), str(shown)], view, None,
                              shared)  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert seen[str(shared / "kernel.cubin")] == "written" and (shared / "kernel.cubin").exists()
    assert seen[str(shown / "planted")] == "EROFS" and not (shown / "planted").exists()


def test_package_folders_on_the_import_path_under_tmp_stay_in_sight(tmp_path, monkeypatch):
    """A venv that reuses another's packages (bootstrap.py, on a GPU image) finds them through a
    .pth file; where that other venv lives under /tmp, the child must still see its packages, and
    nothing else of /tmp."""
    assert tmp_path.is_relative_to("/tmp"), "this test needs pytest's folders under /tmp"
    packages = tmp_path / "other-venv" / "lib" / "python3" / "site-packages"
    elsewhere = tmp_path / "not-packages"
    packages.mkdir(parents=True), elsewhere.mkdir()
    monkeypatch.setattr(sys, "path", [*sys.path, str(packages), str(elsewhere)])
    shown = sandbox.python_paths()
    assert packages in shown
    assert not any(elsewhere.is_relative_to(p) for p in shown), shown


WITHOUT_SANDBOX = r"""
import errno, json, os, socket, sys
salt, classmate, repo, outside, scratch, port = sys.argv[1:7]
parent, seen = os.getppid(), {}
def attempt(name, action):
    try:
        action()
        seen[name] = "ok"
    except OSError as error:
        seen[name] = errno.errorcode.get(error.errno, str(error.errno))
attempt("read the salt file", lambda: open(salt).read())
attempt("list a classmate's folder", lambda: os.listdir(classmate))
attempt("read solutions/", lambda: os.listdir(os.path.join(repo, "solutions")))
attempt("read the parent's environ", lambda: open(f"/proc/{parent}/environ", "rb").read())
attempt("read the parent's cmdline", lambda: open(f"/proc/{parent}/cmdline", "rb").read())
attempt("open the parent's memory", lambda: open(f"/proc/{parent}/mem", "rb").close())
attempt("list /proc", lambda: os.listdir("/proc"))
attempt("write outside its folders", lambda: open(outside, "w").write("x"))
attempt("write the host's /dev/shm", lambda: open(f"/dev/shm/planted-{os.getpid()}", "w").close())
attempt("connect over TCP", lambda: socket.create_connection(("127.0.0.1", int(port)), timeout=5).close())
attempt("signal the parent", lambda: os.kill(parent, 0))
attempt("make a memfd", lambda: os.close(os.memfd_create("x")))
attempt("write its scratch folder", lambda: open(os.path.join(scratch, "mine"), "w").write("x"))
attempt("read its own /proc", lambda: open("/proc/self/status").read())
attempt("read the CPU's description", lambda: open("/proc/cpuinfo").read())
print(json.dumps(seen))
"""
BLOCKED = ("read the salt file", "list a classmate's folder", "read solutions/", "read the parent's environ",
           "read the parent's cmdline", "open the parent's memory", "list /proc", "write outside its folders",
           "write the host's /dev/shm", "connect over TCP", "signal the parent")  # fmt: skip


@pytest.mark.skipif(not landlock.abi(), reason="the kernel offers no Landlock")
def test_without_the_sandbox_landlock_keeps_a_child_to_its_own_files(tmp_path):
    """Issue 41, 2: without bubblewrap a child read the batch's salt from /proc/PID/environ and
    wrote files outside its grading. A child the launcher walls (exec_walls.py: Landlock and the
    seccomp filter) reaches none of what a bare child reaches, from native code as much as from
    Python (no guard in this script), while it keeps its own folders and /proc. Measured here:
    each attempt works without the walls and fails with them."""
    salt, classmate, scratch, shown = (tmp_path / name for name in ("salt", "classmate", "scratch", "shown"))
    for folder in (classmate, scratch, shown):
        folder.mkdir()
    salt.write_text("the course salt")
    (shown / "attack.py").write_text(WITHOUT_SANDBOX)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        arguments = [str(salt), str(classmate), str(REPO_ROOT), str(tmp_path / "outside"), str(scratch),
                     str(listener.getsockname()[1])]  # fmt: skip
        child = [sys.executable, "-I", str(shown / "attack.py"), *arguments]
        bare = json.loads(subprocess.run(child, capture_output=True, text=True, timeout=120, check=True).stdout)
        seccomp = sandbox.seccomp_filter(counted=False)
        walls = Walls(readable=sandbox.unsandboxed_readable([shown]), writable=[str(scratch)], seccomp_fd=seccomp)
        try:
            done = subprocess.run(walls.command(child), capture_output=True, text=True, timeout=120,
                                  pass_fds=(seccomp,) if seccomp is not None else ())  # fmt: skip
        finally:
            if seccomp is not None:
                os.close(seccomp)
            for planted in Path("/dev/shm").glob("planted-*"):  # the bare child's
                planted.unlink()
    assert done.returncode == 0, done.stderr[-2000:]
    walled = json.loads(done.stdout)
    assert all(bare[attempt] == "ok" for attempt in BLOCKED), f"the attack failed without the walls: {bare}"
    assert not [attempt for attempt in BLOCKED if walled[attempt] == "ok"], walled
    assert walled["make a memfd"] == "EPERM" and bare["make a memfd"] == "ok", "no cgroup to count it: refused"
    for kept in ("write its scratch folder", "read its own /proc", "read the CPU's description"):
        assert walled[kept] == "ok", (kept, walled)


def test_a_compiling_child_yields_its_cores_and_cannot_take_them_back():
    """A correctness child on the GPU tier compiles on every core it gets, beside other gradings'
    timed phases: the launcher lowers its priority before the exec, and the child, which holds no
    capability, cannot raise it again."""
    probe = ("import os\nprint(os.nice(0))\ntry:\n    os.nice(-5)\n    print('raised')\n"
             "except PermissionError:\n    print('refused')")  # fmt: skip
    argv = [sys.executable, "-I", "-c", probe]
    if sandbox.bwrap():
        argv = sandbox.command(argv, sandbox.View([], Path("/"), 1 << 20), None)
    ran = subprocess.run(Walls(niceness=isolation.COMPILER_NICENESS).command(argv), capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    said = ran.stdout.split()
    assert said[0] == str(isolation.COMPILER_NICENESS), ran.stderr
    if sandbox.bwrap() or os.getuid() != 0:  # root outside the sandbox keeps CAP_SYS_NICE
        assert said[1] == "refused", "the child raised its priority again"


@pytest.mark.parametrize("given, niceness", [("", isolation.COMPILER_NICENESS), ("0", 0), ("19", 19),
                                             ("20", isolation.COMPILER_NICENESS), ("-5", isolation.COMPILER_NICENESS),
                                             ("ten", isolation.COMPILER_NICENESS)])  # fmt: skip
def test_the_operator_may_set_the_compilers_nice_value_within_its_range(monkeypatch, given, niceness):
    """GRADER_COMPILER_NICENESS (tools/steady_grade.py beside measures what the default buys);
    anything but 0-19 keeps the default."""
    monkeypatch.setenv("GRADER_COMPILER_NICENESS", given)
    assert isolation.compiler_niceness() == niceness
