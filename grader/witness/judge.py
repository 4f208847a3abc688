"""The parent's verdicts from the witness: whose kernels ran in each graded call, what went to the
host, and how long each timed call kept the GPU busy. Nothing here takes the child's word for
what ran; only which of the child's windows a task's report claims, which is checked against the
windows the witness saw.

- `forbidden_op`: a kernel in a call of the student's that is neither the student's own (a Triton
  kernel defined in their files, found here in their source; a kernel of their .cu, found in the
  built library) nor one of torch's copies or fills, nor a kernel of an op the part allows; or
  more than HOST_BYTES of GPU data copied to the host during a call (the work done on the CPU).
- `no_kernel_launched`: a call that ran no kernel of the student's own.
- `not_fused`: a fused part whose steadiest call (the one with fewest of the student's kernels:
  the first may autotune) still ran more than `max_kernels` of them.
- `tampering`: windows that the reports do not account for, marks out of order, a witness that
  stopped (or never started while the child ran), timed work that ran outside its timed window,
  or CUDA events that say a timed call took less than the GPU was busy with it.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from grader.judging import ops
from grader.messages.reports import Activity, BenchReport
from grader.judging.numerics import Verdict
from grader.assignment.spec import Part
from grader.witness.stream import Kernel, Witnessed
from grader.witness.windows import DEVICE_TO_HOST, HOST_TO_DEVICE, Seen, Window, windows

HOST_BYTES = 1024  # GPU data a call may copy to the host: a few scalars (`float(t)`, `.item()`), not its work
# The events' ratio over the witness's beyond which the events lied. Loose: the two time slightly
# different stretches (the marks sit inside the events), and no honest pair is measured yet.
EVENT_SLACK = 1.5


def own_triton_kernels(folder: Path) -> set[str]:
    """Names of the Triton kernels defined in the student's Python files, read from their source
    (never from the child): functions under a decorator named `jit` (triton.jit, @jit(...)), and
    functions handed to a call of one (`kernel = triton.jit(body)`)."""
    names: set[str] = set()
    for path in sorted(folder.rglob("*.py")):
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(map(_is_jit, node.decorator_list)):
                names.add(node.name)
            elif isinstance(node, ast.Call) and _is_jit(node.func) and node.args and isinstance(node.args[0], ast.Name):
                names.add(node.args[0].id)
    return names


def _is_jit(node: ast.AST) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return (isinstance(target, ast.Attribute) and target.attr == "jit") or (isinstance(target, ast.Name) and target.id == "jit")


def kernel_base(name: str) -> str:
    from grader.judging.integrity import kernel_base as base  # one definition of a kernel's bare name

    return base(name)


def kind_of(kernel: Kernel, own: set[str], allowed_ops: tuple[str, ...]) -> str:
    """"own", "movement" (torch's copies and fills), "allowed" (an op the part allows) or "foreign"."""
    if kernel_base(kernel.name) in own:
        return "own"
    if ops.MOVEMENT_KERNELS.search(kernel.name):
        return "movement"
    if any(re.search(ops.OP_KERNELS[op], kernel.name) for op in allowed_ops if op in ops.OP_KERNELS):
        return "allowed"
    return "foreign"


def _foreign(windows: list[Window], own: set[str], part: Part) -> list[str]:
    found = Counter(k.name for w in windows for k in w.kernels if kind_of(k, own, part.allowed_ops) == "foreign")
    return [f"{name[:160]} ({count}x)" if count > 1 else name[:160] for name, count in found.most_common()]


def _host_bytes(window: Window, output_bytes: int) -> int:
    """GPU data a call took to the host to work on: more than HOST_BYTES, or, for a small output,
    at least the output's bytes there and back (a round trip, where `float(t)` goes one way)."""
    there = sum(c.bytes for c in window.copies if c.kind == DEVICE_TO_HOST)
    back = sum(c.bytes for c in window.copies if c.kind == HOST_TO_DEVICE)
    round_trip = output_bytes > 0 and there >= output_bytes and back >= output_bytes
    return there if there > HOST_BYTES or round_trip else 0


def _forbidden(windows: list[Window], own: set[str], part: Part, what: str, output_bytes: int = 0) -> Verdict | None:
    foreign = _foreign(windows, own, part)
    if foreign:
        return Verdict("forbidden_op", f"the GPU ran kernels that are not yours during {what}: {'; '.join(foreign[:4])} "
                       "(seen by the grader's witness, outside your process's reach: a library called directly, or "
                       "torch computing)", {"witness_kernels": foreign})  # fmt: skip
    host = max((_host_bytes(w, output_bytes) for w in windows), default=0)
    if host:
        return Verdict("forbidden_op", f"{what} copied {host} bytes of GPU data to the host (seen by the grader's witness): "
                       "the work must be done by your kernel on the GPU, not by the CPU (numpy, Python loops, .tolist())",
                       {"host_bytes": host})  # fmt: skip
    return None


def call_verdict(part: Part, windows: list[Window], own: set[str], output_bytes: int = 0) -> Verdict | None:
    """The witness's verdict on a case: its import (role "import") and its calls."""
    calls = [w for w in windows if w.role == "student"]
    verdict = _forbidden(windows, own, part, "your call" if calls else "the import of your file", output_bytes)
    if verdict or not calls:
        return verdict
    counts = [sum(kind_of(k, own, part.allowed_ops) == "own" for k in w.kernels) for w in calls]
    if 0 in counts:
        what = "CUDA kernel of your .cu" if part.is_cuda else "Triton kernel of yours"
        which = "any call" if max(counts) == 0 else f"call {counts.index(0) + 1} of {len(calls)}"
        return Verdict("no_kernel_launched", f"no {what} ran in {which}, by the grader's witness of the GPU")
    if part.max_kernels is not None and min(counts) > part.max_kernels:
        return Verdict("not_fused", f"this part must be at most {part.max_kernels} kernel(s); every call ran "
                       f"{min(counts)} of yours, by the grader's witness of the GPU", {"kernels_per_call": min(counts)})
    return None


def timed_verdict(part: Part, windows: list[Window], own: set[str]) -> Verdict | None:
    """The witness's verdict on the student's calls of a benchmark (warm-up and timed)."""
    verdict = _forbidden(windows, own, part, "a timed call")
    if verdict:
        return verdict
    escaped = [k for w in windows if w.role == "student" for k in w.escaped()]
    if escaped:
        return Verdict("tampering", f"{len(escaped)} kernel(s) of a timed call ran outside the stretch the timed "
                       f"stream waited for ({escaped[0].name[:100]}): work on another stream that the timed stream "
                       "never waited for", {"escaped_kernels": len(escaped)})  # fmt: skip
    return None


def _median(samples: list[float]) -> float:
    return sorted(samples)[len(samples) // 2]


def events_lied(student: tuple[list[float], list[float]], baseline: tuple[list[float], list[float]]) -> str | None:
    """Whether the child's CUDA events make the student faster against torch than the witness saw
    it: each pair is (events' times, witness's times). A ratio of medians, so that the witness's
    clock, which on an H200 ran about twice as fast as the events' (1.86-2.09x over 17 benchmarks,
    2026-11-28), cancels out."""
    if not all(student) or not all(baseline):
        return None
    events = _median(baseline[0]) / max(_median(student[0]), 1e-9)
    seen = _median(baseline[1]) / max(_median(student[1]), 1e-9)
    if events > EVENT_SLACK * seen:
        return (f"the child's CUDA events put the student at {events:.2f}x torch, the grader's witness of the GPU at "
                f"{seen:.2f}x: the timing was tampered with")
    return None


def claims(seen: Seen, task: int, claimed: set[int], roles: tuple[str, ...]) -> str | None:
    """Whether a task's report accounts for exactly the windows the witness saw of it (of `roles`)."""
    found = {w.number for w in seen.windows.values() if w.task == task and w.role in roles}
    if found == claimed:
        return None
    unclaimed, invented = sorted(found - claimed), sorted(claimed - found)
    parts = []
    if unclaimed:
        parts.append(f"calls the report does not account for ({len(unclaimed)})")
    if invented:
        parts.append(f"calls the report names that the GPU never saw ({len(invented)})")
    return "the grader's witness and the child's report disagree: " + "; ".join(parts)


@dataclass
class TaskWitness:
    """What the witness saw of one task of a child: its windows, and the child's windows as a whole."""

    index: int  # the task's place in the child's order
    windows: list[Window]
    seen: Seen
    problems: list[str]  # the witness's own account is broken: every task of the child is judged by it


def for_tasks(found: Witnessed | None, started: list[str]) -> dict[str, TaskWitness]:
    """Each started task's share of a child's witness; {} where no witness recorded the child (the
    CPU tier, no CUPTI here, or a child that never started CUDA: no student code ran on the GPU)."""
    if found is None or not found.started:
        return {}
    seen = windows(found)
    problems = list(seen.problems) + [f"the witness could not record: {p}" for p in found.problems[:3]]
    if found.overflow:
        problems.append("the child's GPU work overflowed what the witness keeps (millions of launches)")
    if found.garbled:
        problems.append(f"{found.garbled} line(s) on the witness's pipe were not the witness's")
    if seen.strays:
        first = seen.strays[0]
        what = getattr(first, "name", "a copy")[:100]
        problems.append(f"a thread other than the grader's started GPU work outside every call ({what})")
    by_task: dict[int, list[Window]] = {}
    for window in seen.windows.values():
        by_task.setdefault(window.task, []).append(window)
    return {task: TaskWitness(i, sorted(by_task.get(i, []), key=lambda w: w.number), seen, problems)
            for i, task in enumerate(started)}  # fmt: skip


def _broken(witness: TaskWitness) -> Verdict | None:
    if witness.problems:
        return Verdict("tampering", "the grader's witness of the GPU does not add up: " + "; ".join(witness.problems[:3]),
                       {"witness_problems": witness.problems[:10]})  # fmt: skip
    return None


def case(part: Part, witness: TaskWitness, activity: Activity, own: set[str], output_bytes: int = 0) -> Verdict | None:
    """The witness's verdict on one correctness case (its calls, and an import it ran)."""
    mine = ("student", "import")
    mismatch = claims(witness.seen, witness.index, set(activity.windows), mine)
    if mismatch:
        return Verdict("tampering", mismatch)
    return _broken(witness) or call_verdict(part, [w for w in witness.windows if w.role in mine], own, output_bytes)


def timed_windows(witness: TaskWitness, report: BenchReport) -> dict[str, tuple[list[float], list[float]]] | str:
    """Each role's timed calls as (the events' times, the witness's times), or why the windows the
    report names are not the ones the witness saw."""
    by_number = {w.number: w for w in witness.windows}
    seen = {}
    for timings, role in ((report.student, "student"), (report.baseline, "baseline")):
        found = [by_number.get(n) for n in timings.windows]
        if len(found) != len(timings.event_ms) or any(w is None or w.role != role for w in found):
            return f"the {role}'s timed calls do not match the windows the grader's witness saw"
        seen[role] = (timings.event_ms, [w.duration_ms for w in found])
    return seen


def bench(part: Part, witness: TaskWitness, report: BenchReport, own: set[str]) -> Verdict | None:
    """The witness's verdict on one benchmark: whose kernels its calls ran, whether any ran outside
    its timed stretch, and whether the child's events tell the ratio the witness saw. The events
    still time (events_lied says why)."""
    mine = ("student", "import")
    mismatch = claims(witness.seen, witness.index, set(report.activity.windows), mine)
    verdict = Verdict("tampering", mismatch) if mismatch else _broken(witness)
    if verdict:
        return verdict
    seen = timed_windows(witness, report)
    if isinstance(seen, str):
        return Verdict("tampering", seen)
    lied = events_lied(seen["student"], seen["baseline"])
    if lied:
        return Verdict("tampering", lied)
    return timed_verdict(part, [w for w in witness.windows if w.role in mine], own)
