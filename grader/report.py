"""What a person reads: a compact table in the terminal and a self-contained HTML report.

The HTML comes from Jinja2 templates in grader/templates/ (inline CSS and SVG, nothing fetched
from the network), so a report opens the same on a laptop offline as on a course server.
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader import compiled_kernels, glance, reasons, stack
from grader.results import Grade, TestResult, possible, summary_line
from grader.text import printable

TEMPLATES = Path(__file__).parent / "templates"

HINTS = reasons.HINTS


def status_of(test: TestResult) -> str:
    return glance.status_of([test])


COLOURS = {"passed": "green", "partial": "yellow", "failed": "red", "not graded": "dim"}


def _speed_cell(line: glance.PartLine) -> str:
    """The timed cases' ratios to torch (a range), and what the slowest needs for the next tier."""
    if not line.speeds:
        timed = [t for t in line.tests if t.kind == "performance"]
        return "needs a GPU" if timed and not any(t.graded for t in timed) else ""
    text = line.speed_range()
    if tier := min(line.speeds, key=lambda s: s.ratio).next_tier_text():
        text += f"; {tier}"
    return text


def plain(text: object, style: str = "") -> Text:
    """Text for Rich that is printed as it reads: a `Text` is never parsed as markup, so a student's
    `[/]` cannot make Rich raise, and printable() leaves no escape sequence for the terminal."""
    return Text(printable(text), style=style)


def print_table(grade: Grade, console: Console | None = None) -> None:
    """One row per part, those that lost points first (glance.py), with its speed against the
    next tier on a GPU; then each failed part's first failure in one line: enough to know what to
    fix. The HTML report has the rest."""
    console = console or Console()
    table = Table(title=plain(f"Grades for {grade.submission}"))
    lines = glance.parts(grade)
    timed = any(line.speeds for line in lines)  # no speed column where none was measured (a CPU)
    columns = ("assignment", "part", "status", "cases", "points", "what failed") + (("speed",) if timed else ())
    for column in columns:  # folded, never cut with an ellipsis, in a narrow terminal
        numbers = column in ("cases", "points")
        table.add_column(column, justify="right" if numbers else "left", overflow="fold", no_wrap=numbers)
    for line in lines:
        part = f"{line.part} (bonus)" if line.bonus else line.part
        cells = [plain(line.assignment), plain(part), plain(line.status, COLOURS[line.status]), line.cases(),
                 f"{line.score:.2f}/{line.max_score:.2f}", plain(line.reasons)]  # fmt: skip
        table.add_row(*cells, *([plain(_speed_cell(line))] if timed else []))
    console.print(table)
    for line in lines:  # the first thing to fix in each part
        if not line.failed:
            continue
        test = next((t for t in line.failed if t.kind != "build"), line.failed[0])
        first = (printable(test.output).strip().splitlines() or [""])[0]
        console.print(Text.assemble(plain(test.reason, "red"), " ", plain(test.name), ": ", printable(first, 200)),
                      highlight=False)  # fmt: skip
    console.print(summary_line(grade), markup=False)
    if warning := stack.warning(grade.environment):
        console.print(Text(warning, style="bold red"))


def _finalize(value: object) -> object:
    """Every `{{ ... }}` passes here before autoescaping: what a student wrote shows as its
    characters, with no control or bidi character to hide or reorder it in the browser."""
    return value if isinstance(value, Markup) else printable(value)


def templates() -> Environment:
    """The Jinja2 environment of every HTML page (this report and the class summary)."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]),
                      finalize=_finalize)  # fmt: skip
    env.filters["status"] = status_of
    env.filters["possible"] = possible
    return env


def _axis(speeds: list[glance.Speed]) -> tuple[float, list[float]]:
    """The speed chart's right end (past every ratio and tier edge) and its labelled ticks."""
    top = max([1.0] + [s.ratio for s in speeds] + [edge for s in speeds for edge, _ in s.tiers]) * 1.15
    step = 0.25 if top <= 2 else 0.5 if top <= 4 else 1.0
    return top, [step * i for i in range(1, int(top / step) + 1)]


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


def render_html(grade: Grade, profile=None) -> str:
    lines = glance.parts(grade)
    speeds = [(line, speed) for line in lines for speed in line.speeds]
    top, axis = _axis([speed for _, speed in speeds])
    template = templates().get_template("report.html.j2")
    return template.render(grade=grade, groups=grade.by_assignment(), hints=HINTS, summary=summary_line(grade),
                           warning=stack.warning(grade.environment), lines=lines, speeds=speeds, top=top,
                           axis=axis, compiled_kernels=compiled_kernels.for_report(grade.tests), profile=profile)  # fmt: skip


def write_html(grade: Grade, path: Path, profile=None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(grade, profile))
