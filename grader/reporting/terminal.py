"""What the terminal shows after `grade`: a compact table that fits the terminal, then the first
thing to fix in each part, each kind of failure said once.

The table never breaks a word: every column is at least as wide as its longest word, and where
the terminal is too narrow for that, the speed column leaves the table for lines below it (then,
narrower still, the table gives way to plain lines). Each assignment's name stands on a row of
its own, its parts indented under it, so no cell has to hold both names. The HTML report has the rest.
"""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader.running import stack
from grader.judging import reasons
from grader.reporting import glance, hidden
from grader.reporting.results import Grade, summary_line
from grader.assignment.loading import load_assignment
from grader.assignment.spec import REPO_ROOT
from grader.assignment.toml_table import SpecError
from grader.reporting.text import printable

COLOURS = {"passed": "green", "partial": "yellow", "failed": "red", "not graded": "dim"}
INDENT = "  "  # a part's name, under its assignment's
GAP = 3  # columns between two cells: rich's padding on both sides of SIMPLE_HEAD's blank rule


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


def _least(cell: Text | str) -> int:
    """The narrowest a cell can be without breaking a word: its longest word, with the indent before it."""
    text = str(cell)
    return max((len(line) - len(line.lstrip()) + max((len(w) for w in line.split()), default=0)
                for line in text.splitlines() or [""]))  # fmt: skip


def _lines(cell: Text | str, width: int) -> int:
    """How many lines a cell takes at `width`, wrapped at spaces as Rich wraps it."""
    return sum(len(textwrap.wrap(line, width, break_long_words=False) or [""]) for line in str(cell).splitlines() or [""])


def _widths(rows: list[list[Text | str]], width: int, keep: int | None = None) -> list[int] | None:
    """Each column's width, so that the table fits `width` in the fewest lines: no column narrower
    than its longest word, and column `keep` as wide as its longest line (it never wraps); None
    where that cannot fit. Each column is tried only at the widths where its cells take one line
    fewer than one character narrower, so the search stays small."""
    columns = range(len(rows[0]))
    cells = [[row[i] for row in rows] for i in columns]
    natural = [max(len(line) for cell in cells[i] for line in str(cell).splitlines() or [""]) for i in columns]
    least = [natural[i] if i == keep else max(map(_least, cells[i])) for i in columns]
    room = width - GAP * (len(natural) - 1)
    if sum(least) > room:
        return None
    tried, lines = [], []  # per column: the widths worth trying, and each row's lines at each
    for i in columns:
        at = {w: tuple(_lines(cell, w) for cell in cells[i]) for w in range(least[i], natural[i] + 1)}
        tried.append([w for w in at if w == least[i] or at[w] != at[w - 1]])
        lines.append(at)
    best = None
    for widths in itertools.product(*tried):
        if sum(widths) <= room:
            height = sum(map(max, zip(*(lines[i][w] for i, w in enumerate(widths)))))
            if best is None or (height, -sum(widths)) < best[0]:
                best = ((height, -sum(widths)), list(widths))
    return best[1] if best else None


