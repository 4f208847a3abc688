"""Grading one submission: for each assignment, two phases in child processes, judged here.

Phase 1 runs every correctness case of the tier in a child and judges each output. Phase 2
(GPU only) times the parts whose correctness passed, all in one new child. Points: a part's
correctness points are split evenly over the cases of the tier, its performance points over
its benchmarks. Each part also gets a zero-point `build` test saying whether its file loaded.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from grader.running import (compile_cache, cpu_share, gpu_lock, hidden_runs, holds, isolation, launchers, overlap,
                            precompile, sandbox, shown_figures, submission_files)
from grader.running.workdirs import Workdir
from grader.running.tasks import Budget, Phases, failure, run_tasks
from grader.assignment import cases, output_sizes
from grader.kernels import cuda_build
from grader.judging import scoring, warm_up
from grader.judging import verdicts as judging
from grader.child.submission import missing_file_message
from grader.running.environment import describe
from grader.running.gpu_lock import GpuLock
from grader.judging.verdicts import probe_verdict
from grader.messages import kept_file
from grader.messages.job import Job, Task, task_id
from grader.messages.reports import Failure
from grader.judging.numerics import Verdict
from grader.reporting.results import Grade, TestResult
from grader.assignment.spec import Assignment, Case, Part
from grader.witness import build as witness_build
from grader.witness import judge as witness_judge


@dataclass
class Settings:
    device: str  # "cpu" or "cuda"
    salt: str = ""  # batch mode's secret: makes seeds unguessable
    timeout_s: float | None = None  # overrides the assignment's own limit (tests use it)
    sandbox: bool = True  # False: as where the OS refuses one (`batch --no-sandbox`; tests show what happens then)
    progress: Callable[[str], None] = lambda text: None
    gpu_lock: GpuLock | None = None  # a GPU shared with other workers: timing takes it alone (gpu_lock.py)
    cache: Path | None = None  # where compiled kernels outlive a grading (compile_cache.py); None: they do not
    owner: str = ""  # whose files these are (a student's name, or the folder): the cache's first key
    parallel: int = 1  # on a GPU, how many assignments may be graded at once (overlap.py)
    unguarded: bool = False  # tests only: children run without their guard (job.Job.unguarded)
    # The grader's witness of the GPU (grader/witness/): on unless GRADER_WITNESS=0.
    witness: bool = dataclasses.field(default_factory=witness_build.enabled)
    # Which correctness tasks the child runs, in which order; None: every case of the tier, parts
    # in order, cases as assignment.toml lists them. A case keeps its index and seed whatever the
    # order, so no verdict may change with it (tools/case_isolation.py, test_case_isolation.py).
    arrange: Callable[[list[Task]], list[Task]] | None = None
    # The precompile pass's compiling children at most (running/precompile.py); 0: no pass; None:
    # a core each but one on the GPU tier, none on the CPU tier (precompile.children_for).
    precompile: int | None = None
    # Each assignment's scratch folder removed on a thread while the results are written (workdirs.py):
    # `grade`'s, whose process waits for them before it ends; a batch's workers remove theirs at once.
    remove_later: bool = False
    # How many gradings share this machine's cores at once, this one included: on the GPU tier, each
    # of its processes runs that share of them (cpu_share.py).
    gradings: int = 1


class AssignmentGrading:
    def __init__(self, assignment: Assignment, submission: Path, settings: Settings):
        gpu_lock.note(f"{assignment.name} begins")
        self.assignment, self.settings = assignment, settings
        self.device = settings.device
        self.budget = Budget(settings.timeout_s or assignment.timeout_for(self.device))
        # Held while this grading lives; a killed grading's is removed by the next (workdirs.py).
        self.scratch = Workdir(assignment.name)
        self.workdir = self.scratch.path
        self.copy_root = self.workdir / "submission"
        try:
            submission_files.copy_submission(submission / assignment.name, self.copy_root / assignment.name)
        except BaseException:
            self.scratch.remove()
            raise
        links = submission_files.links_in(submission / assignment.name)
        self.links_note = (f" Links are not followed, and the submission has {len(links)}: {', '.join(links[:5])}; "
                           "hand in the files themselves." if links else "")  # fmt: skip
        self.cwd = self.copy_root / assignment.name
        self.libraries = self.workdir / "libraries"
        sandboxed = settings.sandbox and not sandbox.probe().startswith("none")
        self.view = sandbox.View([self.copy_root, self.libraries], self.cwd, 0) if sandboxed else None
        self.job = Job(str(assignment.directory), str(self.copy_root), self.device, 0, "", [],
                       unguarded=settings.unguarded, witness=settings.witness)  # fmt: skip
        self.phases = Phases(start=0.0, build=0.0, correctness=0.0, timing=0.0)
        self.built_kernels: set[str] = set()  # the kernels of the student's built .cu files
        # The children's compilers' cache is the grading's own; what outlives the grading is kept
        # by this process once they have ended (compile_cache.py: no child writes it).
        self.compiled = isolation.compiled_cache(self.workdir)
        self.kept: Path | None = None
        self.restored: dict = {}  # what the grading's cache started from (compile_cache.restore)
        self.foreseen = False  # whether its cache will hold every kernel its pass foresaw (precompile.finished)
        self.precompiling: precompile.Precompile | None = None  # its pass, until `precompile.finished`
        self.launcher_keys: set[str] = set()  # the keys of the launchers built for it ahead (launchers.py)
        if settings.cache is not None:
            try:
                self.kept = compile_cache.folder_for(settings.cache, settings.owner or str(submission),
                                                     assignment.name, self.cwd)  # fmt: skip
                self.phases.warm = compile_cache.is_warm(self.kept)
            except OSError:
                self.kept = None  # an unwritable cache folder: this grading compiles in its own folder, as without one

    def restore_caches(self) -> None:
        """The grading's compilers' cache started from what earlier gradings of these files kept
        (`kept`): done while both children import torch. The correctness child reads that cache
        only once the GPU is held for it (graded), the timing child only once it has its job, sent
        after this (start_timer). Restored before the children started, FlashAttention's 266
        kernels held them back by 1.0 s on an H200; before the timing child alone, by 1.4-1.8 s
        its start, which then held the GPU shared while every other timed phase waited."""
        if self.kept is None:
            return
        try:
            with self.phases.timed("caches"):
                self.restored = compile_cache.restore(self.kept, self.compiled)
                self.launcher_keys = launchers.restore(self.kept, self.compiled, self.device)
        except OSError:
            self.kept = None  # as above: compiled again, in the grading's own folder

    def seed(self, part: Part, kind: str, index: int) -> int:
        return cases.seed_for(self.assignment, part, kind, index, self.settings.salt)

    def run(self) -> list[TestResult]:
        builds = {part.name: self.build(part) for part in self.assignment.parts if part.is_cuda}
        self.built_kernels = {kernel for build in builds.values() for kernel in build.kernels}
        self.phases.add("build", sum(build.seconds for build in builds.values()))
        self.job.libraries = cuda_build.private_copies(builds, self.libraries)
        # After the builds: a child's sandbox binds the libraries they made.
        first = self.spawn_correctness(builds)
        timer, benched = self.spawn_timer(builds, held=first is not None)
        try:
            self.restore_caches()
            self.start_timer(timer, benched)  # its job once the cache is whole: the child reads no cache before it
            gpu_lock.note(f"{self.assignment.name} children started")
            if first is not None:  # the kernels it will launch, compiled in parallel (running/precompile.py)
                precompile.ahead_of(self)
            tests = self.graded(builds, timer, first)
        finally:
            precompile.finished(self)  # where no timing child waited for it: none of it writes the cache after
            for child in (timer, first):
                if child is not None:
                    child.discard()  # where it got no job, or the grading broke off
        if self.kept is not None:
            try:
                with self.phases.timed("caches"):
                    compile_cache.keep(self.compiled, self.kept, self.restored)  # every child has ended: none writes it now
                if self.foreseen:
                    compile_cache.mark_foreseen(self.kept, self.device)
                launchers.remember(self.kept, self.launcher_keys)
            except OSError:
                pass  # kept or not, the grade stands: a later grading compiles again
        gpu_lock.note(f"{self.assignment.name} ends")
        return tests

    def spawn_correctness(self, builds: dict[str, cuda_build.Build]) -> isolation.Spawned | None:
        """The correctness cases' child, started before their tasks are built, where some part will
        have cases to run: it imports torch and Triton while this process works out each case's
        output size, where no earlier process kept them (output_sizes.py), whose first use imports
        torch's compiler modules here (about 1.2 s on the 2-core machine; 4.7 s on an H200 machine
        whose eight workers all began at once, which had held each first student's cases back by
        that much)."""
        def has_cases(part: Part) -> bool:
            if part.is_cuda:
                return not self.unbuilt(part, builds)  # a probe on the CPU tier, its cases on the GPU
            return not self.lacks_file(part) and any(case.runs_on(self.device) for case in part.cases)

        if not any(has_cases(part) for part in self.assignment.parts):
            return None
        return isolation.spawn(self.job, self.workdir, self.view, holds.lock_of(self) is not None, self.compiled, "torch")

    def spawn_timer(self, builds: dict[str, cuda_build.Build],
                    held: bool = False) -> tuple[isolation.Spawned | None, list[Part]]:  # fmt: skip
        """The timing child, started now, on the GPU, where a part has benchmarks, and the parts it
        will time: it imports torch and, once it has its job (`start_timer`), makes its harness
        ready, CUDA and the baselines' first calls included, while the correctness cases run
        (isolation.start_ahead), so a timed phase does not wait for its child's start (5-15 s on
        an H100). Its tasks follow: the benchmarks of the parts whose correctness passed. On a
        GPU shared with other workers, and `held`, it imports only once the correctness child has
        (`isolation.importing_after`): at a class's start every worker's two children had imported torch at
        once, the first correctness child was up 8.6 s after its start (an H200, 16 cores, eight
        workers; 2.9 s alone), and no student timed before 25 s."""
        benched = [part for part in self.assignment.parts
                   if part.benchmarks and not self.lacks_file(part) and not self.unbuilt(part, builds)]  # fmt: skip
        if self.device != "cuda" or not benched:
            return None, []
        shared = holds.lock_of(self) is not None
        timer = isolation.spawn(self.job, self.workdir, self.view, shared, self.compiled, "torch", timed=True,
                                held=held)  # fmt: skip
        return timer, benched

    def start_timer(self, timer: isolation.Spawned | None, benched: list[Part]) -> None:
        """The timing child's job, with every benchmark of `benched` as its tasks."""
        if timer is None:
            return
        # Sized (output_sizes.py: a file's read where the sizes are known on this machine, and what the
        # correctness cases' sizing would have done next where not): its kept outputs' file is made
        # as large as its benchmarks' right outputs now, so the child maps it while the GPU is shared.
        tasks = [self.task(part, "bench", i, case) for part in benched for i, case in enumerate(part.benchmarks)]
        isolation.start_ahead(timer, dataclasses.replace(self.job, tasks=tasks), holds.starting(self))

    def graded(self, builds: dict[str, cuda_build.Build], timer: isolation.Spawned | None,
               first: isolation.Spawned | None = None) -> list[TestResult]:  # fmt: skip
        with self.phases.timed("sizing"):  # each case's output size (output_sizes.py)
            tasks = [t for part in self.assignment.parts if not self.unbuilt(part, builds) for t in self.case_tasks(part)]
        tasks = self.settings.arrange(tasks) if self.settings.arrange else tasks
        self.settings.progress(f"{self.assignment.name}: {len(tasks)} correctness cases")
        # A part whose file is not in the submission is missing_file without a child of its own
        # (a child would say the same after a second of importing torch).
        missing = {part.name: failure("missing_file", missing_file_message(self.cwd / part.file) + self.links_note)
                   for part in self.assignment.parts if self.lacks_file(part)}  # fmt: skip
        precompile.cases_compiled(self)  # the pass's first wave (ahead_of) compiled while the cases were sized
        gpu_lock.note(f"{self.assignment.name} cases sized and compiled ahead")
        built = compile_cache.launchers(self.compiled)
        # This process's own start on the GPU, made while the child runs the cases (judging/warm_up.py).
        warm = warm_up.WarmUp(self.device, cases.reference_module(self.assignment.reference_path))
        with self.gpu("correctness") as gate:
            gate = warm.after_hold(isolation.importing_after(gate, timer))
            run = functools.partial(run_tasks, self.job, workdir=self.workdir, view=self.view, budget=self.budget,
                                    phases=self.phases, phase="correctness", gate=gate)  # fmt: skip
            # Hidden cases last, in a child of their own (hidden_runs.py).
            results = hidden_runs.visible_then_hidden(run, [t for t in tasks if t.part not in missing], self.assignment,
                                                      self.compiled, self.workdir, first)  # fmt: skip
            warm.ready()
        self.phases.launchers["correctness"] = len(compile_cache.launchers(self.compiled) - built)
        gpu_lock.note(f"{self.assignment.name} cases run")
        results.update({t.id: missing[t.part] for t in tasks if t.part in missing})
        # The references are made here, after the child. Made by a thread of this process while the
        # child ran its cases (tried on an H200, every assignment side by side, 2026-12-03),
        # FlashAttention's judging fell from 4.2 s to 0.3 s, but every correctness child ran 1.5 to
        # 2.7 times as long beside six parents' float64 work on the GPU: no timed phase began sooner.
        with self.judging():
            judged = {part.name: self.case_verdicts(part, builds.get(part.name), tasks, results)
                      for part in self.assignment.parts}  # fmt: skip
        gpu_lock.note(f"{self.assignment.name} cases judged")
        timed = self.time_parts({name: [v for _, v in found] for name, found in judged.items()}, timer)
        tests: list[TestResult] = []
        for part in self.assignment.parts:  # every verdict is in: no GPU work is left
            verdicts = [v for _, v in judged[part.name]]
            # What each task's child said, before tampering took precedence in its verdict: an
            # import refused as tampering still did not load. Students read it: a hidden case's words wait.
            said = [(hidden_runs.is_hidden(self.assignment, t), Verdict(r.outcome.reason, r.outcome.message))
                    for t in tasks if t.part == part.name for r in [results[t.id]] if isinstance(r.outcome, Failure)]  # fmt: skip
            loaded = hidden_runs.shown([(case.hidden, v) for case, v in judged[part.name]] + said)
            tests.append(scoring.build_test(self.assignment.name, part, builds.get(part.name), loaded))
            tests.extend(scoring.case_tests(self.assignment.name, part, judged[part.name]))
            tests.extend(scoring.performance_tests(self.assignment.name, part, self.device, verdicts, timed))
        return tests

    def time_parts(self, verdicts: dict[str, list[Verdict]], timer: isolation.Spawned | None = None) -> dict[str, Verdict]:
        """Phase 2: every benchmark of every part whose correctness passed, in one new child (a
        child's start, on a GPU, costs about 9 s: one per part was most of a grading's time), and
        each benchmark's verdict. On a GPU shared with other workers, the timing phase holds it
        alone until its last benchmark is timed, then shared (gpu_lock.Timed.share) while the child
        sends the outputs it kept and ends: other students' correctness runs go on beside it, but
        no other timed phase starts while a process that ran this student's code is alive. The
        verdicts, whose checks of the kept outputs run float64 references on the GPU, come after,
        under a shared hold of their own (`judging`) that lets the timed phase already waiting go
        first, and then runs beside that phase's own sending. On an H200 (a class of 20, eight
        workers), judging inside the timed phase's hold had kept the GPU from the next one for
        about 0.7 s of each timed phase; a judging that let every queued timed phase go first, as
        a correctness phase's does, kept its worker from its next student for up to 15 s, and the
        students then came back in waves that left the GPU idle."""
        if self.device != "cuda":
            return {}
        ready = [p for p in self.assignment.parts if p.benchmarks and all(v.ok for v in verdicts[p.name])]
        tasks = [self.task(part, "bench", i, case) for part in ready for i, case in enumerate(part.benchmarks)]
        if not tasks:
            return {}
        self.settings.progress(f"{self.assignment.name}: timing {', '.join(p.name for p in ready)} on {len(tasks)} shapes")
        parts = {part.name: part for part in ready}
        precompile.finished(self)  # no compiling of this grading's goes on while it times
        built = compile_cache.launchers(self.compiled)
        with self.gpu("timing") as gate:
            results = run_tasks(self.job, tasks, self.workdir, self.view, self.budget, self.phases, "timing", gate,
                                self.compiled, timer)  # fmt: skip
        self.phases.launchers["timing"] = len(compile_cache.launchers(self.compiled) - built)
        # The machine's figures of the shown baselines, timed once per machine (shown_figures.py).
        shown_figures.attach(tasks, results, shown_figures.figures(self, ready), parts)
        with self.judging("timing judging", after_timing=True):
            own = self.own_kernels(self.built_kernels)
            return {task.id: scoring.with_kernels(scoring.timed(judging.judge_bench(self.assignment, parts[task.part],
                                                                      parts[task.part].benchmarks[task.index],
                                                                      results[task.id], self.device, own),
                                                  results[task.id]), results[task.id], parts[task.part])
                    for task in tasks}  # fmt: skip

    def judging(self, label: str = "judging", after_timing: bool = False):
        return holds.judging(self, label, after_timing)

    def gpu(self, phase: str):
        return holds.phase_hold(self, phase)

    def build(self, part: Part) -> cuda_build.Build:
        self.settings.progress(f"{self.assignment.name}: building {part.file} with nvcc")
        return cuda_build.build(self.cwd / part.file)

    def lacks_file(self, part: Part) -> bool:
        """A Python part whose file the submission does not have (a CUDA C part says so at its build)."""
        return not part.is_cuda and not (self.cwd / part.file).is_file()

    @staticmethod
    def unbuilt(part: Part, builds: dict[str, cuda_build.Build]) -> bool:
        return part.is_cuda and builds[part.name].library is None

    def task(self, part: Part, kind: str, index: int, case: Case, repeats: int = 1) -> Task:
        """A case's or benchmark's task, with the cap on its output that its size sets."""
        cap = 2 * output_sizes.output_bytes(self.assignment, part, case) + (1 << 20)
        seed = self.seed(part, "case", index)
        return Task(task_id(part.name, kind, index), part.name, kind, index, seed, repeats, cap)

    def case_tasks(self, part: Part) -> list[Task]:
        """The child's work for one part: each case of the tier; for a CUDA part on the CPU tier,
        one probe call that tells an untouched stub from an attempt."""
        if part.is_cuda and self.device != "cuda":
            return [self.task(part, "probe", 0, part.cases[0])]
        repeats = part.repeats if self.device == "cuda" else 1
        return [self.task(part, "case", i, case, repeats) for i, case in enumerate(part.cases) if case.runs_on(self.device)]

    def case_verdicts(self, part: Part, build, tasks: list[Task], results: dict) -> list[tuple[Case, Verdict]]:
        probing = part.is_cuda and self.device != "cuda"
        # A CUDA part's cases are all GPU-tier: without a GPU they are shown, with their points, as not graded.
        shown = list(part.cases) if probing else [case for case in part.cases if case.runs_on(self.device)]
        if build is not None and build.library is None:
            return [(case, Verdict(build.reason, build.message)) for case in shown]
        if probing:
            found = results[f"{part.name}:probe:0"]
            return [(case, probe_verdict(part, found)) for case in shown]
        kernels = set(build.kernels) if build is not None else set()
        own = self.own_kernels(kernels)
        return [(part.cases[t.index], scoring.with_kernels(scoring.timed(judging.judge_case(self.assignment, part, part.cases[t.index],
                                                                              t.seed, results[t.id], self.device, kernels,
                                                                              own), results[t.id]), results[t.id], part))
                for t in tasks if t.part == part.name]  # fmt: skip

    def own_kernels(self, cuda_kernels: set[str]) -> set[str]:
        """Every kernel the student's files define, read here from the copy of their files: the
        witness's test of whose kernel ran (witness/judge.py)."""
        return self.own_triton_kernels | cuda_kernels

    @functools.cached_property
    def own_triton_kernels(self) -> set[str]:
        """Read once a grading: the copy does not change, and each part and phase asks."""
        return witness_judge.own_triton_kernels(self.cwd)


