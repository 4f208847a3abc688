"""Does a CPU-tier verdict depend on what ran before it? Each case of a submission graded three
ways on the CPU tier: in the order of assignment.toml, in the reverse order, and alone in a child
of its own. A case keeps its index and seed in every order, so its verdict must not change: where
it does, something one case, call or compilation left in the child decided another's (issue 45:
the kernels of one case's second call were reported as the next case's, whose verdict became the
previous case's compile_error).

    .venv/bin/python tools/case_isolation.py                        # every public kernel of tests/corpus/
    .venv/bin/python tools/case_isolation.py liger_softmax yh_triton_gelu
    .venv/bin/python tools/case_isolation.py --orders reversed path/to/submission:flash_attention:forward

An argument is a corpus entry (a folder name under tests/corpus/, graded on the parts its
expect.toml names) or `FOLDER:ASSIGNMENT[:PART,...]`. Prints one line per case whose verdict
differs between the orders and a summary per entry; exit status 1 when any differs. The gradings
of one entry share a compile cache (Triton keys each kernel by its source, options and target),
so only the first compiles. On the 2-core development machine a FlashAttention entry's three
orders take a few minutes; the whole corpus, most of an hour.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grader.grading import Settings, grade_submission  # noqa: E402
from grader.messages.job import Task  # noqa: E402
from grader.assignment.loading import load_assignments  # noqa: E402

CORPUS = REPO / "tests" / "corpus"
ORDERS = ("written", "reversed", "alone")


@dataclasses.dataclass
class Target:
    """What to grade: a submission folder, its assignment, and the parts to grade."""

    name: str
    folder: Path
    assignment: str
    parts: list[str]


def target(argument: str) -> Target:
    if ":" not in argument:
        expect = tomllib.loads((CORPUS / argument / "expect.toml").read_text())
        return Target(argument, CORPUS / argument, expect["assignment"], expect["parts"])
    folder, assignment, *parts = argument.split(":")
    return Target(argument, Path(folder), assignment, parts[0].split(",") if parts else [])


def verdicts(subject: Target, cache: Path, arrange: Callable[[list[Task]], list[Task]] | None = None,
             timeout_s: float | None = None) -> dict[str, str]:
    """`part: case label` -> the reason of each correctness case graded, arranged by `arrange`."""
    [assignment] = load_assignments([subject.assignment])
    if subject.parts:
        assignment = dataclasses.replace(assignment, parts=tuple(p for p in assignment.parts if p.name in subject.parts))
    settings = Settings(device="cpu", cache=cache, arrange=arrange, timeout_s=timeout_s)
    grade = grade_submission(subject.folder, [assignment], settings)
    return {f"{t.part}: {t.name.split(': ', 1)[1]}": t.reason for t in grade.tests if t.kind == "correctness"}


def reversed_order(tasks: list[Task]) -> list[Task]:
    return tasks[::-1]


def only(task_id: str) -> Callable[[list[Task]], list[Task]]:
    return lambda tasks: [task for task in tasks if task.id == task_id]


def case_ids(subject: Target) -> list[str]:
    """The ids of the correctness tasks a CPU-tier grading runs (as grading.Grading.case_tasks names
    them): each case of the tier, and for a CUDA C part its one probe call."""
    [assignment] = load_assignments([subject.assignment])
    parts = [part for part in assignment.parts if not subject.parts or part.name in subject.parts]
    return [task_id for part in parts for task_id in (
        [f"{part.name}:probe:0"] if part.is_cuda else
        [f"{part.name}:case:{index}" for index, case in enumerate(part.cases) if case.runs_on("cpu")])]  # fmt: skip


def graded(subject: Target, orders: list[str], cache: Path, timeout_s: float | None = None) -> dict[str, dict[str, str]]:
    """Each order's verdicts, by case."""
    found = {}
    for order in orders:
        started = time.monotonic()
        if order == "written":
            found[order] = verdicts(subject, cache, timeout_s=timeout_s)
        elif order == "reversed":
            found[order] = verdicts(subject, cache, reversed_order, timeout_s)
        else:
            found[order] = {}
            for task_id in case_ids(subject):
                # Only the task's part: a part none of whose tasks ran would have no verdicts to give.
                alone = dataclasses.replace(subject, parts=[task_id.split(":", 1)[0]])
                found[order].update(verdicts(alone, cache, only(task_id), timeout_s))
        print(f"  {order}: {len(found[order])} cases in {time.monotonic() - started:.0f} s", flush=True)
    return found


def differences(found: dict[str, dict[str, str]]) -> list[str]:
    cases = sorted({case for verdicts in found.values() for case in verdicts})
    lines = []
    for case in cases:
        seen = {order: verdicts.get(case, "-") for order, verdicts in found.items()}
        if len(set(seen.values())) > 1:
            lines.append(f"  DIFFERS {case}: " + ", ".join(f"{order} {reason}" for order, reason in seen.items()))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("subjects", nargs="*", help="corpus entries, or FOLDER:ASSIGNMENT[:PART,...]")
    parser.add_argument("--orders", default=",".join(ORDERS), help=f"a comma-separated subset of {ORDERS}")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds a grading's child may run, instead of the assignment's cpu_timeout_s "
                             "(a machine busy with other work makes a timeout that says nothing of the order)")
    args = parser.parse_args()
    orders = args.orders.split(",")
    unknown = set(orders) - set(ORDERS)
    if unknown:
        parser.error(f"unknown orders {sorted(unknown)}; known: {ORDERS}")
    subjects = args.subjects or sorted(path.parent.name for path in CORPUS.glob("*/expect.toml"))
    failed = 0
    for argument in subjects:
        subject = target(argument)
        print(subject.name, flush=True)
        with tempfile.TemporaryDirectory(prefix="case-isolation-") as cache:
            lines = differences(graded(subject, orders, Path(cache), args.timeout))
        print("\n".join(lines) if lines else "  the same verdict in every order", flush=True)
        failed += bool(lines)
    print(f"{len(subjects) - failed} of {len(subjects)} give each case one verdict whatever the order")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
