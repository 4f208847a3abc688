"""Grading a whole class on Dask distributed: `python -m grader batch` (docs/staff.md, "Grading a class").

One Dask task grades one (student, assignment) by calling `grade_assignment` on a worker, which
spawns the usual child process for the student's code; the worker then only judges. The embedded
cluster has one worker process per GPU, each pinned to its GPU with CUDA_VISIBLE_DEVICES (a
LocalCluster gives every worker the same environment, so the workers are spelled out as a
SpecCluster), or CPU workers where there is no GPU; `--scheduler` joins a cluster someone else
started (dask-jobqueue on Slurm). The client alone writes the gradebook, one transaction per
finished task, in the order tasks finish.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from distributed import Client, Nanny, Scheduler, SpecCluster, as_completed
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from grader.running import cpu_share, ctrl_c
from grader.running import sandbox
from grader.course import eta, intake, plan, salt, worker_start
from grader.reporting import class_table, summary
from grader.course import outputs as course_outputs
from grader.course import overrides
from grader.course.config import Course, CourseError, load_course, read_course_salt
from grader.running.compile_cache import CACHE_ROOT
from grader.running.environment import DeviceError, describe, resolve_device
from grader.running.gpu_lock import GpuLock
from grader.course.gradebook import Entry, Gradebook, Key
from grader.grading import Settings, grade_assignment
from grader.running.overlap import CONTEXT_GIB, gradings_per_gpu, smallest_gpu_gib
from grader.course.intake import Submission
from grader.reporting.report import plain
from grader.reporting.results import TestResult
from grader.assignment.loading import assignment_names
from grader.assignment.spec import Assignment

CPU_WORKERS = 2  # each grading runs a child process of its own: two keep a small machine busy
STAGING = ".unpacked"  # under --out: archives unpacked where a cluster's workers can read them too
GRADEBOOK = "gradebook.sqlite"
CLASS_FILES = ("grades.csv", "summary.html", *course_outputs.FILES)  # what summary.write_outputs writes beside the students
# Everything the batch writes at the top of --out beside a folder per student (sqlite keeps its journal
# beside the gradebook): intake refuses a student of one of these names, whose folder would collide.
OUTPUT_NAMES = (STAGING, GRADEBOOK, f"{GRADEBOOK}-journal", *CLASS_FILES)
WORKER_WAIT_S = 120  # how long a joined scheduler may take to get its first worker (a Slurm queue)


class SetupError(ValueError):
    """The batch cannot start: no sandbox (and no --no-sandbox), a salt given in the environment or
    an unreadable salt file, a scheduler that does not answer, --workers that size no cluster."""


@dataclass(frozen=True)
class Options:
    submissions: Path
    out: Path
    assignments: list[Assignment]
    device: str  # "auto", "cpu" or "cuda", as asked for
    workers: int | None
    scheduler: str | None
    regrade: bool
    students: frozenset[str] | None = None  # grade only these (`--student`); None: everyone
    course: Path | None = None  # course.toml (`--course`)
    sandboxed: bool = True  # False: --no-sandbox, student code runs without bubblewrap
    advisory: bool = False  # --advisory: export a CPU-tier class to Canvas even so (advisory.py)

    def __post_init__(self) -> None:
        """`batch` and `serve` take --workers alike: refused here, before either touches --out."""
        if self.workers is not None and self.workers < 1:
            raise SetupError(f"--workers {self.workers}: at least one worker is needed")
        if self.workers is not None and self.scheduler:
            raise SetupError("--workers sizes the embedded cluster; with --scheduler, the cluster's own workers grade")

    def grades(self, student: str, assignment: str) -> bool:
        """Whether this batch grades the student's assignment (every other grade stays in the outputs, as stored)."""
        return (self.students is None or student in self.students) and assignment in {a.name for a in self.assignments}