def grade_assignment(assignment: Assignment, submission: Path, settings: Settings) -> tuple[list[TestResult], Phases]:
    """The tests of one assignment, and where its time went."""
    if settings.device == "cuda":
        cpu_share.take(settings.gradings)
    grading = AssignmentGrading(assignment, submission, settings)
    try:
        return grading.run(), grading.phases
    finally:
        # Outputs of large cases weigh gigabytes, and so do a timing child's kept outputs (every
        # child of the grading has ended).
        def removed() -> None:
            kept_file.close_under(grading.workdir)
            gpu_lock.note(f"{assignment.name} folder removed")

        grading.scratch.remove(later=settings.remove_later, then=removed)


def grade_submission(submission: Path, assignments: list[Assignment], settings: Settings) -> Grade:
    """Every assignment of one submission: on a GPU with `settings.parallel` > 1, several at once
    (overlap.py), else one after another. The report lists them in the order given."""
    started = time.monotonic()
    # What the report says of the machine, worked out while the assignments are graded and not after
    # the last verdict: on a GPU it asks CUDA for the device's properties, which starts CUDA's
    # driver in this process (the side-by-side workers judge; this one may not have touched it).
    with ThreadPoolExecutor(1, thread_name_prefix="describe") as ahead:
        described = ahead.submit(describe, settings.device, salted=bool(settings.salt), sandboxed=settings.sandbox,
                                 witness=settings.witness)  # fmt: skip
        if settings.parallel > 1 and settings.device == "cuda" and len(assignments) > 1:
            graded = overlap.grade_side_by_side(submission, assignments, settings, overlap.smallest_gpu_gib(),
                                                grade_assignment, settings.progress)  # fmt: skip
        else:
            graded = {a.name: grade_assignment(a, submission, settings) for a in assignments}
        environment = described.result()
    gpu_lock.note("machine described")
    tests = [test for a in assignments for test in graded[a.name][0]]
    environment["phases"] = "; ".join(f"{a.name}: {graded[a.name][1].line()}" for a in assignments)
    return Grade(str(submission), tests, environment, time.monotonic() - started)
