"""A CSV that Canvas's gradebook import accepts, made from the roster a TA exports out of Canvas.

Canvas's Grades > Export gives a CSV whose first columns name each student (Student, ID, SIS User
ID, SIS Login ID, Section, and on some instances Integration ID), then one column per assignment,
and often a second row "Points Possible". Its Import reads the same layout: the identifying columns
as exported, then a column per assignment to fill (a header Canvas does not know creates that
assignment, with the Points Possible row's points). So the export here keeps the roster's own
identifying columns and rows, in order, and adds one column per graded assignment; a roster row
no batch student matches keeps an empty cell, which Canvas leaves as it was.

A roster row matches a student by its SIS Login ID, SIS User ID, ID or e-mail's user part,
compared without case: a folder named `jdoe`, or Gradescope's `jdoe@uni.edu`, find Canvas's
`jdoe`. A Gradescope group (`a@uni.edu+b@uni.edu`) gives each member the group's points.
"""

from __future__ import annotations

import csv
from pathlib import Path

from grader.reporting.text import csv_cell

IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Integration ID", "Section")
MATCHED_BY = ("SIS Login ID", "SIS User ID", "ID")
POINTS_POSSIBLE = "Points Possible"


class RosterError(ValueError):
    """The roster is not a Canvas gradebook export."""


def _keys(text: str) -> set[str]:
    """The ways one identifier may be written: itself and, for an e-mail address, its user part."""
    text = text.strip().casefold()
    return {text, text.split("@")[0]} - {""}


def read_roster(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """The roster's identifying columns (in its order) and its rows."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as file:
            reader = csv.DictReader(file)
            header = list(reader.fieldnames or [])
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise RosterError(f"{path}: cannot be read as Canvas's gradebook export: {error}") from None
    columns = [c for c in header if c in IDENTITY]
    if "Student" not in columns or not any(c in columns for c in MATCHED_BY):
        raise RosterError(f"{path}: expected Canvas's gradebook export, whose header starts "
                          f"{', '.join(IDENTITY[:5])}; found {', '.join(header[:6]) or 'nothing'}")  # fmt: skip
    return columns, rows


def match(rows: list[dict[str, str]], students: list[str]) -> dict[int, list[str]]:
    """Roster row index -> the batch's students it stands for."""
    owners: dict[str, str] = {}
    for student in students:
        for member in student.split("+"):
            for key in _keys(member):
                owners.setdefault(key, student)
    found: dict[int, list[str]] = {}
    for index, row in enumerate(rows):
        keys = set().union(*(_keys(row.get(column) or "") for column in MATCHED_BY))
        if mine := sorted({owners[k] for k in keys if k in owners}):
            found[index] = mine
    return found


def write_import(roster: Path, out: Path, points: dict[str, dict[str, float]], headers: dict[str, str],
                 possible: dict[str, float]) -> list[str]:  # fmt: skip
    """Write `out` for Canvas's import; `points`: student -> assignment -> final points, `headers`:
    assignment -> Canvas column. Returns the students no roster row matched."""
    columns, rows = read_roster(roster)
    owners = match(rows, list(points))
    assignments = list(headers)
    with out.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow([*columns, *(headers[a] for a in assignments)])
        for index, row in enumerate(rows):
            identity = [csv_cell(row.get(c) or "") for c in columns]
            if (row.get("Student") or "").strip() == POINTS_POSSIBLE:
                writer.writerow([*identity, *(f"{possible[a]:g}" for a in assignments)])
                continue
            mine = owners.get(index, [])
            cells = [f"{points[mine[0]][a]:.2f}" if mine and a in points[mine[0]] else "" for a in assignments]
            writer.writerow([*identity, *cells])
    matched = {s for students in owners.values() for s in students}
    return sorted(set(points) - matched)
