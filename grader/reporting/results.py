"""The result of grading: tests with scores and reasons, and the grade they add up to.

results_json.py writes them as the results.json Gradescope reads; glance.py, terminal.py and
report.py say them to a student.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.judging import reasons

REASONS = reasons.CODES
KINDS = ("build", "correctness", "performance", "integrity")


@dataclass
class TestResult:
    __test__ = False  # not a pytest test class, whatever its name says

    assignment: str
    part: str
    kind: str
    name: str
    reason: str
    score: float
    max_score: float
    output: str
    metrics: dict = field(default_factory=dict)
    bonus: bool = False  # points on top: earned ones count, missed ones cost nothing
    hidden: bool = False  # a case hidden until the deadline: no inputs or diagnosis in the student's report

    def __post_init__(self) -> None:
        assert self.reason in REASONS, self.reason
        assert self.kind in KINDS, self.kind

    @property
    def passed(self) -> bool:
        return self.reason == "ok"

    @property
    def graded(self) -> bool:
        return self.reason != "no_gpu"


def possible(tests: list[TestResult]) -> float:
    """The points a submission is graded out of: every test's, bonus tests' left out."""
    return sum(t.max_score for t in tests if not t.bonus)


@dataclass(frozen=True)
class Adjustment:
    """Points a course adds to (or takes from) an assignment's autograded points, never silently:
    a TA's override or a late penalty (grader/course/adjustments.py makes them)."""

    assignment: str
    kind: str  # "override" or "late"
    points: float  # added to the assignment's points; negative when taken
    text: str  # what the student and the TA read


@dataclass
class Grade:
    """Everything one `grade` run produced for one submission."""

    submission: str
    tests: list[TestResult]
    environment: dict
    seconds: float
    adjustments: list[Adjustment] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the course tells the student (a pseudonym, no time known)

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tests) + sum(a.points for a in self.adjustments)

    def assignment_score(self, assignment: str) -> float:
        """The assignment's points, adjustments included."""
        tests = sum(t.score for t in self.tests if t.assignment == assignment)
        return tests + sum(a.points for a in self.adjustments if a.assignment == assignment)

    @property
    def bonus_score(self) -> float:
        """The bonus points earned: part of `score`, on top of `max_score`."""
        return sum(t.score for t in self.tests if t.bonus)

    @property
    def max_score(self) -> float:
        return possible(self.tests)

    @property
    def graded_max_score(self) -> float:
        """The points that could be earned on this machine (speed is not graded without a GPU)."""
        return possible([t for t in self.tests if t.graded])

    def by_assignment(self) -> dict[str, list[TestResult]]:
        groups: dict[str, list[TestResult]] = {}
        for test in self.tests:
            groups.setdefault(test.assignment, []).append(test)
        return groups


def summary_line(grade: Grade) -> str:
    bonus = grade.bonus_score
    text = f"Score {grade.score - bonus:.2f} of {grade.max_score:.2f}"
    if bonus:
        text += f", plus {bonus:.2f} bonus points ({grade.score:.2f} in all)"
    if grade.graded_max_score < grade.max_score:
        text += f" ({grade.max_score - grade.graded_max_score:.2f} points need a GPU and were not graded here)"
    return text + "."
