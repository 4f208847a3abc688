"""The child's tasks: load the student's files, run each case or benchmark, report what was seen.

It judges nothing: references, comparisons and scores are the parent's. Every report leaves as a
typed, signed message (grader/messages/); an output tensor's bytes ride in the same frame, or in
the parent's kept outputs' file (sending.py).
Student code is entered through `call` alone (and submission.run_module at import), which the
guard (guard.py) takes as the edge between the harness and the student.
"""

from __future__ import annotations

import math
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import torch

from grader.assignment import cases
from grader.judging import poison
from grader.child import dispatch_state, imported, marks, precompile, sending, timing
from grader.child.allocations import GuardedAllocations
from grader.child.guard import TAMPERING
from grader.child.failures import classify
from grader.child.launcher import CudaEntry
from grader.child.monitor import CallMonitor, TimingMonitor, merge
from grader.child.submission import SubmissionError, entry_point, load_module
from grader.messages.job import Job, Task
from grader.messages.reports import Activity, BenchReport, CaseReport, Done, Failure, Finished, Followup, Observation, ProbeReport, Returned, Start, Timings  # fmt: skip
from grader.assignment.loading import load_assignment
from grader.assignment.spec import Assignment, Part

FOLLOWUP_SEED_OFFSET = 1  # a case's second call draws its new inputs from the case's seed plus this

# The harness's own references, taken when the grader is imported, before any student code runs:
# a submission that rebinds them changes nothing here, and is reported (snapshot.HarnessSnapshot).
_synchronize = torch.cuda.synchronize
_memory_allocated = torch.cuda.memory_allocated
_max_memory_allocated = torch.cuda.max_memory_allocated
_reset_peak = torch.cuda.reset_peak_memory_stats
_max_memory_reserved = torch.cuda.max_memory_reserved
_perf_counter = time.perf_counter
_take_state, _put_state_back, _check_clean = dispatch_state.take, dispatch_state.put_back, dispatch_state.check_clean
_HARNESS_MODES = (GuardedAllocations,)  # the only mode the harness puts on a stack around a call (monitor.py)


def call(fn: Callable, *args, **kwargs):
    """Where the harness hands control to student code; torch's dispatch state comes back as the
    call found it (dispatch_state.py), and a thread the call left running is its failure
    (imported.py). Where the witness records the process, the call is marked for it (marks.py):
    whatever the call starts on the GPU, on any stream or thread, is seen as the call's."""
    before, threads = _check_clean(_HARNESS_MODES), imported.running()
    try:
        with marks.current().window():
            return fn(*args, **kwargs)
    finally:
        _put_state_back(before)
        imported.check_threads(threads)