def grade_task(assignment: Assignment, folder: str, device: str, salt: str, student: str,
               sandboxed: bool = True) -> tuple[list[TestResult], dict, float]:  # fmt: skip
    """One (student, assignment), run on a worker: the grading core, unchanged. What it compiles
    stays in the worker's cache for the student's files (compile_cache.py): a `--regrade` finds it."""
    started = time.monotonic()
    settings = Settings(device=device, salt=salt, gpu_lock=GpuLock.for_this_gpu() if device == "cuda" else None,
                        cache=CACHE_ROOT, owner=student, sandbox=sandboxed, gradings=cpu_share.gradings_here())  # fmt: skip
    tests, phases = grade_assignment(assignment, Path(folder), settings)
    environment = describe(device, salted=bool(salt), sandboxed=sandboxed, witness=settings.witness)
    environment["phases"] = f"{assignment.name}: {phases.line()}"
    return tests, environment, time.monotonic() - started


def visible_gpus() -> list[str]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return visible.split(",") if visible else [str(i) for i in range(torch.cuda.device_count())]


def worker_specs(device: str, workers: int | None) -> dict:
    """One Nanny (a worker process) per GPU, each seeing only its own; or `workers` CPU workers.
    More workers than GPUs share them round-robin, each GPU's workers (and every other grading on
    the machine) through its lock (gpu_lock.py): their correctness runs overlap, their timings
    take turns."""
    if device == "cuda":
        gpus = visible_gpus()
        count = workers or len(gpus)
        # Every worker of the cluster shares this host's cores: each grading's processes take their share (cpu_share.py).
        envs = [{"CUDA_VISIBLE_DEVICES": gpus[i % len(gpus)], cpu_share.AT_ONCE: str(count)} for i in range(count)]
    else:
        envs = [{"CUDA_VISIBLE_DEVICES": ""} for _ in range(workers or CPU_WORKERS)]
    # Each worker process ignores Ctrl-C (worker_start.py): the batch takes it and ends them.
    options = {"nthreads": 1, "host": "127.0.0.1", "silence_logs": logging.ERROR, "preload": [worker_start.__name__]}
    return {f"{device}-{i}": {"cls": Nanny, "options": {**options, "env": env}} for i, env in enumerate(envs)}


