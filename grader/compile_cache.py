"""Triton's cache of one submission, kept between gradings of the very same files.

Every child of one grading (the correctness child, the timing child) shares one Triton cache,
autotuning results included (TRITON_CACHE_AUTOTUNING), and torch.compile's cache for the
baselines a report shows: what one child compiled and autotuned, the next loads. Where a grading
is given a root (`grade` and `batch` use CACHE_ROOT), that cache outlives the grading, in a folder
of its own per (owner, assignment, submission files, grader version): a second grading of the
same files, by `make grade` again or a batch's `--regrade`, compiles and autotunes nothing.

Why per submission, and never shared: a shared cache would let one submission plant a binary
under the key of another's kernel (a verbatim tutorial's, say). Here what a student's code plants
reaches only later children graded from the very files that planted it, which a TA reads in
full; every timed output is still checked against torch. A change to any file, or to the grader,
starts an empty folder, and the owner's older folders for that assignment are removed with it,
so there is one folder per owner and assignment. The folder is bound into that grading's sandbox
alone, and its size counts against the assignment's `scratch_gib` (limits.Watchdog).

The autotuner's picks are kept too, a timing child's apart from a correctness child's
(child/timed_picks.py): a warm grading times the configs a cold one's timed phase picked. That is
what makes the two gradings' speed ratios agree (docs/measurements.md).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import grader
from grader.isolation import graded_files

# Absolute: the sandbox binds it by path, and a relative XDG_CACHE_HOME would name another folder
# (or none) wherever a worker or a child stands.
CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").absolute() / "kernel-grader" / "compiled"


def files_digest(folder: Path) -> str:
    """A digest of a submission's assignment folder: every file the grader uses, by relative path."""
    digest = hashlib.sha256()
    for path in graded_files(folder):
        name = str(path.relative_to(folder)).encode()
        digest.update(len(name).to_bytes(4, "little") + name + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def folder_for(root: Path, owner: str, assignment: str, submission: Path) -> Path:
    """The cache folder of `owner`'s files for `assignment` (made, private to this user), after
    removing the owner's folders of other files. `owner` is whoever the files belong to: a
    student's name in a batch, the submission's path for `grade`."""
    mine = root / hashlib.sha256(owner.encode()).hexdigest()[:24] / assignment
    mine.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = hashlib.sha256(f"{grader.__version__}|{files_digest(submission)}".encode()).hexdigest()[:32]
    for stale in mine.iterdir():
        if stale.name != key:
            shutil.rmtree(stale, ignore_errors=True)
    found = mine / key
    found.mkdir(mode=0o700, exist_ok=True)
    return found


def is_warm(folder: Path) -> bool:
    """Whether an earlier grading left compiled kernels here."""
    return folder.is_dir() and any(folder.iterdir())
