"""What the terminal shows after `grade`: a compact table that fits the terminal, then the first
thing to fix in each part, each kind of failure said once.

The table never breaks a word: every column is at least as wide as its longest word, and where
the terminal is too narrow for that, the speed column leaves the table for lines below it (then,
narrower still, the table gives way to plain lines). Each assignment's name stands on a row of
its own, its parts indented under it, so no cell has to hold both names. The HTML report has the rest.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader.running import stack
from grader.judging import reasons
from grader.reporting import fitting, glance, hidden
from grader.reporting.fitting import Column
from grader.reporting.results import Grade, summary_line
from grader.assignment.loading import load_assignment
from grader.assignment.spec import REPO_ROOT
from grader.assignment.toml_table import SpecError
from grader.reporting.text import middle_cut, printable

COLOURS = {"passed": "green", "partial": "yellow", "failed": "red", "not graded": "dim"}
INDENT = "  "  # a part's name, under its assignment's
# A failure's first line is printed whole, wrapped at the terminal's width: the grader's own run to
# some 700 characters, the advice last. Only a student's own text (an exception message, up to
# 64 KiB from the child) runs longer; it keeps its start and its end.
FIRST_LINE_MOST = 2000


def plain(text: object, style: str = "") -> Text:
    """Text for Rich that is printed as it reads: a `Text` is never parsed as markup, so a student's
    `[/]` cannot make Rich raise, and printable() leaves no escape sequence for the terminal."""
    return Text(printable(text), style=style)


def speed_cell(line: glance.PartLine) -> str:
    """The timed cases' ratios to torch (a range), and what the slowest needs for the next tier."""
    if not line.speeds:
        timed = [t for t in line.tests if t.kind == "performance"]
        return "needs a GPU" if timed and not any(t.graded for t in timed) else ""
    text = line.speed_range()
    if tier := min(line.speeds, key=lambda s: s.ratio).next_tier_text():
        text += f"; {tier}"
    return text


def _rows(grade: Grade) -> list[tuple[str, glance.PartLine | None]]:
    """An assignment's own row, then its parts; assignments in the order their first part comes in
    the glance (the one that lost most first), parts in glance order under it."""
    lines = glance.parts(grade)
    order = list(dict.fromkeys(line.assignment for line in lines))
    return [row for name in order
            for row in [(name, None)] + [(name, line) for line in lines if line.assignment == name]]  # fmt: skip


def _cells(grade: Grade, name: str, line: glance.PartLine | None, speed: str) -> list[Text | str]:
    """A row's cells; `speed` is "" (no speed column), "range" (the ratios alone) or "needs" (and
    what the next tier needs)."""
    if line is None:  # the assignment's row: its name and its points, the bonus on a line of its own
        points = glance.points_of(grade.by_assignment()[name], "/").replace(", ", "\n")
        return [plain(name, "bold"), "", "", points, ""] + ([""] if speed else [])
    part = INDENT + line.part + (" (bonus)" if line.bonus else "")
    cells = [plain(part), plain(line.status, COLOURS[line.status]), line.cases(),
             f"{line.score:.2f}/{line.max_score:.2f}", plain(line.reasons)]  # fmt: skip
    if speed:
        cells.append(plain(speed_cell(line) if speed == "needs" else line.speed_range()))
    return cells


def _table(grade: Grade, width: int, speed: str) -> Table | None:
    """The table, every column at least as wide as its longest word (the speed column never wraps);
    None where that cannot fit `width`."""
    columns = [Column("part"), Column("status"), Column("cases", numbers=True), Column("points", numbers=True),
               Column("what failed")] + ([Column("speed", keep=True)] if speed else [])  # fmt: skip
    rows = [_cells(grade, name, line, speed) for name, line in _rows(grade)]
    return fitting.fitted(columns, rows, width, title=plain(_title(grade)))


def submission_shown(grade: Grade) -> str:
    """The submission's folder, relative to where `grade` ran where it lies below it (a batch's
    student is a name)."""
    try:
        return str(Path(grade.submission).relative_to(Path.cwd()))
    except ValueError:
        return grade.submission


def _title(grade: Grade) -> str:
    return f"Grades for {submission_shown(grade)}"


