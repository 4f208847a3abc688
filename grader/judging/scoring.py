"""From verdicts to points: each part's tests (its build, each correctness case, each timed case)
with the score each earns. A part's correctness points are split evenly over its cases; its
performance points over its benchmarks, each earning the share of its credit that its speed
reached (a timed case is timed only once every case of the part is right)."""

from __future__ import annotations

import dataclasses

from grader.assignment.spec import Case, Part
from grader.judging.numerics import Verdict
from grader.judging.reasons import LOAD as LOAD_REASONS
from grader.judging.verdicts import TaskResult
from grader.kernels import compiled_kernels
from grader.messages.job import task_id
from grader.reporting.results import TestResult


def test(assignment: str, part: Part, kind: str, name: str, verdict: Verdict, score: float, max_score: float) -> TestResult:
    label = f"{assignment}/{part.name}{' (bonus)' if part.bonus else ''}: {name}"
    return TestResult(assignment, part.name, kind, label, verdict.reason, score, max_score,
                      verdict.message, verdict.metrics, part.bonus)  # fmt: skip


def build_test(assignment: str, part: Part, build, verdicts: list[Verdict]) -> TestResult:
    """Whether the file loaded. A compile error counts as a load failure only when every case
    had it: a kernel that compiles for float32 but not for float16 loaded, and its float16
    cases say why they failed."""
    failed = next((v for v in verdicts if v.reason in LOAD_REASONS - {"compile_error"}), None)
    if failed is None and verdicts and all(v.reason == "compile_error" for v in verdicts):
        failed = verdicts[0]
    if build is not None and build.library is None:
        failed = Verdict(build.reason, build.message)
    loaded = f"compiled with nvcc and exports {part.entry}()" if part.is_cuda else f"loaded and defines {part.entry}()"
    verdict = failed or Verdict("ok", f"{part.file} {loaded}")
    if build is not None and build.library is not None:
        verdict.metrics["build_seconds"] = round(build.seconds, 2)
        if build.resources is not None:  # what ptxas made of each kernel the launcher launches (advice)
            verdict = compiled_kernels.attach(verdict, build.resources.of_launcher(part.entry), part.teaches)
    return test(assignment, part, "build", f"load {part.file}", verdict, 0.0, 0.0)


def case_tests(assignment: str, part: Part, cases_verdicts: list[tuple[Case, Verdict]]) -> list[TestResult]:
    points = part.correctness_points / max(len(cases_verdicts), 1)
    tests = []
    for case, v in cases_verdicts:
        tests.append(test(assignment, part, "correctness", case.label, v, points if v.ok else 0.0, points))
        tests[-1].hidden = case.hidden  # the report keeps a hidden case's inputs and diagnosis back (hidden.py)
    return tests


def performance_tests(assignment: str, part: Part, device: str, verdicts: list[Verdict],
                      timed: dict[str, Verdict]) -> list[TestResult]:
    if not part.benchmarks:
        return []
    points = part.performance_points / len(part.benchmarks)
    labels = [f"speed {case.label}" for case in part.benchmarks]
    if device != "cuda":
        verdict = Verdict("no_gpu", "speed is measured on the GPU tier only; run on a machine with a GPU to see it")
        return [test(assignment, part, "performance", label, verdict, 0.0, points) for label in labels]
    failed = next((v for v in verdicts if not v.ok), None)
    if failed:
        verdict = Verdict(failed.reason, f"not timed: correctness must pass first ({failed.reason})")
        return [test(assignment, part, "performance", label, verdict, 0.0, points) for label in labels]
    tests = []
    for index, label in enumerate(labels):
        verdict = timed[task_id(part.name, "bench", index)]
        credit = verdict.metrics.get("credit", 0.0) if verdict.reason in ("ok", "too_slow") else 0.0
        tests.append(test(assignment, part, "performance", label, verdict, points * credit, points))
    return tests


def timed(verdict: Verdict, result: TaskResult) -> Verdict:
    """A case's or benchmark's verdict with the seconds its task took in the child (`seconds` in its
    metrics): the first case of a part also pays for importing the file and compiling its kernels.
    In milliseconds' precision: rounded to hundredths, a case of the CPU tier's that took 4 ms on a
    busy 2-core machine said it took none (0.0)."""
    if not result.seconds:
        return verdict
    return dataclasses.replace(verdict, metrics={**verdict.metrics, "seconds": round(result.seconds, 3)})


def with_kernels(verdict: Verdict, result: TaskResult, part: Part) -> Verdict:
    """A verdict with the kernels its task launched described in its metrics (compiled_kernels.py: advice)."""
    activity = result.activity or getattr(result.outcome, "activity", None)
    return compiled_kernels.attach(verdict, compiled_kernels.launched(activity), part.teaches)
