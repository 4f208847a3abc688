"""A CSV that Canvas's gradebook import accepts, made from the roster a TA exports out of Canvas.

Canvas's Grades > Export gives a CSV whose first columns name each student (Student, ID, SIS User
ID, SIS Login ID, Section, and on some instances Integration ID), then one column per assignment,
and often a second row "Points Possible". Its Import reads the same layout: the identifying columns
as exported, then a column per assignment to fill (a header Canvas does not know creates that
assignment, with the Points Possible row's points). So the export here keeps the roster's own
identifying columns and rows, in order, and adds one column per graded assignment; a roster row
no batch student matches keeps an empty cell, which Canvas leaves as it was.

A roster row matches a student one way, exactly: the column course.toml names (`[canvas] match`)
holds the student's name as the batch names them, character for character. Nothing is folded,
trimmed to an e-mail's user part or split on `+`: `Alice@somewhere`, `0+alice` and `Zed+alice`
are not alice. A Gradescope group gives each member the group's points (its submitters, from the
export's metadata). A row that two students claim, or a name that two rows hold, is ambiguous: its
cells stay empty and the batch lists it as an error, never picking one.
"""

from __future__ import annotations

import csv
from pathlib import Path

from grader.reporting.text import csv_cell

IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Integration ID", "Section")
MATCHABLE = ("SIS Login ID", "SIS User ID", "ID", "Integration ID")  # what course.toml's `match` may name
POINTS_POSSIBLE = "Points Possible"


class RosterError(ValueError):
    """The roster is not a Canvas gradebook export."""


def read_roster(path: Path, column: str) -> tuple[list[str], list[dict[str, str]]]:
    """The roster's identifying columns (in its order) and its rows; `column` is the one students are found in."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as file:
            reader = csv.DictReader(file)
            header = list(reader.fieldnames or [])
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise RosterError(f"{path}: cannot be read as Canvas's gradebook export: {error}") from None
    columns = [c for c in header if c in IDENTITY]
    if "Student" not in columns or column not in columns:
        raise RosterError(f"{path}: expected Canvas's gradebook export, whose header starts "
                          f"{', '.join(IDENTITY[:5])}, with a {column!r} column; found {', '.join(header[:6]) or 'nothing'}")  # fmt: skip
    return columns, rows


def _points_row(row: dict[str, str]) -> bool:
    return (row.get("Student") or "").strip() == POINTS_POSSIBLE


def match(rows: list[dict[str, str]], column: str,
          people: dict[str, tuple[str, ...]]) -> tuple[dict[int, str], list[str]]:  # fmt: skip
    """Roster row index -> the one student it stands for, and the ambiguities (errors for the TA).
    `people`: each student -> the names a roster knows them by (a Gradescope group's members)."""
    holders: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        if not _points_row(row) and (value := (row.get(column) or "").strip()):
            holders.setdefault(value, []).append(index)
    claims: dict[int, list[str]] = {}
    errors = []
    for student, names in people.items():
        for name in names:
            found = holders.get(name, [])
            if len(found) > 1:
                errors.append(f"canvas.csv: {student!r} is {name!r} in {len(found)} roster rows ({column}, lines "
                              f"{', '.join(str(i + 2) for i in found)}): none of them is filled")  # fmt: skip
            for index in found:
                claims.setdefault(index, []).append(student)
    owners = {}
    for index, students in sorted(claims.items()):
        if len(set(students)) > 1:
            errors.append(f"canvas.csv: roster line {index + 2} ({column} {rows[index].get(column)!r}) stands for "
                          f"{' and '.join(repr(s) for s in sorted(set(students)))}: left empty, decide whose it is")  # fmt: skip
        elif len(holders.get((rows[index].get(column) or "").strip(), [])) == 1:
            owners[index] = students[0]
    return owners, errors


def write_import(roster: Path, column: str, out: Path, points: dict[str, dict[str, float]],
                 people: dict[str, tuple[str, ...]], headers: dict[str, str],
                 possible: dict[str, float]) -> tuple[list[str], list[str]]:  # fmt: skip
    """Write `out` for Canvas's import; `points`: student -> assignment -> final points, `headers`:
    assignment -> Canvas column. Returns the students no roster row holds, and the ambiguities."""
    columns, rows = read_roster(roster, column)
    owners, errors = match(rows, column, {s: people.get(s, (s,)) for s in points})
    assignments = list(headers)
    with out.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow([*columns, *(headers[a] for a in assignments)])
        for index, row in enumerate(rows):
            identity = [csv_cell(row.get(c) or "") for c in columns]
            if _points_row(row):
                writer.writerow([*identity, *(f"{possible[a]:g}" for a in assignments)])
                continue
            mine = owners.get(index)
            cells = [f"{points[mine][a]:.2f}" if mine and a in points[mine] else "" for a in assignments]
            writer.writerow([*identity, *cells])
    named = {value for row in rows if (value := (row.get(column) or "").strip())}
    unmatched = sorted(s for s in points if not any(name in named for name in people.get(s, (s,))))
    return unmatched, errors
