"""Queued rows graded on the batch's Dask workers, and each grade recorded in the gradebook.

A thread of the server: it claims queued rows (queue.claim: at most one grading per student, no
more in flight than the cluster has worker threads, so the queue's order is the gradebook's and
not Dask's), hands each to a worker as `batch` does (batch.grade_task, the same child processes,
salt, sandbox and GPU lock), and records what comes back: the grade in `grades` (Gradebook.record,
the batch's own transaction), then the row `graded`. A worker killed mid-grading is Dask's to
handle: its nanny starts a new worker and the scheduler hands the task to a worker again, so the
submission is graded again, once; the grade records which worker process finished it. A row whose
grade the gradebook already holds (the same files graded before, or a restart after the grade was
stored) is not graded again. A fault of the grader itself fails the row, saying so.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from distributed import Client, Future, wait

from grader.assignment.spec import Assignment
from grader.course.batch import grade_task
from grader.course.gradebook import Gradebook, Key
from grader.service import queue

POLL_S = 0.25  # how often the dispatcher looks at the queue and its futures when nothing wakes it


def grade_on_worker(assignment: Assignment, folder: str, device: str, salt: str, student: str,
                    sandboxed: bool) -> tuple[list, dict, float, str]:  # fmt: skip
    """batch.grade_task on a worker, and which process ran it (host:pid)."""
    tests, environment, seconds = grade_task(assignment, folder, device, salt, student, sandboxed)
    return tests, environment, seconds, f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class Grading:
    """What the dispatcher grades with: the cluster and how its tasks are run."""

    client: Client
    device: str
    salt: str
    sandboxed: bool
    assignments: dict[str, Assignment]
    task: Callable = grade_on_worker  # tests of the service's load alone hand it a fake (tests/service_fake.py)


class Dispatcher(threading.Thread):
    def __init__(self, book_path: Path, grading: Grading):
        super().__init__(name="dispatcher", daemon=True)
        self.book_path, self.grading = book_path, grading
        self.running: dict[Future, queue.Row] = {}
        self.wake = threading.Event()  # set by an upload: look at the queue now
        self.stopping = threading.Event()
        self.failure = ""  # why the thread stopped, if it did on its own

    def run(self) -> None:
        db, book = queue.connect(self.book_path), Gradebook(self.book_path)
        try:
            while not self.stopping.is_set():
                self.start_ready(db, book)
                self.collect(db, book)
        except Exception as error:  # the page says so (app.health); the queue keeps every row
            self.failure = f"{type(error).__name__}: {error}"
            raise
        finally:
            db.close()
            book.close()

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()

    def capacity(self) -> int:
        return max(1, sum(self.grading.client.nthreads().values()))

    def start_ready(self, db: sqlite3.Connection, book: Gradebook) -> None:
        for row in queue.claim(db, self.capacity() - len(self.running), queue.now()):
            key = Key(row.student, row.assignment, row.submission_hash, row.grader_version)
            if (stored := book.lookup(key, self.grading.device)) is not None:
                queue.finish(db, row.id, stored.device, stored.environment.get("graded_by", "the gradebook"), queue.now())
                continue
            g = self.grading
            future = g.client.submit(g.task, g.assignments[row.assignment], row.folder, g.device, g.salt, row.student,
                                     g.sandboxed, pure=False, key=f"service-{row.id}-{row.attempts}")  # fmt: skip
            self.running[future] = row

    def collect(self, db: sqlite3.Connection, book: Gradebook) -> None:
        """Record what finished, waiting at most POLL_S (less where an upload wakes the thread)."""
        if not self.running:
            self.wake.wait(POLL_S)
            self.wake.clear()
            return
        try:
            done, _ = wait(list(self.running), timeout=POLL_S, return_when="FIRST_COMPLETED")
        except TimeoutError:
            return
        for future in done:
            self.record(db, book, future, self.running.pop(future))

    def record(self, db: sqlite3.Connection, book: Gradebook, future: Future, row: queue.Row) -> None:
        if future.status != "finished":
            error = future.exception() if future.status == "error" else "the task was cancelled"
            queue.fail(db, row.id, f"the grader failed (not your code; submit again): {type(error).__name__}: {error}",
                       queue.now())  # fmt: skip
            return
        tests, environment, seconds, graded_by = future.result()
        environment = {**environment, "graded_by": graded_by}
        key = Key(row.student, row.assignment, row.submission_hash, row.grader_version)
        with queue.WRITES:
            book.record(key, self.grading.device, tests, environment, seconds)  # its own transaction, first
        queue.finish(db, row.id, self.grading.device, graded_by, queue.now())
