"""Sets up `.venv/` for the grader on a fresh machine; `make` runs it before anything else.

Standard library only, since nothing else is installed yet. Two cases:
- the interpreter running this already has torch and Triton (a GPU image): the new venv reuses
  its packages through a .pth file (this works even when that interpreter is itself a venv,
  where `--system-site-packages` would not) and installs nothing heavy, nothing at all offline;
- otherwise (a laptop or CI without a GPU): torch's CPU build and Triton from PyPI, pinned, so
  that pip never pulls a multi-gigabyte CUDA build of torch.
"""

from __future__ import annotations

import importlib.util
import os
import site
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
# The pinned CPU stack (grader/stack.toml, read as grader/running/stack.py does: nothing but the standard
# library is installed yet). Triton is the GPU image's own version.
_PIN = tomllib.loads((ROOT / "grader" / "stack.toml").read_text())
CPU_STACK = [f"torch=={_PIN['torch-cpu']}", f"triton=={_PIN['triton']}", f"numpy{_PIN['numpy-cpu']}"]
# module -> package. pytest below 9: pytest-xdist 3.8 groups tests by a suffix to the node id that
# pytest 9 no longer reads, so `make test` would build each shared fixture on every worker.
LIGHT = {"jinja2": "jinja2", "rich": "rich", "pytest": "pytest>=8.1,<9", "numpy": "numpy"}
# Only `batch` and `make bench` need these (dask's distributed brings PyYAML, for Gradescope's metadata, and psutil);
# copydetect is the batch's similarity review (without it the batch says the review was skipped);
# pytest-xdist lets `make test` grade on two cores at once; FastAPI, uvicorn and python-multipart are the
# submission service's (`serve`), websocket-client its browser test's (Chromium's DevTools protocol). A GPU image
# without them and without a network still grades: `make grade` and `make test` go on without (the tests then
# run one at a time; the service's skip, saying why).
OPTIONAL = {"distributed": "dask[distributed]", "pytest_benchmark": "pytest-benchmark", "xdist": "pytest-xdist",
            "copydetect": "copydetect==0.5.0", "fastapi": "fastapi", "uvicorn": "uvicorn",
            "python_multipart": "python-multipart", "websocket": "websocket-client"}


# What a grading's processes import (the `grade` or batch process, a batch's workers, a child): on a
# GPU image, the packages they import from the image are byte-compiled once, by reused_packages.
GRADING_IMPORTS = ["torch", "triton", "numpy", "grader.grading", "grader.course.batch", "grader.reporting.report"]


def venv_python() -> Path:
    return VENV / "bin" / "python"


def run(*command: str) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def missing_modules(python: Path, modules: list[str]) -> list[str]:
    probe = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if not importlib.util.find_spec(m)))"
    return run(str(python), "-c", probe, *modules).split()


def reused_packages(python: Path, roots: list[str], modules: list[str] = GRADING_IMPORTS) -> list[Path]:
    """The package folders (and single-file modules) under `roots`, the reused site-packages, that
    `python` loads when it imports `modules` (a module that does not import is passed over)."""
    probe = ("import importlib, sys\n"
             "for name in sys.argv[1:]:\n"
             "    try: importlib.import_module(name)\n"
             "    except Exception: pass\n"
             "print('\\n'.join(m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None)))")  # fmt: skip
    found: set[Path] = set()
    for line in run(str(python), "-c", probe, *modules).splitlines():
        path = Path(line)
        for root in map(Path, roots):
            if path.is_relative_to(root) and path != root:
                found.add(root / path.relative_to(root).parts[0])
    return sorted(found)


def lacks_bytecode(python: Path, modules: list[str]) -> bool:
    """Whether the package of the first of `modules` that `python` finds (torch) has no bytecode
    cache for its `__init__`: an installation with none (pip writes it for every module). Cheap,
    so that a set-up where all is compiled (a student bundle's, the Gradescope image's) imports nothing."""
    probe = ("import importlib.util as u, os, sys\n"
             "for name in sys.argv[1:]:\n"
             "    spec = u.find_spec(name.partition('.')[0])\n"
             "    if spec and spec.origin and spec.origin.endswith('.py'):\n"
             "        print(int(not os.path.exists(u.cache_from_source(spec.origin)))); break")  # fmt: skip
    return run(str(python), "-c", probe, *modules) == "1"


