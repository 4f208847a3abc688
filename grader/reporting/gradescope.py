"""Gradescope: the autograder zip (`python -m grader gradescope --out autograder.zip`) and what
its `run_autograder` does for each submission.

Gradescope unpacks the zip into /autograder/source, runs `setup.sh` once to build the image, then
`run_autograder` per submission, with the student's files in /autograder/submission; it reads
/autograder/results/results.json. Students upload either the folders of starter/ or the bare
files named as in starter/: every graded file name is unique across assignments, so
either layout is put back in place before grading. Speed is graded only where the image has a GPU.
"""

from __future__ import annotations

import shutil
import stat
import sys
import tempfile
import zipfile
from pathlib import Path

from grader.running import stack
from grader.running.environment import resolve_device
from grader.grading import Settings, grade_submission
from grader.running.submission_files import graded_files
from grader.reporting.report import write_html
from grader.reporting.results import summary_line
from grader.reporting.results_json import write_json
from grader.assignment.loading import load_assignments
from grader.assignment.spec import REPO_ROOT, Assignment

# What the autograder needs: the grader and the assignments' data, never solutions/ or tests/.
SOURCES = ("grader", "assignments", "pyproject.toml")

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, to build the autograder image.
set -euo pipefail
cd /autograder/source
apt-get update -q
apt-get install -y -q python3 python3-venv python3-pip bubblewrap
# torch's CPU build first, so that nothing pulls the multi-gigabyte CUDA build; the grader's
# own set-up then reuses it and adds the rest. The versions are the repository's pinned stack.
python3 -m pip install -q --break-system-packages --index-url https://download.pytorch.org/whl/cpu {torch} \\
  || python3 -m pip install -q --index-url https://download.pytorch.org/whl/cpu {torch}
python3 -m pip install -q --break-system-packages {rest} || python3 -m pip install -q {rest}
python3 grader/bootstrap.py
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission; AUTOGRADER_ROOT and PYTHON exist for testing it.
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
cd "$ROOT/source"
exec "${PYTHON:-.venv/bin/python}" -m grader.reporting.gradescope "$ROOT"
"""


def build_zip(out: Path) -> list[str]:
    """Write the autograder zip; returns the names it holds."""
    out.parent.mkdir(parents=True, exist_ok=True)
    names = []
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        torch, *rest = stack.cpu_requirements()
        setup = SETUP_SH.format(torch=torch, rest=" ".join(f"'{r}'" for r in rest))
        for name, text in (("setup.sh", setup), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | 0o755) << 16  # executable once unpacked
            archive.writestr(info, text)
            names.append(name)
        for source in SOURCES:
            path = REPO_ROOT / source
            for file in graded_files(path) if path.is_dir() else [path]:
                name = file.relative_to(REPO_ROOT).as_posix()
                archive.write(file, name)
                names.append(name)
    return names


def arrange(upload: Path, assignments: list[Assignment], destination: Path) -> Path:
    """Lay out an upload like starter/: `<assignment>/<file>`, from folders or bare files."""
    by_name: dict[str, list[Path]] = {}
    for file in graded_files(upload):
        by_name.setdefault(file.name, []).append(file)
    for assignment in assignments:
        for file_name in {part.file for part in assignment.parts}:
            placed = upload / assignment.name / file_name
            found = [placed] if placed.is_file() and not placed.is_symlink() else by_name.get(file_name, [])
            if found:
                target = destination / assignment.name / file_name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(sorted(found, key=lambda p: len(p.parts))[0], target)
    return destination


def run(root: Path) -> int:
    """Grade /autograder/submission into /autograder/results/results.json."""
    assignments = load_assignments()
    results = root / "results"
    with tempfile.TemporaryDirectory(prefix="gradescope-") as scratch:
        submission = arrange(root / "submission", assignments, Path(scratch) / "submission")
        grade = grade_submission(submission, assignments, Settings(device=resolve_device("auto")))
    write_json(grade, results / "results.json")
    write_html(grade, results / "report.html")
    print(summary_line(grade))
    return 0


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/autograder")))