def print_table(grade: Grade, console: Console | None = None) -> None:
    """One row per part under its assignment's row, those that lost points first (glance.py), with
    its speed against the next tier on a GPU; then the first failure of each part, one line for
    every part that failed alike. Where the terminal is too narrow for the next tiers' times in the
    table, they follow it, a line per part."""
    console = console or Console()
    grade = hidden.for_student(grade)  # a hidden case's inputs and diagnosis wait for the deadline
    lines = glance.parts(grade)
    timed = any(line.speeds for line in lines)  # no speed column where none was measured (a CPU)
    table = _table(grade, console.width, "needs" if timed else "")
    apart = timed and table is None
    table = table or (_table(grade, console.width, "range") if timed else None)
    if table is None:  # narrower than any table: the glance's own lines, as Gradescope shows them
        console.print(plain(glance.text(grade)), highlight=False)
    else:
        console.print(table)
    for line in lines if apart and table is not None else []:
        if (needs := min(line.speeds, key=lambda s: s.ratio).next_tier_text() if line.speeds else ""):
            console.print(plain(f"{line.assignment}/{line.part} {line.speed_range()}: {needs}"), highlight=False)
    for text in first_failures(grade):
        console.print(text, highlight=False)
    console.print(summary_line(grade), markup=False)
    if warning := stack.warning(grade.environment):
        console.print(Text(warning, style="bold red"))


def first_failures(grade: Grade) -> list[Text]:
    """The first thing to fix in each failed part, said whole (the terminal wraps it). Parts whose
    first failure has the same reason and the same words are said once, naming them all; parts
    still as the starter left them are said once too, last, with where to begin."""
    lines = [line for line in glance.parts(grade) if line.failed]
    untouched = [line for line in lines if line.untouched]
    said: dict[tuple[str, str], list[glance.PartLine]] = {}
    for line in lines:
        if line not in untouched:
            test = _first(line)
            said.setdefault((test.reason, _first_line(test.output)), []).append(line)
    texts = []
    for (reason, first), alike in said.items():
        names = ", ".join(f"{line.assignment}/{line.part}" for line in alike)
        where = printable(_first(alike[0]).name) if len(alike) == 1 else f"{len(alike)} parts ({names})"
        texts.append(Text.assemble(plain(reason, "red"), " ", plain(where), ": ", middle_cut(first, FIRST_LINE_MOST)))
    return texts + ([_untouched(grade, untouched)] if untouched else [])


def _first(line: glance.PartLine):
    """A part's first failure, a case's before its build's: the case says what the call did."""
    return next((t for t in line.failed if t.kind != "build"), line.failed[0])


def _first_line(output: str) -> str:
    return (printable(output).strip().splitlines() or [""])[0]


def _untouched(grade: Grade, lines: list[glance.PartLine]) -> Text:
    """One line for every part still as the starter left it: how many, and where to begin."""
    assignments = len({line.assignment for line in lines})
    reason = _first(lines[0]).reason
    parts = f"{len(lines)} part" + ("s" if len(lines) > 1 else "")
    of = f"{assignments} assignment" + ("s" if assignments > 1 else "")
    begin = "Begin with" if len(lines) == len(glance.parts(grade)) else "Next:"
    return Text.assemble(plain(reason, "red"), f" in {parts} of {of}: {reasons.BY_CODE[reason].hint} ",
                         f"{begin} ", plain(where_to_begin(grade, lines)))


def where_to_begin(grade: Grade, lines: list[glance.PartLine]) -> str:
    """Among parts still as the starter left them, the smallest assignment (the course's warm-up,
    for a student's first `make grade`), with its part's file in the submission and its handout,
    where the assignment is one of the course's (a made-up grade's is not)."""
    by_assignment: dict[str, list[glance.PartLine]] = {}
    for line in lines:
        by_assignment.setdefault(line.assignment, []).append(line)
    points = {name: sum(t.max_score for t in grade.by_assignment()[name] if not t.bonus) for name in by_assignment}
    start = min(by_assignment, key=lambda name: (points[name], name))
    part = by_assignment[start][0].part
    try:
        spec = load_assignment(REPO_ROOT / "assignments" / start)
    except (SpecError, OSError):
        return f"{start}, the part {part}."
    file = next((p.file for p in spec.parts if p.name == part), spec.parts[0].file)
    handout = (REPO_ROOT / "assignments" / start / "README.md").relative_to(REPO_ROOT)
    folder = submission_shown(grade)
    return f"{start}, {folder}/{start}/{file}, as its handout {handout} explains."
