"""The bytes of every case's right output, worked out once per machine and kept.

A grading caps what a child may send for each case at twice the size of the right output
(grading.AssignmentGrading.task), found on torch's "meta" device (cases.output_bytes). The first
arithmetic on that device imports torch's compiler modules: 1.2 s of CPU on the 2-core machine,
3.7 s on an H200 machine alone, where a batch's twelve workers had each done it at once, beside
their first children's imports of torch (2026-11-26). The sizes depend only on the assignment's
files, the grader and torch, so the first process that needs them works them out for every case
of the assignment and keeps them in a file under the grader's cache folder; the others (a
batch's other workers, which wait for that file rather than each work them out, or the next
`make grade`) read it (kept.py). What the file holds is checked all the same, and a file that
cannot be read or written costs only the import.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

import grader
from grader.assignment import cases
from grader.running.compile_cache import CACHE_ROOT
from grader.running.kept import kept
from grader.assignment.spec import Assignment, Case, Part

ROOT = CACHE_ROOT.parent / "output-sizes"

_known: dict[Path, dict[str, int]] = {}  # this process's, by file


def output_bytes(assignment: Assignment, part: Part, case: Case) -> int:
    """What cases.output_bytes gives, from the kept sizes where they are."""
    found = _sizes(assignment).get(case_name(part, case))
    return found if found is not None else cases.output_bytes(assignment, part, case)


def case_name(part: Part, case: Case) -> str:
    return f"{part.name} {case.dtype} {'x'.join(map(str, case.shape))} {case.layout}"


def depends_on(assignment: Assignment) -> str:
    """What a case's kept figures depend on: the assignment's files, the grader and torch."""
    digest = hashlib.sha256(f"{grader.__version__}|{torch.__version__}".encode())
    for path in sorted([*assignment.directory.rglob("*.py"), *assignment.directory.rglob("*.toml"),
                        Path(cases.__file__)]):  # fmt: skip
        digest.update(str(path.name).encode() + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:32]


def _file(assignment: Assignment) -> Path:
    """One file per assignment files, grader and torch: a change to any starts another."""
    return ROOT / f"{assignment.name}-{depends_on(assignment)}.json"


def _sizes(assignment: Assignment) -> dict[str, int]:
    path = _file(assignment)
    if path not in _known:
        _known[path] = kept(path, assignment.name, _read, lambda: _work_out(assignment), json.dumps)
    return _known[path]


def _read(path: Path) -> dict[str, int] | None:
    """The kept sizes; None where there are none, or where the file is not what this module writes."""
    try:
        sizes = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(sizes, dict) or not all(type(v) is int and v >= 0 for v in sizes.values()):
        return None
    return sizes


def _work_out(assignment: Assignment) -> dict[str, int]:
    return {case_name(part, case): cases.output_bytes(assignment, part, case)
            for part in assignment.parts for case in (*part.cases, *part.benchmarks)}  # fmt: skip