class Engine:
    """The Dask client: an embedded cluster started on first use, or a running scheduler joined."""

    def __init__(self, options: Options):
        self.options = options
        self.cluster: SpecCluster | None = None
        self.client: Client | None = None
        self.workers = options.workers
        self.notice = ""  # why there are fewer workers than asked for
        if options.scheduler:
            try:
                self.client = Client(options.scheduler, timeout="30s")
            except OSError as error:
                raise SetupError(f"--scheduler {options.scheduler}: {error}") from None
            self.device = self._device_on_workers(options.device)
        else:
            self.device = resolve_device(options.device)
            if self.shares_gpus:
                self.fit_workers_to_memory()

    def fit_workers_to_memory(self) -> None:
        """Workers that share a GPU share its memory: no more of them than the largest cap fits."""
        gpus = len(visible_gpus())
        gpu_gib = smallest_gpu_gib()
        caps = [a.gpu_memory_gib for a in self.options.assignments]
        fit = gradings_per_gpu(gpu_gib, caps) * gpus
        if self.workers > fit:
            self.notice = (f"--workers {self.workers}: {fit} fit, {fit // gpus} per GPU of {gpu_gib:.0f} GiB, each "
                           f"allowed {max(caps):g} GiB (gpu_memory_gib) + {CONTEXT_GIB:g} GiB: using {fit}")  # fmt: skip
            self.workers = fit

    def _device_on_workers(self, requested: str) -> str:
        # The client (a login node, say) may have no GPU while the workers do: ask them.
        try:
            self.client.wait_for_workers(1, timeout=WORKER_WAIT_S)
        except TimeoutError:  # asyncio's, which Dask raises, is the built-in one since Python 3.11
            self.client.close()
            raise SetupError(f"--scheduler {self.options.scheduler}: no worker joined in {WORKER_WAIT_S} s") from None
        devices = set(self.client.run(resolve_device, requested).values())
        if len(devices) != 1:
            raise DeviceError(f"the scheduler's workers disagree on the device ({', '.join(sorted(devices))}): "
                              "pass --device cpu, or give every worker a GPU")  # fmt: skip
        return devices.pop()

    @property
    def shares_gpus(self) -> bool:
        workers = self.workers
        return not self.options.scheduler and self.device == "cuda" and bool(workers) and workers > len(visible_gpus())

    def start(self) -> Client:
        if self.client is None:
            local = {"host": "127.0.0.1", "dashboard": False, "dashboard_address": None}
            specs = worker_specs(self.device, self.workers)
            with ctrl_c.held():  # a cluster half started by a Ctrl-C was left for nobody to close
                self.cluster = SpecCluster(workers=specs, scheduler={"cls": Scheduler, "options": local},
                                           silence_logs=logging.ERROR)  # fmt: skip
                self.client = Client(self.cluster)
        return self.client

    def slots(self) -> int:
        """How many tasks run at once: a worker each (one thread), or a joined cluster's threads."""
        if self.cluster is not None:
            return len(self.cluster.worker_spec)
        return max(1, sum(self.client.nthreads().values()))

    @property
    def description(self) -> str:
        if self.options.scheduler:
            return f"the cluster at {self.options.scheduler}"
        workers = len(self.cluster.worker_spec) if self.cluster else self.workers
        return f"{workers} local {'GPU' if self.device == 'cuda' else 'CPU'} worker(s)"

    def sandbox(self) -> str:
        """What the sandbox probe says where the children will run: here, or on each worker of a
        joined cluster (the first that has none)."""
        if not self.options.scheduler:
            return sandbox.probe()
        found = sorted(set(self.client.run(sandbox.probe).values()))
        return next((status for status in found if status.startswith("none")), found[0] if found else sandbox.probe())

    def close(self) -> None:
        for part in (self.client, self.cluster):
            if part is not None:
                part.close()

    def quiet(self, futures) -> None:
        """Before a cluster stopped by a Ctrl-C closes: its workers, busy grading, would each log
        the scheduler's going as an error over the batch's last words (their event loops take
        this while their one thread grades), and this client the results it was still fetching.
        The futures are cancelled so that no fetch starts. (This process first: its scheduler
        logs a worker that went before the broadcast reached it.)"""
        worker_start.quiet()
        if self.cluster is not None and self.client is not None:
            try:
                self.client.cancel(list(futures))
                self.client.run(worker_start.quiet)
            except Exception:  # noqa: BLE001 (a worker gone already logs nothing more)
                pass


def grade_pending(engine: Engine, tasks: list[plan.Task], book: Gradebook, salt: str,
                  console: Console) -> tuple[dict, list]:  # fmt: skip
    """Grade `tasks` on the cluster, recording each as it finishes; returns (entries, faults)."""
    client = engine.start()
    futures = {
        client.submit(grade_task, t.assignment, str(t.submission.folder), engine.device, salt, t.key.student,
                      engine.options.sandboxed, pure=False,
                      key=f"grade-{t.key.student}-{t.key.assignment}-{t.key.submission_hash[:12]}"): t
        for t in tasks
    }  # fmt: skip
    entries: dict[Key, Entry] = {}
    faults: list[str] = []
    limits = {t.assignment.name: t.assignment.timeout_for(engine.device) for t in tasks}
    left = eta.Estimate([t.assignment.name for t in tasks], engine.slots(), limits, book.mean_seconds(engine.device))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("ETA"), eta.TimeLeft(left))  # fmt: skip
    try:
        with Progress(*columns, console=console) as progress:
            bar = progress.add_task(f"grading on {engine.description}", total=len(tasks))
            for future, outcome in as_completed(futures, with_results=True, raise_errors=False):
                task = futures[future]
                if isinstance(outcome, BaseException):  # the grader failed, not the student: no row, a rerun retries
                    faults.append(f"{task.key.student}/{task.key.assignment}: {type(outcome).__name__}: {outcome}")
                    left.finished(task.assignment.name, None)
                else:
                    tests, environment, seconds = outcome
                    entries[task.key] = book.record(task.key, engine.device, tests, environment, seconds)
                    left.finished(task.assignment.name, seconds)
                progress.advance(bar)
    except KeyboardInterrupt:  # a TA's Ctrl-C (or a time limit's): what is kept, and how to go on
        engine.quiet(futures)
        console.print(plain(f"stopped: {len(entries)} of {len(tasks)} grades of this run are kept in the "
                            f"gradebook ({book.path}); the same command grades the other {len(tasks) - len(entries)}"))
        raise
    return entries, faults


