"""The self-contained HTML report a student reads (the terminal's table is terminal.py's).

The HTML comes from Jinja2 templates in grader/reporting/templates/ (inline CSS and SVG, nothing fetched
from the network), so a report opens the same on a laptop offline as on a course server.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from grader.running import stack
from grader.kernels import compiled_kernels
from grader.judging import reasons
from grader.reporting import glance, hidden
from grader.reporting.results import Grade, TestResult, possible, summary_line
from grader.reporting.terminal import plain  # noqa: F401  (where cli.py and summary.py take it from)
from grader.reporting.text import printable

TEMPLATES = Path(__file__).parent / "templates"

HINTS = reasons.HINTS


def status_of(test: TestResult) -> str:
    return glance.status_of([test])


def _finalize(value: object) -> object:
    """Every `{{ ... }}` passes here before autoescaping: what a student wrote shows as its
    characters, with no control or bidi character to hide or reorder it in the browser."""
    return value if isinstance(value, Markup) else printable(value)


@functools.cache
def templates() -> Environment:
    """The Jinja2 environment of every HTML page (this report and the class summary), made once: a
    template is compiled on its first use only (the submission service renders a report per request)."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]),
                      finalize=_finalize)  # fmt: skip
    env.filters["status"] = status_of
    env.filters["possible"] = possible
    return env


@dataclass(frozen=True)
class LogAxis:
    """The speed chart's axis: ratios to torch on a log scale, so that one kernel at 15.9x torch
    (a fused chain against unfused torch) leaves the others' bars and tier edges apart, and 0.5x
    lies as far below 1x as 2x above it. `ticks` are the 1-2-5 steps within the range."""

    low: float
    high: float
    ticks: tuple[float, ...]

    @classmethod
    def around(cls, speeds: list[glance.Speed]) -> LogAxis:
        values = [1.0] + [s.ratio for s in speeds if s.ratio > 0] + [edge for s in speeds for edge, _ in s.tiers if edge > 0]
        low, high = min(values) / 2, max(values) * 1.25  # a step of room below: the slowest bar still shows
        decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
        for marks in ((1, 2, 5), (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8)):  # finer where the range is narrow
            ticks = tuple(m * 10.0**e for e in decades for m in marks if low <= m * 10.0**e <= high)
            if len(ticks) >= 3:
                break
        return cls(low, high, ticks)

    def at(self, ratio: float, width: float) -> float:
        """Where `ratio` lies, from 0 to `width` (clamped: a ratio of 0 sits at the left end)."""
        ratio = min(max(ratio, self.low), self.high)
        return width * math.log(ratio / self.low) / math.log(self.high / self.low)


def render_html(grade: Grade, profile=None) -> str:
    grade = hidden.for_student(grade)  # a hidden case's inputs and diagnosis wait for the deadline
    lines = glance.parts(grade)
    speeds = [(line, speed) for line in lines for speed in line.speeds]
    axis = LogAxis.around([speed for _, speed in speeds])
    template = templates().get_template("report.html.j2")
    return template.render(grade=grade, groups=grade.by_assignment(), hints=HINTS, summary=summary_line(grade),
                           warning=stack.warning(grade.environment), lines=lines, speeds=speeds, axis=axis,
                           points_of=glance.points_of, compiled_kernels=compiled_kernels.for_report(grade.tests),
                           profile=profile)  # fmt: skip


def write_html(grade: Grade, path: Path, profile=None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(grade, profile))
