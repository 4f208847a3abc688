"""`make profile`'s table in the terminal: a row per profiled kernel, as many columns as fit.

Nsight Compute's speed-of-light figures (grader/kernels/profiling.py) make a wide table. The
terminal keeps what a student reads first (the case, the kernel, its time, the busiest unit and
a reading in a few words) and leaves out the compute and memory shares where the terminal is too
narrow for them; the HTML report has every figure and each reading in full.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from grader.reporting import fitting
from grader.reporting.fitting import Column
from grader.reporting.terminal import plain

TITLE = "Nsight Compute, one call of each timed case (advice, not graded)"
COLUMNS = [Column("case"), Column("kernel"), Column("time", numbers=True),
           Column("compute", numbers=True, optional=True), Column("memory", numbers=True, optional=True),
           Column("busiest"), Column("reading")]  # fmt: skip


def _percent(value: float | None) -> str:
    return f"{value:.0f}%" if value is not None else "?"


def _busiest(kernel: dict) -> str:
    """The busiest unit and its share of its peak ("DRAM 92%")."""
    shares = [kernel["compute_pct"], kernel["memory_pct"], *kernel["levels"].values()]
    top = max((s for s in shares if s is not None), default=None)
    return f"{kernel['limit'] or '?'} {_percent(top)}" if top is not None else "?"


def rows(found) -> list[list[Text | str]]:
    """A row per kernel of each profiled case (a case that failed: its error, in the reading's place)."""
    table = []
    for case in found.cases:
        label = plain(f"{case.assignment}/{case.part} {case.case}")
        if case.error:
            table.append([label, "", "", "", "", "", plain(case.error, "red")])
        for k in case.kernels:
            time = f"{k['duration_ns'] / 1e3:.1f} us" if k["duration_ns"] is not None else "?"
            name = k["kernel"].split("(")[0]  # a CUDA kernel's signature is in the HTML report
            table.append([label, plain(name), time, _percent(k["compute_pct"]), _percent(k["memory_pct"]),
                          plain(_busiest(k)), plain(k.get("verdict") or k["reading"])])  # fmt: skip
    return table


def print_profile(found, console: Console, html: str = "the HTML report") -> None:
    """`profile`'s speed-of-light summary (profiling.py): a row per profiled kernel, or why none."""
    if found.note:
        console.print(plain(f"Profile: {found.note}"))
        return
    table, dropped = fitting.fewest_dropped(COLUMNS, rows(found), console.width, title=TITLE)
    if table is None:  # narrower than any table: a line per kernel
        for row in rows(found):
            console.print(plain(", ".join(str(cell) for cell in row if str(cell))), highlight=False)
    else:
        console.print(table)
    left = " and ".join(c.header for c in dropped)
    more = f"{left} shares, " if left else ""
    console.print(plain(f"Each kernel's {more}memory by level and reading in full: {html}, Profile."), highlight=False)