def _table(grade: Grade, width: int, speed: str) -> Table | None:
    """The table, every column at least as wide as its longest word (the speed column never wraps);
    None where that cannot fit `width`."""
    headers = ["part", "status", "cases", "points", "what failed"] + (["speed"] if speed else [])
    rows = [_cells(grade, name, line, speed) for name, line in _rows(grade)]
    widths = _widths([headers, *rows], width, keep=5 if speed else None)
    if widths is None:
        return None
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title=plain(_title(grade)))
    for header, columns in zip(headers, widths):
        numbers = header in ("cases", "points")
        table.add_column(header, justify="right" if numbers else "left", width=columns, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _title(grade: Grade) -> str:
    """The submission's folder, relative to where `grade` ran where it lies below it."""
    try:
        return f"Grades for {Path(grade.submission).relative_to(Path.cwd())}"
    except ValueError:
        return f"Grades for {grade.submission}"


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
    """The first thing to fix in each failed part, in one line. Parts whose first failure has the
    same reason and the same words are said once, naming them all; parts still as the starter
    left them (reasons.UNTOUCHED) are said once too, with where to begin."""
    lines = [line for line in glance.parts(grade) if line.failed]
    untouched = [line for line in lines if _first(line).reason in reasons.UNTOUCHED]
    said: dict[tuple[str, str], list[glance.PartLine]] = {}
    for line in lines:
        if line not in untouched:
            test = _first(line)
            said.setdefault((test.reason, _first_line(test.output)), []).append(line)
    texts = [_untouched(grade, untouched)] if untouched else []
    for (reason, first), alike in said.items():
        names = ", ".join(f"{line.assignment}/{line.part}" for line in alike)
        where = printable(_first(alike[0]).name) if len(alike) == 1 else f"{len(alike)} parts ({names})"
        texts.append(Text.assemble(plain(reason, "red"), " ", plain(where), ": ", printable(first, 200)))
    return texts


def _first(line: glance.PartLine):
    """A part's first failure, a case's before its build's: the case says what the call did."""
    return next((t for t in line.failed if t.kind != "build"), line.failed[0])


def _first_line(output: str) -> str:
    return (printable(output).strip().splitlines() or [""])[0]


def _untouched(grade: Grade, lines: list[glance.PartLine]) -> Text:
    """One line for every part still as the starter left it: how many, and where to begin: the
    smallest assignment among them (the course's warm-up, for a student's first `make grade`)."""
    by_assignment: dict[str, list[glance.PartLine]] = {}
    for line in lines:
        by_assignment.setdefault(line.assignment, []).append(line)
    points = {name: sum(t.max_score for t in grade.by_assignment()[name] if not t.bonus) for name in by_assignment}
    start = min(by_assignment, key=lambda name: (points[name], name))
    reason = _first(lines[0]).reason
    parts = f"{len(lines)} part" + ("s" if len(lines) > 1 else "")
    assignments = f"{len(by_assignment)} assignment" + ("s" if len(by_assignment) > 1 else "")
    begin = "Begin with" if len(lines) == len(glance.parts(grade)) else "Next:"
    return Text.assemble(plain(reason, "red"), f" in {parts} of {assignments}: {reasons.BY_CODE[reason].hint} ",
                         f"{begin} {start}, ", plain(_where_to_begin(grade, start, by_assignment[start][0].part)))


def _where_to_begin(grade: Grade, assignment: str, part: str) -> str:
    """The part's file in the submission and the assignment's handout, where the assignment is one
    of the course's (a made-up grade's is not)."""
    try:
        spec = load_assignment(REPO_ROOT / "assignments" / assignment)
    except (SpecError, OSError):
        return f"the part {part}."
    file = next((p.file for p in spec.parts if p.name == part), spec.parts[0].file)
    handout = (REPO_ROOT / "assignments" / assignment / "README.md").relative_to(REPO_ROOT)
    folder = _title(grade).removeprefix("Grades for ")
    return f"{folder}/{assignment}/{file}, as its handout {handout} explains."
def _percent(value: float | None) -> str:
    return f"{value:.0f}%" if value is not None else "?"


def print_profile(found, console: Console) -> None:
    """`profile`'s speed-of-light summary (profiling.py): a row per profiled kernel, or why none."""
    if found.note:
        console.print(plain(f"Profile: {found.note}"))
        return
    table = Table(title="Nsight Compute, one call of each timed case (advice, not graded)")
    for column in ("case", "kernel", "time", "compute", "memory", "busiest", "reading"):
        table.add_column(column, overflow="fold")
    for case in found.cases:
        label = plain(f"{case.assignment}/{case.part} {case.case}")
        if case.error:
            table.add_row(label, "", "", "", "", "", plain(case.error, "red"))
        for k in case.kernels:
            time = f"{k['duration_ns'] / 1e3:.1f} us" if k["duration_ns"] is not None else "?"
            table.add_row(label, plain(k["kernel"]), time, _percent(k["compute_pct"]), _percent(k["memory_pct"]),
                          plain(k["limit"]), plain(k["reading"]))  # fmt: skip
    console.print(table)


