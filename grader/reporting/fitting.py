"""A table that fits the terminal without breaking a word, or fewer of its columns where all cannot.

Every column is at least as wide as its longest word, and as narrow as lets the table take the
fewest lines; a column marked `keep` never wraps. Where the columns cannot all fit, `fewest_dropped`
leaves out the optional ones, in the order given, until the rest fit: the caller says where the
columns it left out are (the HTML report, grades.csv). Rich draws the table.
"""

from __future__ import annotations

import itertools
import textwrap
from dataclasses import dataclass

from rich import box
from rich.table import Table
from rich.text import Text

GAP = 3  # columns between two cells: rich's padding on both sides of SIMPLE_HEAD's blank rule


@dataclass(frozen=True)
class Column:
    header: str
    numbers: bool = False  # right-aligned
    keep: bool = False  # never wraps: as wide as its longest line
    optional: bool = False  # may be left out where the table cannot fit (fewest_dropped)


def least(cell: Text | str) -> int:
    """The narrowest a cell can be without breaking a word: its longest word, with the indent before it."""
    text = str(cell)
    return max((len(line) - len(line.lstrip()) + max((len(w) for w in line.split()), default=0)
                for line in text.splitlines() or [""]))  # fmt: skip


def _lines(cell: Text | str, width: int) -> int:
    """How many lines a cell takes at `width`, wrapped at spaces as Rich wraps it."""
    return sum(len(textwrap.wrap(line, width, break_long_words=False) or [""]) for line in str(cell).splitlines() or [""])


def widths(rows: list[list[Text | str]], width: int, keep: frozenset[int] = frozenset()) -> list[int] | None:
    """Each column's width, so that the table fits `width` in the fewest lines: no column narrower
    than its longest word, and the columns in `keep` as wide as their longest line (they never
    wrap); None where that cannot fit. Each column is tried only at the widths where its cells take
    one line fewer than one character narrower, so the search stays small."""
    columns = range(len(rows[0]))
    cells = [[row[i] for row in rows] for i in columns]
    natural = [max(len(line) for cell in cells[i] for line in str(cell).splitlines() or [""]) for i in columns]
    narrowest = [natural[i] if i in keep else max(map(least, cells[i])) for i in columns]
    room = width - GAP * (len(natural) - 1)
    if sum(narrowest) > room:
        return None
    tried, lines = [], []  # per column: the widths worth trying, and each row's lines at each
    for i in columns:
        at = {w: tuple(_lines(cell, w) for cell in cells[i]) for w in range(narrowest[i], natural[i] + 1)}
        tried.append([w for w in at if w == narrowest[i] or at[w] != at[w - 1]])
        lines.append(at)
    best = None
    for chosen in itertools.product(*tried):
        if sum(chosen) <= room:
            height = sum(map(max, zip(*(lines[i][w] for i, w in enumerate(chosen)))))
            if best is None or (height, -sum(chosen)) < best[0]:
                best = ((height, -sum(chosen)), list(chosen))
    return best[1] if best else None


def fitted(columns: list[Column], rows: list[list[Text | str]], width: int,
           title: Text | str | None = None) -> Table | None:  # fmt: skip
    """The table at `width`, every word whole; None where it cannot fit."""
    keep = frozenset(i for i, column in enumerate(columns) if column.keep)
    found = widths([[c.header for c in columns], *rows], width, keep)
    if found is None:
        return None
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title=title)
    for column, columns_wide in zip(columns, found):
        table.add_column(column.header, justify="right" if column.numbers else "left", width=columns_wide,
                         overflow="fold")  # fmt: skip
    for row in rows:
        table.add_row(*row)
    return table


def fewest_dropped(columns: list[Column], rows: list[list[Text | str]], width: int,
                   title: Text | str | None = None) -> tuple[Table | None, list[Column]]:  # fmt: skip
    """The table with as many columns as fit `width`: the optional ones are left out, the last
    first, until the rest fit. Returns the table (None where even the others cannot fit) and the
    columns left out."""
    dropped: list[Column] = []
    shown = list(columns)
    while True:
        index = [columns.index(c) for c in shown]
        table = fitted(shown, [[row[i] for i in index] for row in rows], width, title)
        optional = [c for c in shown if c.optional]
        if table is not None or not optional:
            return table, dropped
        shown.remove(optional[-1])
        dropped.insert(0, optional[-1])