def course_of(options: Options) -> Course:
    """course.toml as --course names it, or a course of defaults (no deadlines, review and leaderboard on)."""
    if options.course is None:
        return Course(path=None)
    try:
        return load_course(options.course, assignment_names())
    except CourseError as error:
        raise SetupError(str(error)) from None


def chosen_students(options: Options, submissions: list[Submission]) -> None:
    """--student names only students of this class (a typo would grade nobody, silently), and none
    held back for the TA (identity.py)."""
    known = {s.student for s in submissions if not s.held}
    if held := sorted((options.students or set()) & {s.student for s in submissions if s.held}):
        raise SetupError(f"--student {', '.join(held)}: held back until course.toml's [names] says whose each entry "
                         "of that name is (the class page lists them)")  # fmt: skip
    if unknown := sorted((options.students or set()) - known):
        raise SetupError(f"--student {', '.join(unknown)}: no such student in {options.submissions} "
                         f"(students: {', '.join(sorted(known)[:20])}{' ...' if len(known) > 20 else ''})")  # fmt: skip


def course_and_salt(options: Options, console: Console) -> tuple[Course, str]:
    """The course, and the salt from the file it names or else from the file GRADER_SALT_FILE
    names (salt.py); never from the environment itself."""
    course = course_of(options)
    try:
        secret = read_course_salt(course) or salt.from_environment()
    except (CourseError, salt.SaltError) as error:
        raise SetupError(str(error)) from None
    if not secret:
        console.print(f"[yellow]warning:[/] no salt file ({salt.FILE_VARIABLE}, or course.toml's salt_file): inputs "
                      "use the published seeds, which students can reproduce")  # fmt: skip
    return course, secret


def check_sandbox(engine: Engine, console: Console) -> None:
    """A class is never graded without the sandbox by accident: without a working one the batch
    stops (SetupError, exit status 2) unless --no-sandbox says to go on, and says what that means."""
    status = engine.sandbox()
    if engine.options.sandboxed and status.startswith("none"):
        raise SetupError(f"no working sandbox where the children run: {status}. Without it, student code runs as "
                         "your user, beside your files, your other students' submissions and this batch's own "
                         "processes. Install bubblewrap (or let it make user namespaces), or pass --no-sandbox to "
                         "grade without it")  # fmt: skip
    if not engine.options.sandboxed:
        console.print(Text.assemble(("warning: --no-sandbox:", "bold red"), " student code runs as your user, walled "
                                    f"only by {sandbox.walls(False).split('; ', 1)[1]}. A submission that gets past "
                                    "them can read and change what you can; every report and the class summary say "
                                    "so."))  # fmt: skip


def start_engine(options: Options, console: Console) -> Engine | None:
    """The cluster's client, or None where nobody is graded (`override` writing the outputs again:
    the device is then the last batch's, and no cluster is started). No sandbox, no batch
    (check_sandbox), unless --no-sandbox."""
    if options.students == frozenset():
        return None
    engine = Engine(options)
    try:
        check_sandbox(engine, console)
    except SetupError:
        engine.close()
        raise
    if engine.notice:
        console.print(f"[yellow]note:[/] {engine.notice}")
    if engine.shares_gpus:
        console.print("more workers than GPUs: the workers of a GPU overlap their correctness runs and take turns "
                      "to time (each GPU's lock)")  # fmt: skip
    return engine


