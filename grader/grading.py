"""Grading one submission: for each assignment, two phases in child processes, judged here.

Phase 1 runs every correctness case of the tier in a child and judges each output. Phase 2
(GPU only) times the parts whose correctness passed, in a new child. Points: a part's
correctness points are split evenly over the cases of the tier, its performance points over
its benchmarks. Each part also gets a zero-point `build` test saying whether its file loaded.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from grader import cases, cuda_build, isolation, judging
from grader.numerics import Verdict
from grader.environment import describe
from grader.results import Grade, TestResult
from grader.spec import Assignment, Case, Part

LOAD_REASONS = {"missing_file", "syntax_error", "import_error", "missing_entry_point", "compile_error"}
MAX_CHILDREN = 8  # processes per phase; each crash starts one more for the remaining tasks


@dataclass
class Settings:
    device: str  # "cpu" or "cuda"
    salt: str = ""  # batch mode's secret: makes seeds unguessable
    timeout_s: float | None = None  # overrides the assignment's own limit (tests use it)
    progress: Callable[[str], None] = lambda text: None


class _Budget:
    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


def run_tasks(job: dict, tasks: list[dict], workdir: Path, cwd: Path, budget: _Budget) -> dict[str, dict]:
    """Every task's outcome: a child's report, or the reason it never reported."""
    outcomes: dict[str, dict] = {}
    pending = list(tasks)
    for _ in range(MAX_CHILDREN):
        if not pending or budget.left() <= 0:
            break
        run = isolation.run_child({**job, "tasks": pending}, workdir, cwd, budget.left())
        outcomes.update(run.outcomes)
        pending = [t for t in pending if t["id"] not in outcomes]
        if not pending:
            break
        reason, message = run.death()
        in_flight = run.in_flight
        if in_flight is None and run.outcomes and not run.timed_out:
            continue  # it stopped between tasks (after a CUDA error, on purpose): go on in a fresh one
        if in_flight is None:  # it died or hung outside any task: a new child would fare no better
            if not run.outcomes and not run.timed_out:  # before any student code ran: not the student's doing
                message = ("the grading process died before running any of your code: a fault of the grader "
                           f"or of this machine, please report it. {message}")
            for task in pending:
                outcomes[task["id"]] = {"error": {"reason": reason, "message": message}}
            break
        outcomes[in_flight] = {"error": {"reason": reason, "message": message}}
        # A bug that kills the process would kill every later call of that part too: one child, not one per case.
        dead_part = next(t["part"] for t in pending if t["id"] == in_flight)
        note = f"not run: the process died in an earlier call of this part ({reason})"
        for task in pending:
            if task["part"] == dead_part and task["id"] != in_flight:
                outcomes[task["id"]] = {"error": {"reason": reason, "message": note}}
        pending = [t for t in pending if t["id"] not in outcomes]
        if run.timed_out:
            break
    for task in pending:
        if task["id"] not in outcomes:
            outcomes[task["id"]] = {"error": {"reason": "timeout", "message": "not run: the assignment's time limit was spent"}}
    return outcomes


class AssignmentGrading:
    def __init__(self, assignment: Assignment, submission: Path, settings: Settings):
        self.assignment, self.settings = assignment, settings
        self.device = settings.device
        self.budget = _Budget(settings.timeout_s or assignment.timeout_for(self.device))
        self.workdir = Path(tempfile.mkdtemp(prefix=f"grade-{assignment.name}-"))
        self.copy_root = self.workdir / "submission"
        isolation.copy_submission(submission / assignment.name, self.copy_root / assignment.name)
        (self.workdir / "outputs").mkdir()
        self.job = {
            "assignment_dir": str(assignment.directory),
            "submission_dir": str(self.copy_root),
            "outputs_dir": str(self.workdir / "outputs"),
            "device": self.device,
        }

    def seed(self, part: Part, kind: str, index: int) -> int:
        return cases.seed_for(self.assignment, part, kind, index, self.settings.salt)

    def run(self) -> list[TestResult]:
        cwd = self.copy_root / self.assignment.name
        builds = {part.name: self.build(part, cwd) for part in self.assignment.parts if part.is_cuda}
        self.job["libraries"] = {name: str(b.library) for name, b in builds.items() if b.library}
        tasks = [task for part in self.assignment.parts if not self.unbuilt(part, builds) for task in self.case_tasks(part)]
        self.settings.progress(f"{self.assignment.name}: {len(tasks)} correctness cases")
        outcomes = run_tasks(self.job, tasks, self.workdir, cwd, self.budget)
        tests: list[TestResult] = []
        for part in self.assignment.parts:
            cases_verdicts = self.case_verdicts(part, builds.get(part.name), tasks, outcomes)
            verdicts = [v for _, v in cases_verdicts]
            tests.append(self.build_test(part, builds.get(part.name), verdicts))
            tests.extend(self.case_tests(part, cases_verdicts))
            tests.extend(self.performance_tests(part, verdicts, cwd))
        return tests

    def build(self, part: Part, cwd: Path) -> cuda_build.Build:
        self.settings.progress(f"{self.assignment.name}: building {part.file} with nvcc")
        return cuda_build.build(cwd / part.file)

    @staticmethod
    def unbuilt(part: Part, builds: dict[str, cuda_build.Build]) -> bool:
        return part.is_cuda and builds[part.name].library is None

    def case_tasks(self, part: Part) -> list[dict]:
        """The child's work for one part: each case of the tier; for a CUDA part on the CPU tier,
        one probe call that tells an untouched stub from an attempt."""
        if part.is_cuda and self.device != "cuda":
            return [{"id": f"{part.name}:probe", "part": part.name, "kind": "probe", "index": 0, "seed": self.seed(part, "case", 0)}]
        repeats = part.repeats if self.device == "cuda" else 1
        return [
            {"id": f"{part.name}:case:{i}", "part": part.name, "kind": "case", "index": i,
             "seed": self.seed(part, "case", i), "repeats": repeats}
            for i, case in enumerate(part.cases)
            if case.runs_on(self.device)
        ]  # fmt: skip

    def case_verdicts(self, part: Part, build, tasks: list[dict], outcomes: dict) -> list[tuple[Case, Verdict]]:
        probing = part.is_cuda and self.device != "cuda"
        # A CUDA part's cases are all GPU-tier: without a GPU they are shown, with their points, as not graded.
        shown = list(part.cases) if probing else [case for case in part.cases if case.runs_on(self.device)]
        if build is not None and build.library is None:
            return [(case, Verdict(build.reason, build.message)) for case in shown]
        if probing:
            error = outcomes[f"{part.name}:probe"].get("error")
            verdict = Verdict(error["reason"], error["message"]) if error else Verdict(
                "no_gpu", f"{part.file} compiled with nvcc; CUDA parts run on the GPU tier only")
            return [(case, verdict) for case in shown]
        mine = [t for t in tasks if t["part"] == part.name]
        return [(part.cases[t["index"]], self.judge_case(part, t, outcomes[t["id"]])) for t in mine]

    def judge_case(self, part: Part, task: dict, outcome: dict) -> Verdict:
        case = part.cases[task["index"]]
        return judging.judge_case(self.assignment, part, case, task["seed"], outcome, self.device)

    def test(self, part: Part, kind: str, name: str, verdict: Verdict, score: float, max_score: float) -> TestResult:
        label = f"{self.assignment.name}/{part.name}{' (bonus)' if part.bonus else ''}: {name}"
        return TestResult(self.assignment.name, part.name, kind, label, verdict.reason, score, max_score,
                          verdict.message, verdict.metrics, part.bonus)  # fmt: skip

    def build_test(self, part: Part, build, verdicts: list[Verdict]) -> TestResult:
        failed = next((v for v in verdicts if v.reason in LOAD_REASONS), None)
        if build is not None and build.library is None:
            failed = Verdict(build.reason, build.message)
        loaded = f"compiled with nvcc and exports {part.entry}()" if part.is_cuda else f"loaded and defines {part.entry}()"
        verdict = failed or Verdict("ok", f"{part.file} {loaded}")
        if build is not None and build.library is not None:
            verdict.metrics["build_seconds"] = round(build.seconds, 2)
        return self.test(part, "build", f"load {part.file}", verdict, 0.0, 0.0)

    def case_tests(self, part: Part, cases_verdicts: list[tuple[Case, Verdict]]) -> list[TestResult]:
        points = part.correctness_points / max(len(cases_verdicts), 1)
        return [
            self.test(part, "correctness", case.label, v, points if v.ok else 0.0, points)
            for case, v in cases_verdicts
        ]

    def performance_tests(self, part: Part, verdicts: list[Verdict], cwd: Path) -> list[TestResult]:
        if not part.benchmarks:
            return []
        points = part.performance_points / len(part.benchmarks)
        labels = [f"speed {case.label}" for case in part.benchmarks]
        if self.device != "cuda":
            verdict = Verdict("no_gpu", "speed is measured on the GPU tier only; run on a machine with a GPU to see it")
            return [self.test(part, "performance", label, verdict, 0.0, points) for label in labels]
        failed = next((v for v in verdicts if not v.ok), None)
        if failed:
            verdict = Verdict(failed.reason, f"not timed: correctness must pass first ({failed.reason})")
            return [self.test(part, "performance", label, verdict, 0.0, points) for label in labels]
        tasks = self.bench_tasks(part)
        self.settings.progress(f"{self.assignment.name}: timing {part.name} on {len(tasks)} shapes")
        outcomes = run_tasks(self.job, tasks, self.workdir, cwd, self.budget)
        tests = []
        for task, label in zip(tasks, labels):
            case = part.benchmarks[task["index"]]
            verdict = judging.judge_bench(self.assignment, part, case, task, outcomes[task["id"]], self.device)
            credit = verdict.metrics.get("credit", 0.0) if verdict.reason in ("ok", "too_slow") else 0.0
            tests.append(self.test(part, "performance", label, verdict, points * credit, points))
        return tests

    def bench_tasks(self, part: Part) -> list[dict]:
        tasks = []
        for i, _ in enumerate(part.benchmarks):
            seeds = [self.seed(part, f"bench{i}", k) for k in range(part.performance.pool)]
            keep_at = random.Random(seeds[0]).randrange(part.performance.repetitions)
            tasks.append({"id": f"{part.name}:bench:{i}", "part": part.name, "kind": "bench", "index": i,
                          "pool_seeds": seeds, "keep_at": keep_at})  # fmt: skip
        return tasks


def grade_assignment(assignment: Assignment, submission: Path, settings: Settings) -> list[TestResult]:
    grading = AssignmentGrading(assignment, submission, settings)
    try:
        return grading.run()
    finally:
        shutil.rmtree(grading.workdir, ignore_errors=True)  # outputs of large cases weigh gigabytes


def grade_submission(submission: Path, assignments: list[Assignment], settings: Settings) -> Grade:
    started = time.monotonic()
    tests: list[TestResult] = []
    for assignment in assignments:
        tests.extend(grade_assignment(assignment, submission, settings))
    environment = describe(settings.device, salted=bool(settings.salt))
    return Grade(str(submission), tests, environment, time.monotonic() - started)
