"""The queue: a row per (upload, assignment) in the gradebook, so that `kill -9` loses nothing.

An upload is accepted once its rows are committed, and only then answered. The dispatcher moves a
row from `queued` to `grading` as it hands it to a worker, and to `graded` once its grade is in the
gradebook's `grades` table (that table's own transaction, then this one): a server killed between
the two finds the row `grading` on restart, puts it back in the queue (`requeue_interrupted`), and
the grade already stored is taken as it is, not graded again. A student has one row grading at a
time, the earliest of theirs first, so their submissions are graded in the order they were made.
The rate limit counts a student's rows per assignment over the last hour, in the transaction that
adds the new ones, so two uploads at once cannot both slip under it.
"""

from __future__ import annotations

import contextlib
import secrets
import sqlite3
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from grader.course.gradebook import Gradebook

STATES = ("queued", "grading", "graded", "failed")
SCHEMA = """
CREATE TABLE IF NOT EXISTS submissions (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,  -- the queue's order
    id              TEXT NOT NULL UNIQUE,               -- what addresses name: random, so never guessed
    student         TEXT NOT NULL,
    assignment      TEXT NOT NULL,
    folder          TEXT NOT NULL,                      -- the upload as intake unpacked it, laid out like starter/
    submission_hash TEXT NOT NULL,                      -- with grader_version, the grade's key in `grades`
    grader_version  TEXT NOT NULL,
    state           TEXT NOT NULL,                      -- queued | grading | graded | failed
    submitted_at    TEXT NOT NULL,                      -- the server's clock, UTC, ISO 8601
    started_at      TEXT,
    finished_at     TEXT,
    attempts        INTEGER NOT NULL DEFAULT 0,         -- times the dispatcher handed it to a worker
    device          TEXT,                               -- the tier its grade is of
    graded_by       TEXT NOT NULL DEFAULT '',           -- host:pid of the worker process that graded it
    problem         TEXT NOT NULL DEFAULT ''            -- why it failed
);
CREATE INDEX IF NOT EXISTS submissions_by_state ON submissions (state, seq);
CREATE INDEX IF NOT EXISTS submissions_by_student ON submissions (student, assignment, submitted_at);
"""
WRITES = threading.Lock()  # the server's writers of the gradebook, one at a time
COLUMNS = ("seq", "id", "student", "assignment", "folder", "submission_hash", "grader_version", "state",
           "submitted_at", "started_at", "finished_at", "attempts", "device", "graded_by", "problem")  # fmt: skip


@dataclass(frozen=True)
class Row:
    seq: int
    id: str
    student: str
    assignment: str
    folder: str
    submission_hash: str
    grader_version: str
    state: str
    submitted_at: str
    started_at: str | None
    finished_at: str | None
    attempts: int
    device: str | None
    graded_by: str
    problem: str

    @property
    def submitted(self) -> datetime:
        return datetime.fromisoformat(self.submitted_at)


@dataclass(frozen=True)
class Limited:
    """The rate limit refused an upload: which assignment, and in how many seconds one more is allowed."""

    assignment: str
    retry_after: int


def now() -> datetime:
    return datetime.now(timezone.utc)


def stamp(when: datetime) -> str:
    return when.astimezone(timezone.utc).isoformat(timespec="microseconds")


def create(path: Path) -> None:
    """The gradebook's tables, made if new (`grades` as the batch makes it), and its journal set to
    write-ahead: a page reads while the dispatcher or an upload writes, neither waiting for the other.
    The WAL needs the processes that write the gradebook on one machine (docs/staff.md says so)."""
    Gradebook(path).close()
    with contextlib.closing(connect(path)) as db:
        db.executescript(SCHEMA)
        db.execute("PRAGMA journal_mode=WAL")


def connect(path: Path) -> sqlite3.Connection:
    """A connection of its own (one per request or thread). Autocommit: each change below is one
    explicit transaction, taken under WRITES in this process (no thread sleeps in SQLite's busy
    handler for another thread of the server)."""
    return sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)


def _rows(cursor) -> list[Row]:
    return [Row(*found) for found in cursor.fetchall()]


def accept(db: sqlite3.Connection, student: str, uploads: dict[str, tuple[str, str]], version: str,
           per_hour: int, when: datetime) -> list[Row] | Limited:  # fmt: skip
    """Queue one row per assignment of `uploads` (assignment -> (folder, hash)), or none if the rate
    limit refuses any of them."""
    since = stamp(when - timedelta(hours=1))
    with _immediate(db):  # taken before counting: no other upload counts or adds meanwhile
        for assignment in uploads:
            recent = [row[0] for row in db.execute(
                "SELECT submitted_at FROM submissions WHERE student = ? AND assignment = ? AND submitted_at > ? "
                "ORDER BY submitted_at", (student, assignment, since))]  # fmt: skip
            if len(recent) >= per_hour:
                freed = datetime.fromisoformat(recent[len(recent) - per_hour]) + timedelta(hours=1)
                return Limited(assignment, max(1, int((freed - when).total_seconds()) + 1))
        ids = []
        for assignment, (folder, digest) in uploads.items():
            ids.append(secrets.token_hex(12))
            db.execute("INSERT INTO submissions (id, student, assignment, folder, submission_hash, grader_version, "
                       "state, submitted_at) VALUES (?, ?, ?, ?, ?, ?, 'queued', ?)",
                       (ids[-1], student, assignment, folder, digest, version, stamp(when)))  # fmt: skip
    return [found for id in ids if (found := get(db, id)) is not None]


