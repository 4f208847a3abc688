"""The child process: the only place student code runs.

It reads a job (which assignment, which tasks, which seeds), loads the student's files, runs
each task and sends what it observed to the parent over a pipe, one JSON line per event; the
outputs themselves go to files the parent reads. It judges nothing: references, comparisons
and scores are the parent's. Started by isolation.py as a fresh interpreter, never forked.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from grader import cases, poison, timing
from grader.launcher import CudaEntry
from grader.monitor import CallMonitor, HarnessSnapshot, install_triton_hooks
from grader.spec import Assignment, Part, load_assignment
from grader.submission import SubmissionError, entry_point, load_module, student_frames

FATAL_MARKERS = ("CUDA error", "CUDA driver error", "illegal memory access", "unspecified launch failure")
FOLLOWUP_SEED_OFFSET = 1  # a case's second call draws its new inputs from the case's seed plus this

# The harness's own references, taken when the grader is imported, before any student code runs:
# a submission that rebinds them changes nothing here, and is reported (monitor.HarnessSnapshot).
_synchronize = torch.cuda.synchronize
_memory_allocated = torch.cuda.memory_allocated
_max_memory_allocated = torch.cuda.max_memory_allocated
_reset_peak = torch.cuda.reset_peak_memory_stats
_perf_counter = time.perf_counter
_dumps = json.dumps


def classify(error: BaseException, root: Path) -> dict:
    """A student's exception as a reason code and a message that says where it came from."""
    if isinstance(error, SubmissionError):
        return {"reason": error.reason, "message": error.message}
    text = f"{type(error).__name__}: {error}".strip()
    where = student_frames(error, root)
    lowered = text.lower()
    if isinstance(error, NotImplementedError):
        reason, text = "not_implemented", "the entry point still raises NotImplementedError: fill in the stub"
    elif isinstance(error, (MemoryError, torch.OutOfMemoryError)) or "out of memory" in lowered or (
        "can't allocate memory" in lowered
    ):
        reason = "out_of_memory"
    elif type(error).__name__ in ("CompilationError", "InterpreterError"):
        # Under TRITON_INTERPRET=1 a kernel body runs as Python, so what the compiler would
        # reject on a GPU surfaces as an InterpreterError when the kernel runs.
        reason = "compile_error"
    else:
        reason = "crash"
    return {"reason": reason, "message": f"{text[:2000]}\n{where}".rstrip(), "fatal": _is_fatal(text)}


def _is_fatal(text: str) -> bool:
    """A CUDA error poisons the whole context: the parent must go on in a fresh process."""
    return any(marker in text for marker in FATAL_MARKERS)


