"""The result of grading: tests with scores and reasons, written as a Gradescope results.json.

Gradescope reads `score`, `execution_time`, `output` and `tests` (each with `name`, `number`,
`score`, `max_score`, `status`, `output`, `tags`, `visibility`); the grader's own detail
(assignment, part, kind, reason code, metrics) rides under each `extra_data`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from grader.running import stack
from grader.judging import reasons
from grader.reporting import glance
from grader.course import leaderboard
from grader.reporting.text import printable

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


def _clean(value):
    """JSON has no NaN or Inf: they become strings, so the file stays valid. Strings are made
    printable: a metric can carry what the student chose (a kernel's name, a message)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def gradescope(grade: Grade) -> dict:
    """Gradescope shows `name` and `output` to students and TAs as they are: printable() keeps
    whatever the submission printed or raised from carrying control or bidi characters there."""
    numbers: dict[str, int] = {}
    tests = []
    for test in grade.tests:
        group = numbers.setdefault(test.assignment, len(numbers) + 1)
        index = sum(1 for t in tests if t["extra_data"]["assignment"] == test.assignment) + 1
        tests.append({
            "name": printable(test.name),
            "number": f"{group}.{index}",
            "score": round(test.score, 4),
            "max_score": round(test.max_score, 4),
            "status": "passed" if test.passed else "failed",
            "output": printable(test.output if test.graded else f"Not graded here. {test.output}"),
            "tags": [test.assignment, test.part, test.kind, test.reason, *(["bonus"] if test.bonus else [])],
            "visibility": "after_due_date" if test.hidden else "visible",
            "extra_data": _clean({"assignment": test.assignment, "part": test.part, "kind": test.kind,
                                  "reason": test.reason, "metrics": test.metrics}),
        })  # fmt: skip
    course = [a.text for a in grade.adjustments] + grade.notes
    result = {
        "score": round(grade.score, 4),
        "execution_time": round(grade.seconds, 2),
        "output": "\n".join(filter(None, (stack.warning(grade.environment), summary_line(grade), *course,
                                           glance.text(grade)))),
        "tests": tests,
        "extra_data": _clean({**grade.environment, "submission": grade.submission,
                              "max_score": grade.max_score, "graded_max_score": grade.graded_max_score,
                              "adjustments": [dataclasses.asdict(a) for a in grade.adjustments]}),
    }  # fmt: skip
    if board := leaderboard.entries(grade.tests):  # GPU tier only: the CPU tier times nothing
        result["leaderboard"] = board
    return result


def summary_line(grade: Grade) -> str:
    bonus = sum(t.score for t in grade.tests if t.bonus)
    text = f"Score {grade.score - bonus:.2f} of {grade.max_score:.2f}"
    if bonus:
        text += f", plus {bonus:.2f} bonus points ({grade.score:.2f} in all)"
    if grade.graded_max_score < grade.max_score:
        text += f" ({grade.max_score - grade.graded_max_score:.2f} points need a GPU and were not graded here)"
    return text + "."


def write_json(grade: Grade, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(gradescope(grade), indent=2) + "\n")
