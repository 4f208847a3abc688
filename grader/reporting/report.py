"""The self-contained HTML report a student reads (the terminal's table is terminal.py's).

The HTML comes from Jinja2 templates in grader/reporting/templates/ (inline CSS and SVG, nothing fetched
from the network), so a report opens the same on a laptop offline as on a course server.
"""

from __future__ import annotations

import functools
import math
import threading
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from grader.running import stack
from grader.kernels import compiled_kernels
from grader.judging import reasons
from grader.reporting import glance, hidden, terminal
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


def compile_ahead() -> threading.Thread:
    """The report's template compiled on a thread while the grading runs: 0.13 s of Jinja2's
    parsing and code generation on the 2-core machine, otherwise between the last verdict and
    the report on disk."""
    thread = threading.Thread(target=templates().get_template, args=("report.html.j2",), daemon=True,
                              name="report template")  # fmt: skip
    thread.start()
    return thread


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


@dataclass
class Section:
    """One assignment's part of the report: the cases a student reads first open (failed, then
    timed), the rest folded, and its parts still as the starter left them in a line each."""

    assignment: str
    tests: list[TestResult]
    not_started: list[glance.PartLine]

    @property
    def untouched(self) -> bool:
        """Every part still as the starter left it: the section is folded whole."""
        return {line.part for line in self.not_started} == {t.part for t in self.tests}

    @property
    def worked(self) -> list[TestResult]:
        stubs = {line.part for line in self.not_started}
        return [t for t in self.tests if t.part not in stubs]

    @property
    def failed(self) -> list[TestResult]:
        return [t for t in self.worked if t.graded and not t.passed]

    @property
    def opened(self) -> list[TestResult]:
        """The first failed case of each kind (part, reason, likely cause), then the timed cases."""
        first = {}
        for test in self.failed:
            first.setdefault((test.part, test.reason, test.metrics.get("diagnosis")), test)
        return list(first.values()) + [t for t in self.worked if t.kind == "performance" and t.passed]

    @property
    def alike(self) -> list[TestResult]:
        """The other failed cases, each like one opened: folded under it."""
        return [t for t in self.failed if t not in self.opened]

    @property
    def folded(self) -> list[TestResult]:
        return [t for t in self.worked if t not in self.opened and t not in self.alike]

    def folded_summary(self) -> str:
        """What the fold holds: "4 passed, 1 loaded, 8 not graded here" (a file that loaded is no case)."""
        counts = (("passed", lambda t: t.passed and t.kind != "build"),
                  ("loaded", lambda t: t.passed and t.kind == "build"), ("not graded here", lambda t: not t.graded))
        return ", ".join(f"{n} {word}" for word, test in counts if (n := sum(map(test, self.folded))))


def sections(grade: Grade, lines: list[glance.PartLine]) -> list[Section]:
    """Each assignment, in the order of its first part in the glance: those worked on first."""
    groups = grade.by_assignment()
    order = list(dict.fromkeys(line.assignment for line in lines))
    return [Section(name, groups[name], [line for line in lines if line.assignment == name and line.untouched])
            for name in order]  # fmt: skip


def render_html(grade: Grade, profile=None) -> str:
    grade = hidden.for_student(grade)  # a hidden case's inputs and diagnosis wait for the deadline
    lines = glance.parts(grade)
    speeds = [(line, speed) for line in lines for speed in line.speeds]
    axis = LogAxis.around([speed for _, speed in speeds])
    stubs = [line for line in lines if line.untouched]
    template = templates().get_template("report.html.j2")
    return template.render(grade=grade, submission=terminal.submission_shown(grade), sections=sections(grade, lines),
                           hints=HINTS, summary=summary_line(grade), warning=stack.warning(grade.environment),
                           lines=lines, speeds=speeds, axis=axis, points_of=glance.points_of,
                           compiled_kernels=compiled_kernels.for_report(grade.tests), profile=profile,
                           begin=terminal.where_to_begin(grade, stubs) if stubs else "",
                           stub_hint=reasons.hint(stubs[0].failed[0].reason) if stubs else "")  # fmt: skip


def write_html(grade: Grade, path: Path, profile=None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(grade, profile))
