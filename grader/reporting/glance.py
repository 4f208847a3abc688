"""A grade read at a glance: one line per part with its points, status and failure reasons,
failures first, and for each timed case where its speed stands against the part's tier edges and
what the next tier needs. The HTML report's top, the terminal and Gradescope's output all say this.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from grader.judging import reasons
from grader.reporting import results

if TYPE_CHECKING:
    from grader.reporting.results import Grade, TestResult

ORDER = {"failed": 0, "partial": 1, "passed": 2, "not graded": 3}


def status_of(tests: list[TestResult]) -> str:
    """passed, partial (some points), failed (none), or not graded (nothing could be graded here).
    Compiling earns nothing by itself: a part whose build passed and whose cases all need a GPU (a
    CUDA C part on the CPU tier) is not graded, never passed."""
    graded = [t for t in tests if t.graded]
    if not graded or (len(graded) < len(tests) and all(t.kind == "build" and t.passed for t in graded)):
        return "not graded"
    if all(t.passed for t in graded):
        return "passed"
    return "partial" if sum(t.score for t in graded) > 0 else "failed"


def reasons_of(tests: list[TestResult]) -> str:
    counts = Counter(t.reason for t in tests if t.graded and not t.passed)
    return ", ".join(f"{reason} x{n}" if n > 1 else reason for reason, n in counts.most_common())


@dataclass
class Speed:
    """One timed case: its ratio to torch's time (higher is faster), the tier edges as (ratio at
    least, share of the points), and what the next tier up would need."""

    case: str
    ratio: float
    tiers: list[tuple[float, float]]
    student_ms: float
    baseline_ms: float
    rate: str  # what the kernel achieved, in the unit that bounds it

    @property
    def next_tier(self) -> tuple[float, float] | None:
        higher = [tier for tier in self.tiers if tier[0] > self.ratio]
        return min(higher) if higher else None

    def next_tier_text(self, at_most: str = "<=") -> str:
        """The next tier as the terminal and the chart label it ("1.00x (100%) needs <= 0.1800 ms"),
        or "" where none is left."""
        if (tier := self.next_tier) is None:
            return ""
        edge, share = tier
        return f"{edge:.2f}x ({share:.0%}) needs {at_most} {self.baseline_ms / edge:.4f} ms"

    def needs(self) -> str:
        """What the student can act on: the time the next tier needs, or that none is left."""
        if not self.tiers:
            return ""
        tier = self.next_tier
        if tier is None:
            return "full credit"
        edge, share = tier
        return f"{share:.0%} of the points from {edge:.2f}x: {self.baseline_ms / edge:.4f} ms or less"


def speed_of(test: TestResult) -> Speed | None:
    m = test.metrics
    if test.kind != "performance" or not m.get("student_ms") or not m.get("baseline_ms"):
        return None
    if m.get("compute_bound"):
        rate = f"{m['tflops']:.1f} TFLOP/s (torch {m['baseline_tflops']:.1f})"
    else:
        rate = f"{m['gbps']:.0f} GB/s"
        if m.get("roofline_share"):
            rate += f", {m['roofline_share']:.0%} of the copy bandwidth"
        if m.get("bytes"):
            rate += f"; moves at least {m['bytes'] / 1e6:.1f} MB"
    case = test.name.split(": ", 1)[-1].removeprefix("speed").strip()
    tiers = [tuple(tier) for tier in m.get("tiers", [])]
    return Speed(case, m["baseline_ms"] / m["student_ms"], tiers, m["student_ms"], m["baseline_ms"], rate)


@dataclass
class PartLine:
    assignment: str
    part: str
    tests: list[TestResult]
    speeds: list[Speed] = field(default_factory=list)

    @property
    def status(self) -> str:
        return status_of(self.tests)

    @property
    def bonus(self) -> bool:
        return all(t.bonus for t in self.tests)

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tests)

    @property
    def max_score(self) -> float:
        return sum(t.max_score for t in self.tests) if self.bonus else results.possible(self.tests)

    @property
    def reasons(self) -> str:
        return reasons_of(self.tests)

    @property
    def failed(self) -> list[TestResult]:
        return [t for t in self.tests if t.graded and not t.passed]

    @property
    def untouched(self) -> bool:
        """Still as the starter left it: every failure says so (reasons.UNTOUCHED)."""
        return bool(self.failed) and all(t.reason in reasons.UNTOUCHED for t in self.failed)

    def speed_range(self) -> str:
        """The timed cases' ratios to torch as one range ("0.95-1.02x"), or "" where none was timed."""
        ratios = sorted(s.ratio for s in self.speeds)
        if not ratios:
            return ""
        return f"{ratios[0]:.2f}x" if ratios[-1] - ratios[0] < 0.005 else f"{ratios[0]:.2f}-{ratios[-1]:.2f}x"

    def cases(self) -> str:
        """Cases passed of those graded here: numerics and speed (loading the file is no case)."""
        graded = [t for t in self.tests if t.graded and t.kind in ("correctness", "performance")]
        return f"{sum(t.passed for t in graded)}/{len(graded)}" if graded else "-"

    def points(self) -> str:
        return f"{self.score:.2f}/{self.max_score:.2f}" + (" bonus" if self.bonus else "")


def points_of(tests: list[TestResult], slash: str = " / ") -> str:
    """An assignment's points and its bonus apart ("18.00 / 18.00, bonus 10.00 / 10.00"): earned
    bonus points never read as points over the maximum."""
    bonus = [t for t in tests if t.bonus]
    text = f"{sum(t.score for t in tests if not t.bonus):.2f}{slash}{results.possible(tests):.2f}"
    if bonus:
        text += f", bonus {sum(t.score for t in bonus):.2f}{slash}{sum(t.max_score for t in bonus):.2f}"
    return text


def parts(grade: Grade) -> list[PartLine]:
    """Every part, those the student worked on first: of those, the ones that lost points first
    (failed, then partial, least earned first), then passed and not graded; the parts still as the
    starter left them last. Otherwise in the order they were graded."""
    found: dict[tuple[str, str], PartLine] = {}
    for test in grade.tests:
        line = found.setdefault((test.assignment, test.part), PartLine(test.assignment, test.part, []))
        line.tests.append(test)
        if speed := speed_of(test):
            line.speeds.append(speed)
    def rank(line: PartLine) -> tuple[bool, int, float]:
        share = line.score / (line.max_score or 1) if line.status == "partial" else 0.0
        return line.untouched, ORDER[line.status], share

    return sorted(found.values(), key=rank)


def text(grade: Grade) -> str:
    """The glance in plain lines, for Gradescope's output (the terminal prints it as a table)."""
    lines = []
    for line in parts(grade):
        row = f"{line.assignment}/{line.part}: {line.points()} {line.status}"
        if line.reasons:
            row += f" ({line.reasons})"
        lines.append(row)
        for speed in line.speeds:
            needs = f"; {speed.needs()}" if speed.needs() else ""
            lines.append(f"  speed{' ' + speed.case if speed.case else ''}: {speed.ratio:.2f}x torch, {speed.rate}{needs}")
    return "\n".join(lines)
