"""An upload, through the batch's own intake: the archive is unpacked as hostile input
(grader/course/archives.py: bombs, links, paths out, caps) by intake.collect, exactly as `batch`
unpacks a student's archive, and hashed per assignment as `batch` hashes it.

Each upload gets a folder of its own under `<out>/.service/uploads/`, named at random: the archive
as received (`in/<student>.zip`; intake reads the format from its bytes, whatever it is called)
and what intake unpacked (`unpacked/`). A refused upload's folder is removed.

The unpacking and hashing run in a process of their own (`Intake`), at a lower priority: in the
server's process they held the GIL while a class uploaded, and the pages that students were
reading waited behind them (docs/measurements.md, "Pages of the submission service under load").
"""

from __future__ import annotations

import multiprocessing
import os
import secrets
import shutil
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from grader.course import intake
from grader.course.batch import OUTPUT_NAMES

FOLDER = ".service/uploads"  # under --out, beside the batch's `.unpacked`
INTAKE_NICENESS = 5  # the intake's processes yield the CPU to the server's pages


class Refused(ValueError):
    """An upload that cannot be graded; the message says why, in words for the student."""


@dataclass(frozen=True)
class Upload:
    folder: Path  # the upload's own folder (removed if the queue refuses it)
    root: Path  # laid out like starter/
    hashes: dict[str, str]  # assignment -> the hash `batch` gives that assignment's folder


class Intake:
    """Uploads unpacked in `workers` processes of their own (spawned: the server's process has
    threads, which a fork would copy mid-step), each at INTAKE_NICENESS, each ending when the
    server's process does, however it ends (`kill -9` included)."""

    def __init__(self, workers: int = 2):
        self.workers = workers
        self.pool = self._pool()

    def _pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_intake_process, initargs=(os.getpid(),))  # fmt: skip

    def receive(self, archive: BinaryIO, student: str, out: Path, requested: list[str], known: list[str]) -> Upload:
        """Unpack `archive` for `student` and hash the assignments to grade: those `requested`, or
        where none are, those whose folders the upload holds. Blocking: call it in a thread. A
        process that died unpacking (killed, out of memory) costs that upload alone: Refused, and
        the processes are started again for the next."""
        folder = _stage(archive, student, out, requested, known)
        pool = self.pool
        try:
            return pool.submit(_unpack, folder, student, requested, known).result()
        except BrokenProcessPool:
            shutil.rmtree(folder, ignore_errors=True)
            if self.pool is pool:
                self.pool = self._pool()
            raise Refused("the server could not unpack this upload; try again, and if it fails again, "
                          "tell your course staff") from None

    def close(self) -> None:
        self.pool.shutdown(cancel_futures=True)


def _intake_process(server: int) -> None:
    """An intake process's start: a lower priority, and a watch on the server's process (a parent
    death signal would come with the end of the thread that started it, not of the process)."""
    os.nice(INTAKE_NICENESS)

    def watch() -> None:
        while os.getppid() == server:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="server-watch").start()


def _stage(archive: BinaryIO, student: str, out: Path, requested: list[str], known: list[str]) -> Path:
    """The upload's own folder, with the archive as received in it."""
    if unknown := [name for name in requested if name not in known]:
        raise Refused(f"no such assignment: {', '.join(unknown)} (known: {', '.join(known)})")
    folder = out / FOLDER / secrets.token_hex(12)
    (folder / "in").mkdir(parents=True)
    try:
        with (folder / "in" / f"{student}.zip").open("wb") as file:
            shutil.copyfileobj(archive, file, 1 << 20)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def _unpack(folder: Path, student: str, requested: list[str], known: list[str]) -> Upload:
    try:
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
