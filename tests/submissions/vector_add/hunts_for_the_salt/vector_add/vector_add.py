# Hostile: hunts for the batch's secret salt (its environment, every process's environ and cmdline, the salt file) and reports what it found.
# It reads /proc by paths relative to /proc itself, which the child's guard does not take for /proc: what stops it is the walls.
import os
from pathlib import Path


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read(1 << 20)
    except OSError:
        return b""


def _processes() -> list[str]:
    """Every process it can list, and its ancestors, which it need not list to name."""
    try:
        listed = [pid for pid in os.listdir(".") if pid.isdigit()]
    except OSError:
        listed = []
    pid, ancestors = os.getppid(), []
    while pid > 1 and len(ancestors) < 32:
        ancestors.append(str(pid))
        stat = _read(f"{pid}/stat")
        pid = int(stat.rsplit(b")", 1)[1].split()[1]) if stat else 0
    return sorted(set(listed) | set(ancestors), key=int)


def _files(environs: list[bytes]) -> list[str]:
    """The salt file wherever it may be: where a test says it put one, where the docs suggest, and
    wherever a process's environment names one."""
    named = Path(__file__).with_name("salt_paths.txt")
    paths = named.read_text().split() if named.is_file() else []
    paths += [os.path.expanduser("~/.config/kernel-grader/salt")]
    for environ in environs:
        for entry in environ.split(b"\0"):
            if entry.startswith(b"GRADER_SALT_FILE="):
                paths.append(entry.split(b"=", 1)[1].decode(errors="replace"))
    return paths


def _hunt_in_proc() -> tuple[list[str], list[str], list[bytes]]:
    found, pids = [], _processes()
    environs = {pid: _read(f"{pid}/environ") for pid in pids}
    for pid, environ in environs.items():
        found += [f"/proc/{pid}/environ: {entry.decode(errors='replace')}" for entry in environ.split(b"\0")
                  if entry.startswith(b"GRADER_SALT")]
    for pid in pids:
        command = _read(f"{pid}/cmdline").replace(b"\0", b" ")
        if b"salt" in command.lower():
            found.append(f"/proc/{pid}/cmdline: {command.decode(errors='replace')[:200]}")
    return found, pids, [environ for environ in environs.values() if environ]


def add(x, y):
    found = [f"my environment: {name}={value}" for name, value in os.environ.items() if "SALT" in name.upper()]
    here = os.getcwd()
    os.chdir("/proc")
    try:
        in_proc, pids, environs = _hunt_in_proc()
    finally:
        os.chdir(here)
    files = _files(environs)
    found += in_proc + [f"{path}: {text.decode(errors='replace')[:100]}" for path in files if (text := _read(path))]
    searched = (f"hunted for the salt in its environment, {len(environs)} of {len(pids)} processes' environments, "
                f"their command lines and {len(files)} files")
    raise RuntimeError(f"{searched}: found {found}" if found else f"{searched}: found nothing")
