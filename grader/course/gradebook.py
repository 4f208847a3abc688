"""The class's gradebook: one SQLite row per graded (student, assignment, submission, grader version).

The batch writes a row in its own transaction the moment a task finishes, so a run killed at any
instant (even `kill -9`) leaves only whole rows behind, and the primary key keeps a rerun from
doubling one. A rerun looks each task up by that key and grades only what is missing: a student
who resubmits gets a new hash and is graded again, and so is everyone after a grader upgrade.
The TestResults are kept whole (JSON), so every report can be rebuilt from this file alone.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from grader.reporting.results import TestResult, possible

SCHEMA = """
CREATE TABLE IF NOT EXISTS grades (
    student         TEXT NOT NULL,
    assignment      TEXT NOT NULL,
    submission_hash TEXT NOT NULL,
    grader_version  TEXT NOT NULL,
    device          TEXT NOT NULL,  -- 'cpu' or 'cuda': a CPU-tier grade never stands in for a GPU one
    score           REAL NOT NULL,
    max_score       REAL NOT NULL,
    tests           TEXT NOT NULL,  -- JSON list of TestResult fields
    environment     TEXT NOT NULL,  -- JSON: the machine that graded it
    seconds         REAL NOT NULL,  -- time spent grading, in the worker
    graded_at       TEXT NOT NULL,
    PRIMARY KEY (student, assignment, submission_hash, grader_version)
)
"""


@dataclass(frozen=True)
class Key:
    student: str
    assignment: str
    submission_hash: str
    grader_version: str


@dataclass
class Entry:
    key: Key
    device: str
    tests: list[TestResult]
    environment: dict
    seconds: float
    graded_at: str

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tests)


class Gradebook:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # The default rollback journal (not WAL) is what stays safe on the network filesystems of clusters.
        self.connection = sqlite3.connect(path, timeout=30)
        with self.connection:
            self.connection.execute(SCHEMA)

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def lookup(self, key: Key, device: str) -> Entry | None:
        """The stored grade for `key` if it was graded on this tier, else None (grade it)."""
        row = self.connection.execute(
            "SELECT device, tests, environment, seconds, graded_at FROM grades WHERE student = ? AND assignment = ? "
            "AND submission_hash = ? AND grader_version = ?", dataclasses.astuple(key)
        ).fetchone()  # fmt: skip
        if row is None or row[0] != device:
            return None
        tests = [TestResult(**fields) for fields in json.loads(row[1])]
        return Entry(key, row[0], tests, json.loads(row[2]), row[3], row[4])

    def latest(self, student: str, assignment: str, device: str) -> Entry | None:
        """The student's most recent grade for the assignment on this tier, whatever its submission
        and grader version: what a batch that does not grade this student (`--student`) shows."""
        row = self.connection.execute(
            "SELECT submission_hash, grader_version, device, tests, environment, seconds, graded_at FROM grades "
            "WHERE student = ? AND assignment = ? AND device = ? ORDER BY graded_at DESC LIMIT 1",
            (student, assignment, device),
        ).fetchone()  # fmt: skip
        if row is None:
            return None
        tests = [TestResult(**fields) for fields in json.loads(row[3])]
        return Entry(Key(student, assignment, row[0], row[1]), row[2], tests, json.loads(row[4]), row[5], row[6])

    def mean_seconds(self, device: str) -> dict[str, float]:
        """Each assignment's mean grading time on this tier, of the grades stored (a refused
        archive's, graded in no time, left out): what the batch's time left starts from."""
        rows = self.connection.execute("SELECT assignment, AVG(seconds) FROM grades WHERE device = ? AND seconds > 0 "
                                       "GROUP BY assignment", (device,)).fetchall()  # fmt: skip
        return dict(rows)

    def record(self, key: Key, device: str, tests: list[TestResult], environment: dict, seconds: float) -> Entry:
        """Store one finished task in a transaction of its own (replacing a regraded row)."""
        graded_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        entry = Entry(key, device, tests, environment, seconds, graded_at)
        # NaN metrics survive the round trip: Python's json writes and reads them back.
        tests_json = json.dumps([dataclasses.asdict(t) for t in tests])
        with self.connection:  # commits on success; a kill before the commit leaves no trace of the row
            self.connection.execute(
                "INSERT OR REPLACE INTO grades VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*dataclasses.astuple(key), device, entry.score, possible(tests), tests_json,
                 json.dumps(environment), seconds, graded_at),
            )  # fmt: skip
        return entry
