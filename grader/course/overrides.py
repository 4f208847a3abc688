"""A TA's manual adjustments, kept in the gradebook beside the grades they adjust.

`python -m grader override --out DIR STUDENT ASSIGNMENT --points P --reason TEXT` sets the
assignment's points for that student to P, in place of what the tests gave (a late penalty, if
any, still applies to P). Every override is a row of its own, with its time and reason, and the
latest one for a (student, assignment) is in force: the history stays for whoever asks later.
Overrides live in a table of their own, which no grading writes, so a `--regrade` keeps them.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone

SCHEMA = """
CREATE TABLE IF NOT EXISTS overrides (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,  -- the order they were made in
    student     TEXT NOT NULL,
    assignment  TEXT NOT NULL,
    points      REAL NOT NULL,  -- the assignment's points for the student, before any late penalty
    reason      TEXT NOT NULL,
    made_at     TEXT NOT NULL   -- UTC, ISO 8601
)
"""


@dataclass(frozen=True)
class Override:
    student: str
    assignment: str
    points: float
    reason: str
    made_at: str


def ensure(connection: sqlite3.Connection) -> None:
    with connection:
        connection.execute(SCHEMA)


def record(connection: sqlite3.Connection, student: str, assignment: str, points: float, reason: str) -> Override:
    """Keep one override, in a transaction of its own."""
    ensure(connection)
    made_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with connection:
        connection.execute("INSERT INTO overrides (student, assignment, points, reason, made_at) VALUES (?, ?, ?, ?, ?)",
                           (student, assignment, points, reason, made_at))  # fmt: skip
    return Override(student, assignment, points, reason, made_at)


def in_force(connection: sqlite3.Connection) -> dict[tuple[str, str], Override]:
    """(student, assignment) -> the latest override."""
    ensure(connection)
    rows = connection.execute("SELECT student, assignment, points, reason, made_at FROM overrides ORDER BY id")
    return {(row[0], row[1]): Override(*row) for row in rows}


BATCH_RUNS = """
CREATE TABLE IF NOT EXISTS batch_runs (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    options  TEXT NOT NULL  -- JSON: the submissions folder, assignments, device and course file; never the salt
)
"""


def remember_batch(connection: sqlite3.Connection, options: dict) -> None:
    """What the last batch was run on, so that `override` can write its outputs again."""
    with connection:
        connection.execute(BATCH_RUNS)
        connection.execute("INSERT INTO batch_runs (options) VALUES (?)", (json.dumps(options),))


def last_batch(connection: sqlite3.Connection) -> dict | None:
    with connection:
        connection.execute(BATCH_RUNS)
    row = connection.execute("SELECT options FROM batch_runs ORDER BY id DESC LIMIT 1").fetchone()
    return json.loads(row[0]) if row else None


def graded_students(connection: sqlite3.Connection) -> set[str]:
    """Every student the gradebook holds a grade for."""
    return {row[0] for row in connection.execute("SELECT DISTINCT student FROM grades")}
