"""An upload, through the batch's own intake: the archive is unpacked as hostile input
(grader/course/archives.py: bombs, links, paths out, caps) by intake.collect, exactly as `batch`
unpacks a student's archive, and hashed per assignment as `batch` hashes it.

Each upload gets a folder of its own under `<out>/.service/uploads/`, named at random: the archive
as received (`in/<student>.zip`; intake reads the format from its bytes, whatever it is called)
and what intake unpacked (`unpacked/`). A refused upload's folder is removed.
"""

from __future__ import annotations

import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from grader.course import intake
from grader.course.batch import OUTPUT_NAMES

FOLDER = ".service/uploads"  # under --out, beside the batch's `.unpacked`


class Refused(ValueError):
    """An upload that cannot be graded; the message says why, in words for the student."""


@dataclass(frozen=True)
class Upload:
    folder: Path  # the upload's own folder (removed if the queue refuses it)
    root: Path  # laid out like starter/
    hashes: dict[str, str]  # assignment -> the hash `batch` gives that assignment's folder


def receive(archive: BinaryIO, student: str, out: Path, requested: list[str], known: list[str]) -> Upload:
    """Unpack `archive` for `student` and hash the assignments to grade: those `requested`, or
    where none are, those whose folders the upload holds."""
    if unknown := [name for name in requested if name not in known]:
        raise Refused(f"no such assignment: {', '.join(unknown)} (known: {', '.join(known)})")
    folder = out / FOLDER / secrets.token_hex(12)
    (folder / "in").mkdir(parents=True)
    try:
        with (folder / "in" / f"{student}.zip").open("wb") as file:
            shutil.copyfileobj(archive, file, 1 << 20)
        [submission] = intake.collect(folder / "in", folder / "unpacked", known, OUTPUT_NAMES)
        if submission.folder is None:
            raise Refused(submission.problem.replace(f"{student}.zip", "the upload"))
        chosen = requested or [name for name in known if (submission.folder / name).is_dir()]
        if not chosen:
            raise Refused(f"the upload holds no assignment folder; lay it out like starter/ "
                          f"(a folder per assignment: {', '.join(known)})")  # fmt: skip
        return Upload(folder, submission.folder, {name: submission.content_hash(name) for name in chosen})
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