class Worker:
    def __init__(self, job: dict, channel):
        self.job = job
        self.channel = channel
        self.assignment: Assignment = load_assignment(Path(job["assignment_dir"]))
        self.device = job["device"]
        self.root = Path(job["submission_dir"]).resolve()
        self.outputs = Path(job["outputs_dir"])
        self.entries: dict[str, object] = {}
        if any(p.kernel == "triton" for p in self.assignment.parts):
            install_triton_hooks()
        # Taken last, before any student code is imported. The bound method is kept, so rebinding
        # HarnessSnapshot.changed later cannot silence the check.
        self.harness_changed = HarnessSnapshot.take().changed
        self.patched_at_import: list[str] = []

    def send(self, message: dict) -> None:
        self.channel.write(_dumps(message) + "\n")
        self.channel.flush()

    def entry(self, part: Part):
        """The student's function for a part, loaded once; a load failure is re-raised per task."""
        if part.name not in self.entries:
            try:
                self.entries[part.name] = self.load_entry(part)
            except SubmissionError as error:
                self.entries[part.name] = error
            self.patched_at_import = self.patched_at_import or self.harness_changed()
        found = self.entries[part.name]
        if isinstance(found, SubmissionError):
            raise found
        return found

    def load_entry(self, part: Part):
        if part.is_cuda:
            return CudaEntry(self.assignment, part, Path(self.job["libraries"][part.name]))
        path = self.root / self.assignment.name / part.file
        module = load_module(path, f"student_{self.assignment.name}_{part.name}")
        return entry_point(module, path, part.entry)

    def synchronize(self) -> None:
        """Device-wide: work the call left running on any stream is done before its output is read."""
        if self.device == "cuda":
            _synchronize()

    def save(self, name: str, out: object) -> dict:
        if type(out) is not torch.Tensor:
            if isinstance(out, torch.Tensor):  # a subclass's methods would run student code as we read it
                return {"type": "Tensor subclass", "class": type(out).__qualname__}
            return {"type": type(out).__name__}
        path = self.outputs / f"{name.replace(':', '_')}.pt"
        torch.save(out.detach().to("cpu", copy=True).contiguous(), path)
        return {"type": "Tensor", "file": str(path)}

    def run_case(self, part: Part, task: dict) -> dict:
        case = part.cases[task["index"]]
        entry = self.entry(part)
        inputs = cases.make_inputs(self.assignment, part, case, task["seed"], self.device)
        guarded = {name: poison.guarded_copy(t) for name, t in cases.tensors(inputs).items()}
        given = {**inputs, **{name: g.tensor for name, g in guarded.items()}}
        started = _perf_counter()
        # The monitor is entered around student calls only: the harness's own work between them
        # (comparisons, new inputs) must not count as the student's ops or allocations.
        with CallMonitor(self.root) as monitor, torch.no_grad():
            out = entry(**given)
            # Further runs on the same inputs must agree bit for bit: a race shows as drift.
            again = [entry(**given) for _ in range(task.get("repeats", 1) - 1)]
        seconds = _perf_counter() - started
        observed = self.observe(task["id"], out, given, inputs, monitor)
        observed["unstable"] = sum(self.differs(out, other) for other in again)
        if "file" in observed["output"] and self.wants_followup(part, task):
            observed["followup"] = self.followup(part, task, out, given, monitor)
        return {
            **observed,
            "ops": sorted(monitor.ops),
            "compute_ops": sorted(monitor.compute_ops),
            "calls": task.get("repeats", 1) + ("followup" in observed),  # the monitor saw every one
            "launches": monitor.launch_counts(),
            "seconds": seconds,
        }

    def observe(self, name: str, out: object, given: dict, expected: dict, monitor: CallMonitor) -> dict:
        """What the parent needs to judge one returned value, read after a device-wide synchronize."""
        self.synchronize()
        given = cases.tensors(given)
        observed = {
            "output": self.save(name, out),
            "modified_inputs": [n for n, t in given.items() if not poison.same_bits(t, expected[n])],
        }
        if "file" in observed["output"]:  # a plain tensor: safe to inspect
            observed["overrun"] = monitor.overrun_of(out)
            observed["aliases"] = [n for n, t in given.items() if _shares_memory(out, t)]
        return observed

    def wants_followup(self, part: Part, task: dict) -> bool:
        """Every case on a GPU, and of a part whose memory is measured (on the second call); on the
        CPU tier, where the interpreter is slow, otherwise the part's smallest case."""
        if self.device == "cuda" or part.peak_memory is not None:
            return True
        tier = [i for i, case in enumerate(part.cases) if case.runs_on(self.device)]
        return task["index"] == min(tier, key=lambda i: math.prod(part.cases[i].shape))

    def followup(self, part: Part, task: dict, first: torch.Tensor, given: dict, monitor: CallMonitor) -> dict:
        """Call again on new inputs of the same shape, written into the same memory as the first
        ones: an output cached by shape or by `data_ptr()` comes back stale, and an output that
        reuses the memory of the first one shows as such."""
        seed = task["seed"] + FOLLOWUP_SEED_OFFSET
        fresh = cases.make_inputs(self.assignment, part, part.cases[task["index"]], seed, self.device)
        before = first.detach().clone()  # the first output as returned, whatever the second call does to it
        for name, tensor in cases.tensors(given).items():
            tensor.copy_(fresh[name])
        with monitor, torch.no_grad(), self.allocation_meter(monitor) as allocated:
            out = self.entry(part)(**given)
        observed = self.observe(f"{task['id']}:followup", out, given, fresh, monitor)
        observed["allocated_bytes"] = allocated[0]
        if "file" in observed["output"]:
            observed["reuses_first_output"] = _shares_memory(out, first)
            observed["same_as_first"] = poison.same_bits(out, before)
        return {"seed": seed, **observed}

    @contextmanager
    def allocation_meter(self, monitor: CallMonitor):
        """Yields a list that holds, once the block is left, how many bytes the call allocated at
        its peak; enter it last, so that nothing the grader does after the call counts.

        On a GPU, torch's own peak counter over the call (read once the device is idle), so
        everything torch's allocator handed out counts, freed or not; on the CPU, where torch keeps
        no such counter, the bytes of every tensor the call allocated with `empty*` (a bound on the
        peak). This is the second call of a case: compiling and autotuning, which allocate buffers
        of their own, are done by then. The guard cells the grader puts around each allocation
        (poison.py) are the grader's, not counted; what the call asked for with `empty*` counts to
        the byte, unrounded, as on the CPU."""
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

    @staticmethod
    def differs(first: object, again: object) -> int:
        """Elements of a repeated run's output that differ from the first run's, bit for bit."""
        if not (isinstance(first, torch.Tensor) and isinstance(again, torch.Tensor)) or first.shape != again.shape:
            return 0
        return poison.bits_differing(first, again)

    def run_probe(self, part: Part, task: dict) -> dict:
        """CPU tier, CUDA part: call the launcher once (it cannot launch without a GPU) to tell
        an untouched stub, which returns its not-implemented code, from an attempt."""
        case = part.cases[task["index"]]
        inputs = cases.make_inputs(self.assignment, part, case, task["seed"], self.device)
        self.entry(part)(**inputs)
        return {"probe": "called"}

    def run_bench(self, part: Part, task: dict) -> dict:
        case = part.benchmarks[task["index"]]
        entry = self.entry(part)
        baseline = cases.function(self.assignment, part.baseline)
        pool = [cases.make_inputs(self.assignment, part, case, seed, self.device) for seed in task["pool_seeds"]]
        with torch.no_grad():
            measured = timing.measure(entry, baseline, pool, part.performance, task["keep_at"])
        kept = measured.pop("kept")
        del pool
        if "copy_gbps" not in self.job:
            self.job["copy_gbps"] = timing.copy_bandwidth(torch.device(self.device))
        return {**measured, "output": self.save(task["id"], kept), "copy_gbps": self.job["copy_gbps"],
                "device_name": torch.cuda.get_device_name()}

    def run(self) -> None:
        parts = {p.name: p for p in self.assignment.parts}
        for task in self.job["tasks"]:
            self.send({"event": "start", "task": task["id"]})
            part = parts[task["part"]]
            try:
                run = {"case": self.run_case, "bench": self.run_bench, "probe": self.run_probe}[task["kind"]]
                outcome = run(part, task)
            except BaseException as error:  # the student's exception, whatever it is, is this task's verdict
                outcome = {"error": classify(error, self.root)}
            patched = self.harness_changed()
            if patched:  # looked at after every task: at import, during a call or while timing
                outcome["patched"] = {"objects": patched, "at_import": bool(self.patched_at_import)}
            self.send({"event": "done", "task": task["id"], "outcome": outcome})
            if outcome.get("error", {}).get("fatal"):
                os._exit(3)  # a dead CUDA context: the parent resumes in a fresh process
            if self.device == "cuda":
                torch.cuda.empty_cache()
        self.send({"event": "finished"})


