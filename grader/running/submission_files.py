"""The files of a submission that a grading reads: links are never followed, Python's caches are
left out, and a copy opens each file without following a link.

Everything that reads a submission's files goes through here: the copy each grading makes
(grading.py), the compile cache's key (compile_cache.py), the intake of a class (course/intake.py),
the similarity review, the release bundle and the Gradescope zip.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Iterator


def graded_files(folder: Path) -> Iterator[Path]:
    """The files of a submission folder that the grader uses, in sorted order: links are skipped,
    never followed (one could point at solutions/, or at a classmate's folder), the folder itself
    included, and so are Python's caches."""
    if folder.is_symlink() or not folder.is_dir():
        return
    for entry in sorted(folder.iterdir()):
        if entry.is_symlink() or entry.name == "__pycache__":
            continue
        if entry.is_dir():
            yield from graded_files(entry)
        elif entry.is_file():
            yield entry


def links_in(folder: Path) -> list[str]:
    """The links a copy of `folder` leaves out, by path relative to its parent (the folder's own
    name first where it is one): what a student reads when the grader finds no file there."""
    if folder.is_symlink():
        return [folder.name]
    if not folder.is_dir():
        return []
    found = []
    for root, dirs, files in os.walk(folder):
        found += [str(Path(root, name).relative_to(folder.parent)) for name in dirs + files
                  if Path(root, name).is_symlink()]  # fmt: skip
    return sorted(found)


def copy_submission(source: Path, destination: Path) -> None:
    """Copy one assignment folder of a submission: its graded files and nothing else. Each file is
    opened without following a link, so one swapped in after the listing is not copied either."""
    destination.mkdir(parents=True, exist_ok=True)
    for path in graded_files(source):
        target = destination / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue  # a link (ELOOP) or gone: not copied
        with open(fd, "rb") as file:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                with open(target, "wb") as copy:
                    shutil.copyfileobj(file, copy)
