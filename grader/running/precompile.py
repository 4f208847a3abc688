"""The precompile pass: the kernels a grading's children will launch, compiled before they launch
them, in parallel, into the grading's compilers' cache.

On a GPU, Triton compiles a kernel where it is first launched, one after another in one child:
a cold grading of FlashAttention's solution asked for 266 distinct kernels (every config of its
autotuners at every shape), about 290 CPU-seconds of compiling and most of the grading's time,
while the machine's other cores waited. So, while the correctness child starts (importing torch):

1. a recording child (child/precompile.py) calls each Triton part's entry point on zeros shaped
   as each of its cases and benchmarks of the tier, every launch recorded and none run
   (child/dry_run.py: student code sees the tier it predicts), and sends each specialization
   back as data (messages/specializations.py);
2. this process checks what came back (well formed, of the assignment's parts, each once, at
   most MAX_SPECIALIZATIONS) and hands a share of it to each of its compiling children, as many
   as the cores allow; each imports the student's file and compiles its share for the GPU target
   (child/gpu_target.py) into the grading's cache, where Triton writes every entry to a temporary
   file and renames it, so that processes may share the folder;
3. in two waves: first what the cases launch, then, while the correctness child runs them, what
   only the benchmarks launch (FlashAttention's solution: 190 kernels, then 76 at its benchmarks'
   sequence length). The timing child gets its job once the second wave is over: no compiling
   of this grading's overlaps its timed phase.

It is advice to the cache: no verdict depends on it. What it does not foresee, or fails to compile,
a graded child compiles where it launches it, as before; what its children say is only counted (the
phases line's summary). Each is started as a CPU-tier child is (isolation.spawn: the sandbox, the
guard, the limits; no GPU in sight, no GPU lock held: nothing of it touches the GPU), niced on the
GPU tier as its compiling children are, and ends within its limit. Student code in it can do no
more than in the graded children of its grading, which write the same cache folder; a submission
whose import or calls misbehave there loses the pass's advice, nothing else.

On either tier the correctness child (spawned ahead, importing torch meanwhile) gets its job once
the first wave is over, and the waits for either wave are not counted against the assignment's
time limit. Where fewer
than two children would get MIN_SHARE specializations each, none starts (one child compiles them
no sooner than the correctness child would, and its start costs a few compiles), nor where a tier
gets no children (`children_for`): the graded children compile them as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader.assignment import cases, input_layouts
from grader.assignment.spec import Assignment
from grader.messages.job import Job, Task, task_id
from grader.messages.reports import Failure, Precompiled, Recorded
from grader.messages.specializations import Specialization, identity, well_formed
from grader.running import compile_cache, compile_slots, isolation, launchers, sandbox
from grader.running.compile_slots import cores

RECORD_LIMIT_S = 120.0  # the recording child: an import and one call per shape, none of them run
COMPILE_LIMIT_S = 300.0  # each compiling child
MAX_SPECIALIZATIONS = 4096  # FlashAttention's solution launches 266 on the GPU tier
MIN_SHARE = 3  # specializations a compiling child gets at least: its start costs a few compiles' time
# A pass's children that start at once, without a slot of the machine's (compile_slots.py): a small
# pass (a GELU's 12 kernels) is done in seconds, and its timed phase goes on while a large one
# (FlashAttention's 266) compiles in every slot; waiting behind the large pass's children for a
# slot, it would time only after it.
OWN_CHILDREN = 2
TARGET_CAPABILITY = (9, 0)  # what the children compile for: child/target.py's TARGET (tests/test_precompile.py)


@dataclass
class Summary:
    """What the pass did, as its children said (counted, never trusted)."""

    recorded: int = 0  # distinct specializations passed on to compiling children
    compiled: int = 0  # those a compiling child said it compiled
    cached: int = 0  # of which it found in the cache already
    children: int = 0  # compiling children at once, in the larger wave
    seconds: float = 0.0  # from the recording child's start to the last compiling child's end
    recording_s: float = 0.0  # of which the recording child's (its start, the import, one call per shape)
    launchers: set[str] = field(default_factory=set)  # the keys of the launchers built ahead (launchers.py)
    missed: list[str] = field(default_factory=list)  # shapes whose call raised, and what the pass lost

    @property
    def complete(self) -> bool:
        """Every shape called and every foreseen kernel compiled (or too few to compile ahead)."""
        return not self.missed and (not self.children or self.compiled == self.recorded)

    def line(self) -> str:
        if not self.recorded:
            failed = f" ({len(self.missed)} calls or imports failed)" if self.missed else ""
            return "precompiled nothing" + failed
        if not self.children:
            return f"foresaw {self.recorded} kernels, too few to compile ahead"
        built = f" and {len(self.launchers)} launchers" if self.launchers else ""
        lost = f"; missed: {self.missed[0]}" if self.missed else ""  # the first: the rest go with it, as a rule
        return (f"precompiled {self.compiled} of {self.recorded} kernels{built} in {self.children} processes "
                f"({self.cached} found compiled, the recording {self.recording_s:.1f} s of it{lost})")  # fmt: skip


def children_for(settings, device: str) -> int:
    """Compiling children at most for a grading (`grading.Settings.precompile`; 0: no pass). By
    default, on the GPU tier, a core each but one (the other gradings' timed phases keep theirs);
    on the CPU tier none: measured on two cores, FlashAttention's solution graded in a third to a
    half less time, but every smaller assignment paid for the recording child's start, and a
    student's starter would pay it for nothing (docs/measurements.md). Assignments graded side
    by side, and other gradings, ask as many: each child waits for a slot of the machine's
    (compile_slots.py), so what a small pass leaves goes to a large one."""
    asked = settings.precompile
    if asked is None:
        asked = cores() - 1 if device == "cuda" else 0
    return max(0, asked)


def predicts(device: str) -> bool:
    """Whether the pass can foresee this tier's compiles: the CPU tier's always; the GPU tier's on
    a GPU of the architecture the precompile children compile for (child/target.py's TARGET, an
    H100 or H200: compute capability 9.0), where Triton keys its compiles alike."""
    if device != "cuda":
        return True
    import torch

    return torch.cuda.get_device_capability(0) == TARGET_CAPABILITY


class Precompile:
    """The pass for one grading: `start()` records, compiles what the cases will launch and
    returns; what only the benchmarks launch compiles on until `finish()`, which returns once every
    child of the pass has ended (`run()`: both). It never raises into the grading."""

    def __init__(self, job: Job, assignment: Assignment, tier: str, workdir: Path, view: sandbox.View | None,
                 compiled: Path, limit_s: float, workers: int):  # fmt: skip
        self.assignment, self.tier, self.workdir, self.view, self.compiled = assignment, tier, workdir, view, compiled
        # A CPU-tier child of the grading's own files: no GPU, no witness, no CUDA library.
        self.job = dataclasses.replace(job, device="cpu", precompile=tier, tasks=[], compiles=[], libraries={},
                                       witness=False, gate_fd=-1)  # fmt: skip
        self.limit_s, self.workers = limit_s, max(1, workers)
        self.deadline = time.monotonic() + limit_s  # the pass's, its wait for slots included
        self.summary = Summary()
        self._counting = threading.Lock()
        self._started = time.monotonic()
        self._first: threading.Thread | None = None  # the recording and the first wave
        self._second: threading.Thread | None = None  # the second wave, compiling

    def run(self) -> Summary:
        self.start()
        return self.finish()

    def start(self) -> None:
        """The recording and the first wave, on a thread of their own: the grading works out its
        cases meanwhile (its phase "sizing"), which beside the second wave's children had taken
        9.3 s on an H200 instead of 0.3 s. `cases_compiled` waits for them."""
        self._started = time.monotonic()
        self._first = threading.Thread(target=self._first_wave, daemon=True)
        self._first.start()

    def cases_compiled(self) -> None:
        if self._first is not None:
            self._first.join()

    def _first_wave(self) -> None:
        try:
            for_cases, for_benchmarks = self.record()
            self.summary.recording_s = time.monotonic() - self._started
            building = self.build_launchers(for_cases + for_benchmarks)
            # one child would compile them no sooner than the graded child does
            if min(self.workers, (len(for_cases) + len(for_benchmarks)) // MIN_SHARE) >= 2:
                self.compile(for_cases)
                self._second = threading.Thread(target=self.compile, args=(for_benchmarks,), daemon=True)
                self._second.start()
            if building is not None:
                building.join()
        except Exception as error:  # a fault of the grader's own: the pass was only advice
            self.summary.missed.append(f"the pass broke off: {type(error).__name__}: {error}")

    def compiling(self) -> bool:
        """Whether the second wave is compiling still."""
        return self._second is not None and self._second.is_alive()

    def finish(self) -> Summary:
        self.cases_compiled()
        if self._second is not None:
            self._second.join()
        self.summary.seconds = time.monotonic() - self._started
        return self.summary

    def record(self) -> tuple[list[Specialization], list[Specialization]]:
        """What the cases launch, and what only the benchmarks launch (each distinct, in the order
        the calls launched them)."""
        parts = [part for part in self.assignment.parts if cases.launched_on(part, self.tier)]
        # Every part's cases first: a kernel that one part's benchmarks and another's cases launch is the cases'.
        tasks = [Task(task_id(part.name, "record", wave), part.name, "record", wave, 0, max_output_bytes=0)
                 for wave in (0, 1) for part in parts
                 if wave == 0 or len(cases.launched_on(part, self.tier)) > len(cases.graded_on(part, self.tier))]  # fmt: skip
        try:  # the inputs' layouts, so that the child need not work them out (input_layouts.py)
            self.job = dataclasses.replace(self.job, layouts=input_layouts.layouts(self.assignment, self.tier))
        except Exception:  # the course's input code failed on the meta device: the child says so for itself
            pass
        run = self._run(tasks, [], min(RECORD_LIMIT_S, self.limit_s))
        found: dict[tuple, Specialization] = {}
        waves: tuple[list, list] = ([], [])
        names = {part.name for part in parts}
        for task in tasks:
            done = run.outcomes.get(task.id)
            outcome = done.outcome if done is not None else None
            if not isinstance(outcome, Recorded):
                self.summary.missed.append(f"{task.part}: nothing recorded")
                continue
            self.summary.missed += [f"{task.part}: {text[:300]}" for text in outcome.missed[:8]]
            for spec in outcome.specializations:
                spec = dataclasses.replace(spec, part=task.part)  # the task's part, whatever the child said
                key = identity(spec)
                if well_formed(spec, names) and key not in found and len(found) < MAX_SPECIALIZATIONS:
                    found[key] = spec
                    waves[task.index].append(spec)
        self.summary.recorded = len(found)
        return waves

    def build_launchers(self, specs: list[Specialization]) -> threading.Thread | None:
        """On the GPU tier, the launchers of `specs` built by this process while its children
        compile (launchers.py), and put in the grading's cache."""
        if self.tier != "cuda" or not specs:
            return None

        def build() -> None:
            try:
                keys = launchers.build(specs)
                launchers.place(keys, self.compiled)
                self.summary.launchers = keys
            except Exception:  # the grader's own fault: the children build them, as before (the
                pass  # phases line counts the launchers each phase built), and the pass is complete

        thread = threading.Thread(target=build, daemon=True)
        thread.start()
        return thread

    def compile(self, specs: list[Specialization]) -> None:
        """Shares of `specs`, dealt in turn (each child goes through them in the order the cases
        launched them), to as many children at once as the pass has, each given MIN_SHARE at least."""
        count = max(1, min(self.workers, len(specs) // MIN_SHARE)) if specs else 0
        shares = [specs[i::count] for i in range(count)]
        with self._counting:
            self.summary.children = max(self.summary.children, count)
        threads = [threading.Thread(target=self._compile_share, args=(share, i >= OWN_CHILDREN), daemon=True)
                   for i, share in enumerate(shares)]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _compile_share(self, share: list[Specialization], slotted: bool) -> None:
        """One compiling child over `share`, once it holds one of the machine's slots where `slotted`."""
        tasks = [Task(task_id(spec.part, "compile", i), spec.part, "compile", i, 0, max_output_bytes=0)
                 for i, spec in enumerate(share)]  # fmt: skip
        try:
            waits = compile_slots.slot(self.deadline - time.monotonic()) if slotted else contextlib.nullcontext(True)
            with waits as held:
                left = self.deadline - time.monotonic()
                if not held or left <= 0:
                    with self._counting:
                        self.summary.missed.append(f"no compiling slot came free in time for {len(share)} kernels")
                    return
                run = self._run(tasks, share, min(COMPILE_LIMIT_S, left))
        except Exception as error:  # the grader's own fault (a child that could not start): only advice lost
            with self._counting:
                self.summary.missed.append(f"a compiling child broke off: {type(error).__name__}: {error}")
            return
        outcomes = [run.outcomes[task.id].outcome if task.id in run.outcomes else None for task in tasks]
        done = [outcome for outcome in outcomes if isinstance(outcome, Precompiled) and outcome.compiled]
        with self._counting:
            self.summary.compiled += len(done)
            self.summary.cached += sum(outcome.cached for outcome in done)
            if len(done) < len(share):
                self.summary.missed.append(f"{len(share) - len(done)} of {len(share)} kernels not compiled: "
                                           f"{_why_not(run, outcomes)}")  # fmt: skip

    def _run(self, tasks: list[Task], compiles: list[Specialization], limit_s: float):
        """One child over `tasks`, ended within `limit_s`."""
        job = dataclasses.replace(self.job, tasks=tasks, compiles=compiles)
        return isolation.run_child(job, self.workdir, self.view, limit_s, compiled=self.compiled)


def _why_not(run, outcomes: list) -> str:
    """Why a compiling child did not compile its whole share, in a line (the child's word only
    where it said something: otherwise how it ended, as the parent saw it)."""
    if any(outcome is None for outcome in outcomes):
        return "the child ended before it had compiled them (" + run.death()[1].splitlines()[0][:200] + ")"
    said = next((o.message for o in outcomes if isinstance(o, Failure)), "")
    return f"the child could not compile them ({said.splitlines()[0][:200]})" if said else "Triton did not compile them"


SKIPPED = "foresaw nothing new: an earlier grading of these files compiled every kernel its pass foresaw"


def ahead_of(grading) -> Precompile | None:
    """The pass for a grading (grading.AssignmentGrading), where it has children (`children_for`), a
    part launches Triton kernels and it foresees the tier (`predicts`), started: the correctness
    child's job waits for what the cases launch (`cases_compiled`), the timing child's for what
    only the benchmarks launch (`finished`). Not where an earlier grading of the very same files on
    this tier ended with its pass complete (compile_cache.foreseen): that grading's cache holds
    every kernel it launched.
    Each wait moves the grading's deadline, and is its phase "precompile"."""
    workers = children_for(grading.settings, grading.device)
    launching = any(cases.launched_on(part, grading.device) for part in grading.assignment.parts)
    if not workers or not launching or not predicts(grading.device):
        return None
    if grading.kept is not None and compile_cache.foreseen(grading.kept, grading.device):
        grading.foreseen = True
        grading.phases.precompiled = SKIPPED
        return None
    ahead = Precompile(grading.job, grading.assignment, grading.device, grading.workdir, grading.view,
                       grading.compiled, grading.budget.left(), workers)  # fmt: skip
    ahead.start()
    grading.precompiling = ahead
    return ahead


def cases_compiled(grading) -> None:
    """The first wave of the grading's pass (`ahead_of`) waited for: the correctness child's job
    goes once what the cases launch is compiled."""
    if grading.precompiling is not None:
        _waited(grading, grading.precompiling.cases_compiled)


def finished(grading) -> Summary | None:
    """The grading's pass (`ahead_of`) waited for to its end, before its timing child gets its job
    or its cache is kept, and what it did said in the grading's phases line. `grading.foreseen`
    says whether the cache will hold every kernel the pass foresaw once this grading has ended."""
    ahead, grading.precompiling = grading.precompiling, None
    if ahead is None:
        return None
    summary = _waited(grading, ahead.finish)
    grading.phases.precompiled = summary.line()
    grading.foreseen = summary.complete
    grading.launcher_keys |= summary.launchers
    return summary


def _waited(grading, wait):
    started = time.monotonic()
    try:
        return wait()
    finally:
        waited = time.monotonic() - started
        grading.budget.deadline += waited
        grading.phases.add("precompile", waited)
