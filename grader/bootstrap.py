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
import site
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
# The pinned CPU stack (grader/stack.toml, read as grader/stack.py does: nothing but the standard
# library is installed yet). Triton is the GPU image's own version.
_PIN = tomllib.loads((ROOT / "grader" / "stack.toml").read_text())
CPU_STACK = [f"torch=={_PIN['torch-cpu']}", f"triton=={_PIN['triton']}", f"numpy{_PIN['numpy-cpu']}"]
# module -> package. pytest below 9: pytest-xdist 3.8 groups tests by a suffix to the node id that
# pytest 9 no longer reads, so `make test` would build each shared fixture on every worker.
LIGHT = {"jinja2": "jinja2", "rich": "rich", "pytest": "pytest>=8.1,<9", "numpy": "numpy"}
# Only `batch` and `make bench` need these (dask's distributed brings PyYAML, for Gradescope's metadata, and psutil);
# pytest-xdist lets `make test` grade on two cores at once. A GPU image without them and without a network
# still grades: `make grade` and `make test` go on without (the tests then run one at a time).
OPTIONAL = {"distributed": "dask[distributed]", "pytest_benchmark": "pytest-benchmark", "xdist": "pytest-xdist"}


def venv_python() -> Path:
    return VENV / "bin" / "python"


def run(*command: str) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def missing_modules(python: Path, modules: list[str]) -> list[str]:
    probe = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if not importlib.util.find_spec(m)))"
    return run(str(python), "-c", probe, *modules).split()


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
    if optional and subprocess.run([*install, *optional]).returncode != 0:
        print(f"note: could not install {' '.join(optional)}; everything but `batch` works without it", flush=True)
    # The grader's own modules too: every grading process and child imports them, and where the
    # environment sets PYTHONDONTWRITEBYTECODE (or a child's read-only sandbox) nothing would cache
    # them (about 0.25 s of each `grade` on the 2-core machine). A later edit makes a file's cache stale,
    # and Python compiles that file as it would without one. Not checked: a file that does not
    # compile is left to Python, as pip leaves it.
    folders = [str(purelib)] if wanted or optional else []
    subprocess.run([str(python), "-m", "compileall", "-qq", "-j", "0", *folders, str(ROOT / "grader")], check=False)
    origin = "the system's torch and Triton" if reuse else "torch (CPU build) and Triton from PyPI"
    versions = run(str(python), "-c", "import torch, triton; print(torch.__version__, triton.__version__)")
    print(f".venv ready with {origin}: torch {versions.split()[0]}, triton {versions.split()[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