def check_course_kept(options: Options) -> None:
    """A folder graded with a course.toml is rewritten only with one: without it, grades.csv and every
    report would lose their late penalties while canvas.csv stayed as it was (`make batch COURSE=...`)."""
    book_path = options.out / GRADEBOOK
    if options.course is not None or not book_path.is_file():
        return
    with Gradebook(book_path) as book:
        last = overrides.last_batch(book.connection) or {}
    if last.get("course"):
        raise SetupError(f"{options.out} was graded with --course {last['course']}: pass it again (`make batch "
                         f"COURSE={last['course']}`), or grade into a new --out to drop the course; without it "
                         "every output would be written again without the course's late penalties")  # fmt: skip


def run(options: Options, console: Console) -> int:
    """The whole batch; returns the exit status (1 when some task failed inside the grader). The
    class outputs are written from the whole gradebook, whatever this run grades (plan.py)."""
    course, secret = course_and_salt(options, console)
    check_course_kept(options)
    engine = start_engine(options, console)
    faults: list[str] = []
    try:
        options.out.mkdir(parents=True, exist_ok=True)
        found = intake.collect(options.submissions, options.out / STAGING, assignment_names(), OUTPUT_NAMES,
                               course.names)  # fmt: skip
        chosen_students(options, found)
        submissions = [s for s in found if not s.held]
        device = engine.device if engine else options.device
        with Gradebook(options.out / GRADEBOOK) as book:
            overrides.remember_batch(book.connection, {
                "submissions": str(options.submissions), "assignments": [a.name for a in options.assignments],
                "device": device, "course": options.course and str(options.course), "advisory": options.advisory})  # fmt: skip
            assignments = plan.class_assignments(options.assignments, book, device)
            tasks = plan.tasks(submissions, assignments)
            entries, pending = plan.resume(tasks, book, device, options.regrade, options.grades)
            console.print(f"{len(submissions)} students x {len(assignments)} assignment(s): "
                          f"{len(entries)} in the gradebook already, {len(pending)} to grade")  # fmt: skip
            if pending:
                graded, faults = grade_pending(engine, pending, book, secret, console)
                entries.update(graded)
            students = {s.student: [entries[t.key] for t in tasks if t.submission is s and t.key in entries]
                        for s in submissions}  # fmt: skip
            extras = course_outputs.prepare(course, students, {s.student: s.folder for s in submissions},
                                            options.submissions, found, assignments, secret, book.connection,
                                            export_advisory=options.advisory)  # fmt: skip
    finally:
        if engine:
            engine.close()
    problems = {s.student: s.flags for s in submissions if s.flags}
    grades = summary.write_outputs(options.out, students, problems, assignments, extras)
    class_table.print_class_table(grades, assignments, console)
    tell(options, extras, faults, console)
    return 1 if faults else 0


def tell(options: Options, extras: course_outputs.CourseOutputs, faults: list[str], console: Console) -> None:
    """The terminal's end of a batch; each line may name a student's folder: text, never markup."""
    for item in extras.attention:
        console.print(Text.assemble(("needs you:", "bold red"), " ", plain(item)))
    for note in extras.notes:
        console.print(Text.assemble(("note:", "yellow"), " ", plain(note)))
    if extras.review.pairs:
        console.print(plain(f"{course_outputs.similar_pairs(extras.review)} ({options.out / course_outputs.SIMILARITY_CSV})"))
    for fault in faults:
        console.print(Text.assemble(("grader fault (nothing recorded; a rerun retries it):", "red"), " ", plain(fault)))
    console.print(plain(f"Class summary: {options.out / 'summary.html'}   grades: {options.out / 'grades.csv'}"))