@contextlib.contextmanager
def _immediate(db: sqlite3.Connection):
    """One transaction that holds the write lock from its start; committed unless an exception
    leaves it (a `return` inside commits what was written, here nothing)."""
    with WRITES:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")


def get(db: sqlite3.Connection, id: str) -> Row | None:
    found = _rows(db.execute(f"SELECT {', '.join(COLUMNS)} FROM submissions WHERE id = ?", (id,)))
    return found[0] if found else None


def of_student(db: sqlite3.Connection, student: str) -> list[Row]:
    """The student's rows, newest first."""
    return _rows(db.execute(f"SELECT {', '.join(COLUMNS)} FROM submissions WHERE student = ? ORDER BY seq DESC",
                            (student,)))  # fmt: skip


def in_state(db: sqlite3.Connection, *states: str) -> list[Row]:
    marks = ", ".join("?" for _ in states)
    return _rows(db.execute(f"SELECT {', '.join(COLUMNS)} FROM submissions WHERE state IN ({marks}) ORDER BY seq",
                            states))  # fmt: skip


def position(db: sqlite3.Connection, row: Row) -> int:
    """1 for the next row to be graded, counting the queued rows ahead; 0 unless `row` is queued."""
    if row.state != "queued":
        return 0
    ahead = db.execute("SELECT COUNT(*) FROM submissions WHERE state = 'queued' AND seq < ?", (row.seq,)).fetchone()
    return ahead[0] + 1


def claim(db: sqlite3.Connection, free: int, when: datetime) -> list[Row]:
    """Up to `free` queued rows to grade now, oldest first, at most one per student and none of a
    student who has one grading; each marked `grading` (and its attempt counted) before it is returned."""
    if free <= 0:
        return []
    with _immediate(db):
        busy = {row[0] for row in db.execute("SELECT student FROM submissions WHERE state = 'grading'")}
        chosen = []
        for row in _rows(db.execute(f"SELECT {', '.join(COLUMNS)} FROM submissions WHERE state = 'queued' ORDER BY seq")):
            if row.student not in busy and len(chosen) < free:
                busy.add(row.student)
                chosen.append(row.id)
        for id in chosen:
            db.execute("UPDATE submissions SET state = 'grading', started_at = ?, attempts = attempts + 1 WHERE id = ?",
                       (stamp(when), id))  # fmt: skip
    return [found for id in chosen if (found := get(db, id)) is not None]


def finish(db: sqlite3.Connection, id: str, device: str, graded_by: str, when: datetime) -> None:
    with WRITES:
        db.execute("UPDATE submissions SET state = 'graded', finished_at = ?, device = ?, graded_by = ? "
                   "WHERE id = ? AND state = 'grading'", (stamp(when), device, graded_by, id))  # fmt: skip


def fail(db: sqlite3.Connection, id: str, problem: str, when: datetime) -> None:
    with WRITES:
        db.execute("UPDATE submissions SET state = 'failed', finished_at = ?, problem = ? WHERE id = ? AND state = 'grading'",
                   (stamp(when), problem, id))  # fmt: skip


def requeue_interrupted(db: sqlite3.Connection) -> int:
    """Rows left `grading` by a server that stopped (or was killed) go back in the queue, in their
    place: what their grading recorded, if it got that far, is found in the gradebook and kept."""
    with WRITES:
        return db.execute("UPDATE submissions SET state = 'queued', started_at = NULL WHERE state = 'grading'").rowcount


def load(db: sqlite3.Connection, when: datetime) -> dict:
    """What the class page says of the queue: rows per state, the oldest wait, the last hour's gradings."""
    counts = dict.fromkeys(STATES, 0) | dict(db.execute("SELECT state, COUNT(*) FROM submissions GROUP BY state").fetchall())
    oldest = db.execute("SELECT MIN(submitted_at) FROM submissions WHERE state = 'queued'").fetchone()[0]
    hour = [(datetime.fromisoformat(a), datetime.fromisoformat(b), datetime.fromisoformat(c)) for a, b, c in db.execute(
        "SELECT submitted_at, started_at, finished_at FROM submissions WHERE state = 'graded' AND finished_at > ?",
        (stamp(when - timedelta(hours=1)),))]  # fmt: skip
    waits = sorted((started - submitted).total_seconds() for submitted, started, _ in hour)
    gradings = sorted((finished - started).total_seconds() for _, started, finished in hour)
    return {**counts, "oldest_wait_s": (when - datetime.fromisoformat(oldest)).total_seconds() if oldest else 0.0,
            "graded_last_hour": len(hour), "median_wait_s": waits[len(waits) // 2] if waits else 0.0,
            "median_grading_s": gradings[len(gradings) // 2] if gradings else 0.0}  # fmt: skip
