"""A grade written as a Gradescope results.json.

Gradescope reads `score`, `execution_time`, `output` and `tests` (each with `name`, `number`,
`score`, `max_score`, `status`, `output`, `tags`, `visibility`); the grader's own detail
(assignment, part, kind, reason code, metrics) rides under each `extra_data`. The output opens
with the grade at a glance (glance.py), as the terminal and the HTML report do.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from grader.course import leaderboard
from grader.reporting import glance
from grader.reporting.results import Grade, summary_line
from grader.reporting.text import printable
from grader.running import stack

NOT_GRADED = "not graded here"


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
    whatever the submission printed or raised from carrying control or bidi characters there.
    Its `status` is passed or failed; a test that could not be graded here (speed on a CPU) says
    "not graded here" in its name and output, as the terminal and the report call it."""
    numbers: dict[str, int] = {}
    tests = []
    for test in grade.tests:
        group = numbers.setdefault(test.assignment, len(numbers) + 1)
        index = sum(1 for t in tests if t["extra_data"]["assignment"] == test.assignment) + 1
        tests.append({
            "name": printable(test.name if test.graded else f"{test.name} ({NOT_GRADED})"),
            "number": f"{group}.{index}",
            "score": round(test.score, 4),
            "max_score": round(test.max_score, 4),
            "status": "passed" if test.passed else "failed",
            "output": printable(test.output if test.graded else f"{NOT_GRADED.capitalize()}: {test.output}"),
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


def write_json(grade: Grade, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(gradescope(grade), indent=2) + "\n")
