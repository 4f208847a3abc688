"""The student bundle: `python -m grader release --out DIR`.

What students get: the handouts and grading data (assignments/), the stubs (starter/), the grader
itself, the Makefile and README, and the tests that check the grader without any solution. What
they never get: solutions/, the known-wrong submissions under tests/ (each is a solution with one
bug), the tests that grade those, and any salt (the batch salt lives outside the repository).
The bundle is marked by RELEASE.json, so that its own tests know solutions/ is absent on purpose.
"""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path

from grader import __version__
from grader.isolation import graded_files
from grader.spec import REPO_ROOT, assignment_names

MARKER = "RELEASE.json"
TOP = ("assignments", "starter", "grader", "Makefile", "README.md", "pyproject.toml", ".gitignore")
# Tests that need neither solutions/ nor tests/submissions/.
STUDENT_TESTS = (
    "conftest.py",
    "test_spec.py",
    "test_layout.py",
    "test_numerics.py",
    "test_strength.py",
    "test_scoring.py",
    "test_fusion.py",
    "test_report.py",
    "test_cuda_build.py",
    "bench_kernels.py",  # `make bench`
)


class ReleaseError(Exception):
    pass


def _copy(source: Path, destination: Path) -> None:
    files = graded_files(source) if source.is_dir() else [source]
    for file in files:
        target = destination / file.relative_to(REPO_ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, target)


def build(out: Path) -> list[Path]:
    """Write the bundle into `out` (which must not exist or be empty); returns its files."""
    if out.exists() and any(out.iterdir()):
        raise ReleaseError(f"--out {out}: not empty; the bundle goes into a new folder")
    out.mkdir(parents=True, exist_ok=True)
    for name in TOP:
        if (REPO_ROOT / name).exists():
            _copy(REPO_ROOT / name, out)
    for name in STUDENT_TESTS:
        _copy(REPO_ROOT / "tests" / name, out)
    manifest = {"grader_version": __version__, "built": date.today().isoformat(), "assignments": assignment_names()}
    (out / MARKER).write_text(json.dumps(manifest, indent=2) + "\n")
    return sorted(p for p in out.rglob("*") if p.is_file())