def byte_compile_reused(python: Path, roots: list[str], modules: list[str] = GRADING_IMPORTS) -> list[Path]:
    """Byte-compile, in place, the reused packages that a grading imports, where this user may write
    there; returns those it could not. An image may ship them without their bytecode cache and set
    PYTHONDONTWRITEBYTECODE, so that every process compiles them again: on an H100 machine's image
    (torch 2.11, 2,141 modules, no .pyc) `import torch, triton` took 4.3 s of each child's start, and
    2.5 s once compiled; twelve at once, 6.5 s and 3.3 s (2026-11-26)."""
    if not lacks_bytecode(python, modules):
        return []
    folders = reused_packages(python, roots, modules)
    writable = [f for f in folders if os.access(f if f.is_dir() else f.parent, os.W_OK)]
    if writable:
        subprocess.run([str(python), "-m", "compileall", "-qq", "-j", "0", *map(str, writable)], check=False)
    return [f for f in folders if f not in writable]


def main() -> int:
    reuse = all(importlib.util.find_spec(m) for m in ("torch", "triton"))
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    python = venv_python()
    purelib = Path(run(str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"))
    # The venv sees the grader package alone (not solutions/ or starter/), wherever it is started.
    link_dir = VENV / "grader-path"
    link_dir.mkdir(exist_ok=True)
    link = link_dir / "grader"
    if not link.is_symlink():
        link.symlink_to(ROOT / "grader", target_is_directory=True)
    lines = [str(link_dir)] + (site.getsitepackages() if reuse else [])
    (purelib / "kernel-grader.pth").write_text("\n".join(lines) + "\n")
    wanted = [] if reuse else list(CPU_STACK)
    wanted += [LIGHT[m] for m in missing_modules(python, list(LIGHT))]
    # pip byte-compiles what it installs one file after another; compileall does it on every core
    # at once (torch's 2,300 modules: 41 s of set-up became 35 s on the 2-core machine, 2026-11-26).
    install = [str(python), "-m", "pip", "install", "--quiet", "--no-compile"]
    if wanted:
        print(f"installing into .venv: {' '.join(wanted)}", flush=True)
        subprocess.run([*install, *wanted], check=True)
    optional = [OPTIONAL[m] for m in missing_modules(python, list(OPTIONAL))]
    for package in optional:  # one at a time: a package the network cannot bring costs only what needs it
        if subprocess.run([*install, package]).returncode != 0:
            print(f"note: could not install {package}; the grader works without it (only what needs it is skipped)",
                  flush=True)  # fmt: skip
    # The grader's own modules too: every grading process and child imports them, and where the
    # environment sets PYTHONDONTWRITEBYTECODE (or a child's read-only sandbox) nothing would cache
    # them (about 0.25 s of each `grade` on the 2-core machine). A later edit makes a file's cache stale,
    # and Python compiles that file as it would without one. Not checked: a file that does not
    # compile is left to Python, as pip leaves it.
    folders = [str(purelib)] if wanted or optional else []
    subprocess.run([str(python), "-m", "compileall", "-qq", "-j", "0", *folders, str(ROOT / "grader")], check=False)
    if reuse:
        unwritable = byte_compile_reused(python, site.getsitepackages())
        if unwritable:
            names = ", ".join(f.name for f in unwritable)
            print(f"note: cannot byte-compile {names} (not writable here): each grading process compiles what it imports",
                  flush=True)  # fmt: skip
    origin = "the system's torch and Triton" if reuse else "torch (CPU build) and Triton from PyPI"
    versions = run(str(python), "-c", "import torch, triton; print(torch.__version__, triton.__version__)")
    print(f".venv ready with {origin}: torch {versions.split()[0]}, triton {versions.split()[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
