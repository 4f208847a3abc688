"""The student bundle: `python -m grader release --out DIR`.

What students get: the handouts and grading data (assignments/), the stubs (starter/), the grader
itself, the documentation (README and docs/, which the README points to), the Makefile, and the tests that check the grader without any solution. What
they never get: solutions/, the known-wrong submissions under tests/ (each is a solution with one
bug), the tests that grade those, and any salt (the batch salt lives outside the repository).
The bundle is marked by RELEASE.json, so that its own tests know solutions/ is absent on purpose.

A test module ships when it says so itself, `pytestmark = pytest.mark.student` (or that mark in a
`pytestmark` list): whoever writes a test decides, next to the imports that show whether it needs
solutions/, and no list here goes stale.
"""

from __future__ import annotations

import ast
import json
import shutil
from datetime import date
from pathlib import Path

from grader import __version__
from grader.running.submission_files import graded_files
from grader.assignment.loading import assignment_names
from grader.assignment.spec import REPO_ROOT

MARKER = "RELEASE.json"
TOP = ("assignments", "starter", "grader", "docs", "Makefile", "README.md", "pyproject.toml", ".gitignore")
STUDENT_MARK = "pytest.mark.student"  # registered in pyproject.toml
SUPPORT = ("conftest.py",)  # the fixtures every shipped test uses


class ReleaseError(Exception):
    pass


def _copy(source: Path, destination: Path) -> None:
    files = graded_files(source) if source.is_dir() else [source]
    for file in files:
        target = destination / file.relative_to(REPO_ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, target)


def is_student_test(path: Path) -> bool:
    """Whether a module's own `pytestmark` holds the student mark. Read from the source, never
    imported: importing runs a test module's top level (torch, nvcc probes, skips) in the process
    that builds the bundle, and a module that fails to import would silently not ship."""
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            marks = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            return any(ast.unparse(mark) == STUDENT_MARK for mark in marks)
    return False


def student_tests(tests: Path = REPO_ROOT / "tests") -> list[Path]:
    """The files of `tests` that ship: the support files, then each module marked for students."""
    marked = [path for path in sorted(tests.glob("*.py")) if path.name not in SUPPORT and is_student_test(path)]
    return [tests / name for name in SUPPORT] + marked


def build(out: Path) -> list[Path]:
    """Write the bundle into `out` (which must not exist or be empty); returns its files."""
    if out.exists() and any(out.iterdir()):
        raise ReleaseError(f"--out {out}: not empty; the bundle goes into a new folder")
    out.mkdir(parents=True, exist_ok=True)
    for name in TOP:
        if (REPO_ROOT / name).exists():
            _copy(REPO_ROOT / name, out)
    for path in student_tests():
        _copy(path, out)
    manifest = {"grader_version": __version__, "built": date.today().isoformat(), "assignments": assignment_names()}
    (out / MARKER).write_text(json.dumps(manifest, indent=2) + "\n")
    return sorted(p for p in out.rglob("*") if p.is_file())
