"""A TA's manual adjustments, kept in the gradebook beside the grades they adjust.

`python -m grader override --out DIR STUDENT ASSIGNMENT --points P --reason TEXT` sets the
assignment's points for that student to P, in place of what the tests gave (a late penalty, if
any, still applies to P); P lies between 0 and the most the assignment gives, its bonus parts
included. `--clear` removes the override in force. Every override and every removal is a row of
its own, with its time and reason, and the latest one for a (student, assignment) decides: the
history stays for whoever asks later. Overrides live in a table of their own, which no grading
writes, so a `--regrade` keeps them.
"""

from __future__ import annotations

import json
import math
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
    made_at     TEXT NOT NULL,  -- UTC, ISO 8601
    cleared     INTEGER NOT NULL DEFAULT 0  -- 1: this row removes the override (points: the one removed)
)
"""


class OverrideError(ValueError):
    """An override that cannot be kept: points out of range, or nothing to clear."""


@dataclass(frozen=True)
class Override:
    student: str
    assignment: str
    points: float
    reason: str
    made_at: str
    cleared: bool = False


def ensure(connection: sqlite3.Connection) -> None:
    with connection:
        connection.execute(SCHEMA)
        columns = {row[1] for row in connection.execute("PRAGMA table_info(overrides)")}
        if "cleared" not in columns:  # a gradebook from before overrides could be removed
            connection.execute("ALTER TABLE overrides ADD COLUMN cleared INTEGER NOT NULL DEFAULT 0")


def check_points(points: float, most: float) -> None:
    """An override's points: a number from 0 to the most the assignment gives (bonus included)."""
    if not (math.isfinite(points) and 0 <= points <= most):
        raise OverrideError(f"--points {points:g}: expected 0 to {most:g}, the most this assignment gives "
                            "(its bonus parts included)")  # fmt: skip


def record(connection: sqlite3.Connection, student: str, assignment: str, points: float, reason: str,
           cleared: bool = False) -> Override:  # fmt: skip
    """Keep one override (or, `cleared`, its removal), in a transaction of its own."""
    ensure(connection)
    made_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with connection:
        connection.execute("INSERT INTO overrides (student, assignment, points, reason, made_at, cleared) "
                           "VALUES (?, ?, ?, ?, ?, ?)", (student, assignment, points, reason, made_at, int(cleared)))  # fmt: skip
    return Override(student, assignment, points, reason, made_at, cleared)


def clear(connection: sqlite3.Connection, student: str, assignment: str, reason: str) -> Override:
    """Remove the override in force, keeping it and this removal in the history."""
    found = in_force(connection).get((student, assignment))
    if found is None:
        raise OverrideError(f"{student} {assignment}: no override is in force, so there is none to clear")
    return record(connection, student, assignment, found.points, reason, cleared=True)


def in_force(connection: sqlite3.Connection) -> dict[tuple[str, str], Override]:
    """(student, assignment) -> the latest override, where the latest row is not a removal."""
    ensure(connection)
    rows = connection.execute("SELECT student, assignment, points, reason, made_at, cleared FROM overrides ORDER BY id")
    latest = {(row[0], row[1]): Override(*row[:5], bool(row[5])) for row in rows}
    return {key: override for key, override in latest.items() if not override.cleared}


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