class Worker:
    def __init__(self, job: Job, send: Callable, refusals: Callable, changed: Callable, is_library: Callable,
                 targets=None, putter=None):  # fmt: skip
        self.job, self.send, self.refusals, self.changed = job, send, refusals, changed
        # CPU tier: what the GPU would say of the kernels a case launched, and their loads: `begin()`
        # as the case begins, then called once its calls are done (main.py, _target_reports)
        self.targets = targets
        self.is_library = is_library
        self.assignment: Assignment = load_assignment(Path(job.assignment_dir))
        self.device = job.device
        self.root = Path(job.submission_dir).resolve()
        self.entries: dict[str, object] = {}
        self.patched_at_import: list[str] = []
        self.refused_at_import: list[str] = []  # tampering while a module loaded: every later task's
        self.carried = imported.Carried()  # imports' work, threads left running, host reads (imported.py)
        self.copy_gbps = 0.0
        self.outputs = sending.Outputs(send, job, putter)  # `putter`: main._kept_outputs_file
        self.marks = marks.current()

    def entry(self, part: Part):
        """The student's function for a part, loaded once; a load failure is re-raised per task."""
        if part.name not in self.entries:
            # Under a call's monitor: what the import runs is judged with every later task (imported.py),
            # and what it runs on the GPU is marked for the witness as the import's.
            with self.monitor() as monitor:
                before, threads = _take_state(), imported.running()
                try:
                    with marks.current().window("import"):
                        self.entries[part.name] = self.load_entry(part)
                except SubmissionError as error:
                    self.entries[part.name] = error
                try:
                    _put_state_back(before)
                except dispatch_state.LeftBehind as left:
                    self.refused_at_import.append(f"torch's state changed while {part.file} was imported: {left}")
                    if not left.restored:
                        raise
                self.carried.threads += imported.left_running(threads)
            self.patched_at_import = self.patched_at_import or self.changed()
            # Taken now: an import that tampered runs no more, and each task that uses it says so.
            self.refused_at_import += self.tampering()
            self.carried.imported(monitor.activity(), part.file)
        found = self.entries[part.name]
        if isinstance(found, SubmissionError):
            raise found
        return found

    def load_entry(self, part: Part):
        if part.is_cuda:
            return CudaEntry(self.assignment, part, Path(self.job.libraries[part.name]))
        path = self.root / self.assignment.name / part.file
        module = load_module(path, f"student_{self.assignment.name}_{part.name}")
        return entry_point(module, path, part.entry)

    def monitor(self) -> CallMonitor:
        return CallMonitor(self.root, self.device, self.is_library)

    def synchronize(self) -> None:
        """Device-wide: work the call left running on any stream is done before its output is read."""
        if self.device == "cuda":
            _synchronize()

    def save(self, task: Task, name: str, out: object, later: bool = False) -> Returned:
        """Send a plain tensor's bytes to the parent (`later`: once every task is done, `pay`);
        anything else is described, never read."""
        return self.outputs.save(task, name, out, later)

    def pay(self) -> None:
        self.outputs.pay()

    def observe(self, task: Task, name: str, out: object, given: dict, expected: dict, monitor) -> Observation:
        """What the parent needs to judge one returned value, read after a device-wide synchronize."""
        self.synchronize()
        given = cases.tensors(given)
        observation = Observation(self.save(task, name, out),
                                  [n for n, t in given.items() if not poison.same_bits(t, expected[n])])  # fmt: skip
        if observation.returned.kind == "tensor":  # a plain tensor: safe to inspect
            observation.overrun = monitor.overrun_of(out)
            observation.aliases = [n for n, t in given.items() if _shares_memory(out, t)]
        return observation

    def run_case(self, task: Task) -> CaseReport:
        if self.targets is not None:
            self.targets.begin()
        part = self.part(task)
        entry = self.entry(part)
        inputs = cases.case_inputs(self.assignment, part, part.cases[task.index], task.seed, self.device)
        guarded = {name: poison.guarded_copy(t) for name, t in cases.tensors(inputs).items()}
        given = {**inputs, **{name: g.tensor for name, g in guarded.items()}}
        started = _perf_counter()
        with self.monitor() as monitor, torch.no_grad():
            out = call(entry, **given)
            # Further runs on the same inputs must agree bit for bit: a race shows as drift.
            again = [call(entry, **given) for _ in range(task.repeats - 1)]
        seconds = _perf_counter() - started
        report = CaseReport(self.observe(task, "first", out, given, inputs, monitor), monitor.activity(),
                            calls=task.repeats, seconds=seconds)  # fmt: skip
        report.unstable = sum(_differs(out, other) for other in again)
        if report.observation.returned.kind == "tensor" and self.wants_followup(part, task):
            report.followup, followed = self.followup(part, task, out, given)
            report.activity, report.calls = merge(report.activity, followed), report.calls + 1
        if self.targets is not None:
            # The second call's kernels are this case's too: compiled after it, not left for the next case.
            report.activity.targets, report.activity.loads = self.targets()
        return report

    def part(self, task: Task) -> Part:
        return next(p for p in self.assignment.parts if p.name == task.part)

    def wants_followup(self, part: Part, task: Task) -> bool:
        """Every case on a GPU, and of a part whose memory is measured (on the second call); on the
        CPU tier, where the interpreter is slow, otherwise the part's smallest case."""
        if self.device == "cuda" or part.peak_memory is not None:
            return True
        tier = [i for i, case in enumerate(part.cases) if case.runs_on(self.device)]
        return task.index == min(tier, key=lambda i: math.prod(part.cases[i].shape))

    def followup(self, part: Part, task: Task, first: torch.Tensor, given: dict) -> tuple[Followup, Activity]:
        """Call again on new inputs of the same shape, written into the same memory as the first
        ones: an output cached by shape or by `data_ptr()` comes back stale, and an output that
        reuses the memory of the first one shows as such."""
        seed = task.seed + FOLLOWUP_SEED_OFFSET
        fresh = cases.case_inputs(self.assignment, part, part.cases[task.index], seed, self.device)
        before = first.detach().clone()  # the first output as returned, whatever the second call does to it
        for name, tensor in cases.tensors(given).items():
            tensor.copy_(fresh[name])
        with self.monitor() as monitor, torch.no_grad(), self.allocation_meter(monitor) as allocated:
            out = call(self.entry(part), **given)
        followup = Followup(seed, self.observe(task, "followup", out, given, fresh, monitor), allocated[0])
        if followup.observation.returned.kind == "tensor":
            followup.reuses_first_output = _shares_memory(out, first)
            followup.same_as_first = poison.same_bits(out, before)
        return followup, monitor.activity()

    @contextmanager
    def allocation_meter(self, monitor: CallMonitor):
        """Yields a list that holds, once the block is left, how many bytes the call allocated at
        its peak; enter it last, so that nothing the grader does after the call counts.

        On a GPU, torch's own peak counter over the call (read once the device is idle), so
        everything torch's allocator handed out counts, freed or not; on the CPU, where torch keeps
        no such counter, the bytes of every tensor the call allocated (a bound on the peak). This
        is the second call of a case: compiling and autotuning, which allocate buffers of their
        own, are done by then. The guard cells around each allocation are the grader's, not
        counted; what the call asked for counts to the byte, unrounded, as on the CPU."""
        first = len(monitor.allocations)
        allocated = [0]
        if self.device == "cuda":
            _synchronize()
            base = _memory_allocated()
            _reset_peak()
        try:
            yield allocated
        finally:
            mine = monitor.allocations[first:]
            if self.device == "cuda":
                _synchronize()
                allocated[0] = _max_memory_allocated() - base - sum(_guard_bytes(g) for g in mine)
            else:
                allocated[0] = sum(guarded.nbytes for guarded in mine)

    def run_probe(self, task: Task) -> ProbeReport:
        """CPU tier, CUDA part: call the launcher once (it cannot launch without a GPU) to tell
        an untouched stub, which returns its not-implemented code, from an attempt."""
        part = self.part(task)
        inputs = cases.make_inputs(self.assignment, part, part.cases[task.index], task.seed, self.device)
        call(self.entry(part), **inputs)
        return ProbeReport()

    def run_bench(self, task: Task) -> BenchReport:
        part = self.part(task)
        case = part.benchmarks[task.index]
        entry = self.entry(part)
        baseline, make_inputs = cases.function(self.assignment, part.baseline), self.bench_inputs(part, case)
        first = self.settle()
        with TimingMonitor(self.root) as session, torch.no_grad():
            measured = timing.measure(call, entry, baseline, make_inputs, part.performance,
                                      part.tolerance_for(case.dtype), session.harness)  # fmt: skip
            began = timing.now()
        activity = session.activity()
        spent = {**measured.harness_s, "first": first, "profile": timing.now() - began}
        report = BenchReport(measured.student, measured.baseline, activity, measured.checks,
                             measured.remeasured, measured.disturbed_retakes, measured.retaken, measured.gated,
                             kept_seed=measured.kept_seed, copy_gbps=self.copy_gbps,
                             device_name=torch.cuda.get_device_name(), warmup_s=measured.warmup_s,
                             harness_s=spent)  # fmt: skip
        kept = measured.kept
        if type(kept) is torch.Tensor:
            # A copy of the harness's own, on the GPU (a tenth of a millisecond): it is sent only
            # after the last benchmark (`pay`), and student code that runs meanwhile can change
            # the tensor it returned, never this one.
            kept = kept.detach().clone()
        del measured
        report.kept = Observation(self.save(task, "kept", kept, later=True))
        return report

    def bench_inputs(self, part: Part, case) -> Callable[[int], dict]:
        """A benchmark's fresh inputs, drawn from a seed."""
        return lambda seed: cases.make_inputs(self.assignment, part, case, seed, self.device)

    def settle(self) -> float:
        """The process's first timing: the GPU, which may have idled at the gate, brought up to
        speed, and the copy bandwidth measured. Its seconds (none after the first)."""
        began = timing.now()
        if not self.copy_gbps:
            timing.settle(timing.l2_flush_buffer(torch.device(self.device)))
            self.copy_gbps = timing.copy_bandwidth(torch.device(self.device))
        return timing.now() - began

    def run_shown(self, task: Task) -> BenchReport:
        """A part's shown baseline (spec.Shown) on a benchmark's shape, timed against torch's graded one
        in a child that runs no student code, once per machine (running/shown_figures.py)."""
        part = self.part(task)
        case = part.benchmarks[task.index]
        first = self.settle()
        report = BenchReport(Timings(), Timings(), Activity(), copy_gbps=self.copy_gbps)
        began = timing.now()
        try:
            with torch.no_grad():
                report.shown = timing.shown_baseline(cases.function(self.assignment, part.shown.function),
                                                     part.shown.compiled, cases.function(self.assignment, part.baseline),
                                                     self.bench_inputs(part, case), part.performance,
                                                     part.tolerance_for(case.dtype), "grader-shown")  # fmt: skip
        except Exception as error:  # shown, never graded: its failure is only reported
            report.shown_error = f"{type(error).__name__}: {error}"[:500]
        report.harness_s = {"first": first, "shown": timing.now() - began}
        report.device_name = torch.cuda.get_device_name()
        return report

    def run(self) -> None:
        runs = {"case": self.run_case, "bench": self.run_bench, "probe": self.run_probe, "shown": self.run_shown,
                "record": lambda task: precompile.record(self, task, call),
                "compile": lambda task: precompile.compile_one(self, task)}  # a precompile child's (Job.precompile)
        reserved = 0
        for task in self.job.tasks:
            self.send(Start(task.id))
            try:
                # Whatever student code ran inside the harness's own (a finalizer of an object the
                # harness let go) left nothing behind: checked as the task begins, and as it ends.
                clean = _check_clean(())
                try:
                    outcome, activity = runs[task.kind](task), None
                finally:
                    _put_state_back(clean)
            except BaseException as error:  # the student's exception, whatever it is, is this task's verdict
                outcome, activity = classify(error, self.root), Activity()
                self.carried.failed(error)
            account = activity if activity is not None else getattr(outcome, "activity", Activity())
            self.account(account)
            account.windows = self.marks.take()
            self.marks.flush()  # the task's records reach the parent before its report does
            self.send(Done(task.id, outcome, activity))
            if isinstance(outcome, Failure) and outcome.fatal:
                os._exit(3)  # a dead CUDA context: the parent resumes in a fresh process
            if self.device == "cuda":
                # The allocator keeps what it reserved until emptied, and a reset of the peak
                # (a followup call) starts from what it holds: so this peak covers the task.
                reserved = max(reserved, _max_memory_reserved())
                torch.cuda.empty_cache()
        self.pay()
        self.send(Finished(reserved))

    def tampering(self) -> list[str]:
        """What the guard refused as tampering since the last look, with the student's line (the
        gateways' uses it noted are kept for the task's account: imported.Carried)."""
        found = self.carried.noted(self.refusals())
        return [f"{r.what}" + (f" ({r.where})" if r.where else "") for r in found if r.kind == TAMPERING]

    def account(self, activity: Activity) -> None:
        """What the guard refused and which harness objects were rebound, looked at after every
        task: at import, during a call or while timing; and what every task carries."""
        activity.refused += self.refused_at_import + self.tampering()
        activity.patched = self.changed()
        activity.patched_at_import = bool(self.patched_at_import)
        self.carried.add_to(activity)


def _differs(first: object, again: object) -> int:
    """Elements of a repeated run's output that differ from the first run's, bit for bit."""
    if not (type(first) is torch.Tensor and type(again) is torch.Tensor) or first.shape != again.shape:
        return 0
    return poison.bits_differing(first, again)


def _guard_bytes(guarded: poison.Guarded) -> int:
    """What the grader's handling of one allocation adds on the GPU, beyond the bytes the call asked
    for: the guard cells, and torch's rounding of every block up to a multiple of 512 bytes."""
    return -(-cases.nbytes(guarded.buffer) // 512) * 512 - guarded.nbytes


def _shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two plain tensors live in the same allocation (one is the other, or a view of it)."""
    pointer = a.untyped_storage().data_ptr()
    return pointer != 0 and pointer == b.untyped_storage().data_ptr()