def _guard_bytes(guarded: poison.Guarded) -> int:
    """What the grader's handling of one allocation adds on the GPU, beyond the bytes the call asked
    for: the guard cells, and torch's rounding of every block up to a multiple of 512 bytes."""
    return -(-cases.nbytes(guarded.buffer) // 512) * 512 - guarded.nbytes


def _shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two plain tensors live in the same allocation (one is the other, or a view of it)."""
    pointer = a.untyped_storage().data_ptr()
    return pointer != 0 and pointer == b.untyped_storage().data_ptr()


def _die_with(lifeline: int) -> None:
    """Exit as soon as the parent is gone (killed with -9, say): nobody would enforce our time
    limit any more, and an endless student loop would run forever. The parent holds the write end
    of the `lifeline` pipe, so its death reads as EOF here (our parent process id tells nothing
    inside a PID namespace of our own)."""

    def watch() -> None:
        while os.read(lifeline, 1):
            pass
        os._exit(4)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def _cap_gpu_memory(gib: float) -> None:
    """Torch may allocate at most the assignment's gpu_memory_gib on this GPU (a cap on torch's
    allocator: memory a kernel of Triton or CUDA C allocates itself is not counted)."""
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, gib * 2**30 / total), 0)


def main(argv: list[str], sandbox: str = "none (not started by isolation.BOOT)") -> None:
    job_path, fd, lifeline = argv
    channel = os.fdopen(int(fd), "w", buffering=1)
    job = json.loads(Path(job_path).read_text())
    _die_with(int(lifeline))
    sys.stdin.close()
    channel.write(json.dumps({"event": "sandbox", "status": sandbox}) + "\n")
    if job["device"] == "cuda":
        _cap_gpu_memory(job["gpu_memory_gib"])
    Worker(job, channel).run()
    channel.close()
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: student atexit hooks cannot change what was sent
