"""Speed as a class sees it: Gradescope's `leaderboard` entries, and the standings of a class per GPU model.

An assignment's leaderboard value is the geometric mean of its timed ratios against torch (torch's
time over the student's, so higher is faster): one number per assignment that neither one large
case nor one tiny one decides. It exists only where every benchmark of the assignment's graded
parts was timed (correctness passed, no tampering), so that every value on a board stands for the
same cases; bonus parts are left out, since not every student attempts them. The CPU tier times
nothing and so has no entries.

Students appear under pseudonyms: an HMAC of their name keyed by the course's secret salt, so
nobody without the salt can tell who is who, and the same student keeps one name all term. A
student's own report names their pseudonym.

This module reads tests by their attributes only (no import of grader.reporting.results, which imports it).
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Iterable

TIMED = ("ok", "too_slow")  # the reasons of a benchmark whose ratio was measured and stands
# Word lists for pseudonyms: 48 x 48 pairs and four hexadecimal digits, so that two students of a
# class of hundreds share a name with odds under one in a million.
ADJECTIVES = ("amber", "azure", "bold", "brisk", "calm", "clever", "coral", "crimson", "daring", "deft", "eager",
              "fleet", "gentle", "golden", "hardy", "humble", "ivory", "jade", "keen", "lively", "lucid", "mellow",
              "misty", "nimble", "noble", "olive", "pearl", "plucky", "quick", "quiet", "rapid", "rosy", "russet",
              "sable", "scarlet", "serene", "silver", "sly", "steady", "sunny", "swift", "tawny", "teal", "tidy",
              "vivid", "wily", "witty", "zesty")  # fmt: skip
ANIMALS = ("badger", "bison", "crane", "dingo", "eagle", "egret", "falcon", "ferret", "finch", "gecko", "gibbon",
           "heron", "ibex", "jackal", "jaguar", "koala", "lemur", "lynx", "marten", "mink", "moose", "newt",
           "ocelot", "okapi", "orca", "otter", "panda", "pelican", "puffin", "quail", "raven", "robin", "salmon",
           "seal", "shrew", "sloth", "stoat", "swan", "tapir", "tern", "toucan", "trout", "vole", "walrus",
           "weasel", "wombat", "yak", "zebra")  # fmt: skip


def geometric_mean_ratio(tests: Iterable) -> tuple[float, int] | None:
    """The geometric mean of the timed ratios of one assignment's tests, and how many there were;
    None where a benchmark of a graded part was not timed (or there is none)."""
    timed = [t for t in tests if t.kind == "performance" and not t.bonus]
    ratios = [t.metrics.get("ratio") for t in timed if t.reason in TIMED]
    if not timed or len(ratios) < len(timed):
        return None
    if not all(isinstance(r, (int, float)) and math.isfinite(r) and r > 0 for r in ratios):
        return None
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios)), len(ratios)


def entries(tests: Iterable) -> list[dict]:
    """Gradescope's `leaderboard` list: one entry per assignment whose benchmarks were all timed."""
    by_assignment: dict[str, list] = {}
    for test in tests:
        by_assignment.setdefault(test.assignment, []).append(test)
    board = []
    for assignment, mine in by_assignment.items():
        if found := geometric_mean_ratio(mine):
            board.append({"name": f"{assignment} (x torch)", "value": round(found[0], 4), "order": "desc"})
    return board


def gpu_model(tests: Iterable, environment: dict) -> str:
    """The GPU the timings were taken on: the benchmark's own record, else the grading machine's."""
    names = {t.metrics.get("device_name") for t in tests if t.kind == "performance" and t.metrics.get("device_name")}
    return names.pop() if len(names) == 1 else str(environment.get("gpu") or "unknown GPU")


def pseudonym(student: str, salt: str) -> str:
    """A stable, unguessable name for `student` (the salt is the course's secret)."""
    digest = hmac.new(salt.encode(), student.encode(), hashlib.sha256).digest()
    return f"{ADJECTIVES[digest[0] % len(ADJECTIVES)]}-{ANIMALS[digest[1] % len(ANIMALS)]}-{digest[2:4].hex()}"
