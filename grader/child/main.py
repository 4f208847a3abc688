"""The child's entry point: read the job, make the harness ready, close the door, run the tasks.

Order matters. Everything the harness needs is imported and initialised (torch's CUDA context,
Triton's driver and launch hooks) before any student code runs, so that nothing the student
triggers later has a reason to do what the guard refuses; the profiler's switches are then taken
away (switches.py), the snapshot of the harness's objects is taken next, and the guard, which
alone keeps what the switches stood for, is installed last. The job (seeds, the signing key)
arrives on standard input and lives only in local variables from then on: no file, argument or
module global holds it. A timing child may be started ahead of its tasks (isolation.start_ahead):
it makes its harness ready while the correctness cases run, then reads the tasks, then waits for
the GPU.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

MAX_JOB_BYTES = 16 << 20


def _die_with(lifeline: int) -> None:
    """Exit as soon as the parent is gone (killed with -9, say): nobody would enforce our time
    limit any more. The parent holds the write end of the `lifeline` pipe, so its death reads as
    EOF here (our parent process id tells nothing inside a PID namespace of our own)."""

    def watch() -> None:
        while os.read(lifeline, 1):
            pass
        os._exit(4)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def _prepare_cuda(gpu_memory_gib: float) -> None:
    """Torch may allocate at most the assignment's gpu_memory_gib on this GPU (a cap on torch's
    allocator: memory a kernel of Triton or CUDA C allocates itself is not counted). Triton's
    driver is made ready here too: its first use builds and loads a helper library."""
    import torch
    import triton

    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, gib_fraction(gpu_memory_gib, total)), 0)
    torch.empty(1, device="cuda")
    triton.runtime.driver.active.get_current_device()
    triton.runtime.driver.active.utils  # noqa: B018 (builds the driver's helper library now)
    # The other half of a compile's cache key (`_key_triton`): ptxas's version, asked of ptxas
    # once per process, for this GPU's architecture. Where that fails, a CUDA C part needs no
    # ptxas, and a Triton kernel's compile fails in the student's call, which says why.
    try:
        from triton.backends.nvidia.compiler import get_ptxas_version

        get_ptxas_version(triton.runtime.driver.active.get_current_target().arch)
    except Exception:
        pass


def _kept_outputs_file(job):
    """A GPU child's end of the memory file the parent gave it for its outputs (messages/kept_file.py),
    its mapping begun on a thread now, before the child starts CUDA (`_registered` takes it up);
    None where there is none."""
    if job.kept_fd < 0:
        return None
    from grader.messages.kept_file import Putter

    putter = Putter(job.kept_fd)
    putter.map_ahead()
    return putter


def _registered(putter):
    """The file mapped and pinned, while the GPU is shared and before the guard is installed, so
    that after the last benchmark only the copy is left; None where it cannot be mapped (the
    channel carries the kept outputs then)."""
    if putter is None:
        return None
    try:
        putter.ready()
    except (OSError, ValueError):
        return None
    return putter


def _wait_at_gate(gate: int) -> None:
    """Wait for the parent's byte on the gate. No byte (the parent gone): nothing to grade."""
    if not os.read(gate, 1):
        os._exit(0)


def _benchmarks(job) -> list:
    """A timing child's benchmarks, as tasks (a shown baseline's child's too: running/shown_figures.py):
    none in a correctness child, nor on the CPU tier."""
    return [task for task in job.tasks if task.kind in ("bench", "shown")] if job.device == "cuda" else []


def _compiled_baselines(job, benchmarks: list) -> tuple[object, list]:
    """The assignment, and those of the `benchmarks` that time a compiled shown baseline
    (spec.Shown; a shown baseline's child's tasks); (None, []) where nothing is timed."""
    if not benchmarks:
        return None, []
    from grader.assignment.loading import load_assignment

    assignment = load_assignment(Path(job.assignment_dir))
    parts = {part.name: part for part in assignment.parts}
    return assignment, [task for task in benchmarks
                        if task.kind == "shown" and parts[task.part].shown and parts[task.part].shown.compiled]  # fmt: skip


def _takes_gradients(assignment) -> bool:
    from grader.assignment import cases
    from grader.judging import warm_up

    return warm_up.takes_gradients(cases.reference_module(assignment.reference_path))


def _warm_baselines(assignment, benchmarks: list, compiled: list, device: str = "cuda") -> None:
    """torch's reference of each part called once, on its first benchmark's shape, and each shown
    baseline compiled, before any student code runs and before the timing holds the GPU alone.

    A reference's first call in a process loads its CUDA kernels (lazily, module by module) and
    starts what its library needs: the first backward of torch's attention took 2.0-3.2 s of a
    timed phase's warm-up on an H200, where its later ones take milliseconds. Once per part, not
    per shape: this runs while the child holds the GPU beside other gradings, a hold no timed
    phase starts during, and with the reference called on every shape the timing children's
    starts held it 1.1-5.1 s each on an H200 (the longest, a part of eight shapes up to
    16384 x 16384). And in a shown baseline's child (running/shown_figures.py),
    timing.shown_baseline compiles afresh for each benchmark (torch._dynamo.reset), inside the
    timed phase: torch.compile's work then finds inductor's graphs and kernels in the compiler
    cache (TORCHINDUCTOR_CACHE_DIR) instead of making them while other students wait for the
    GPU. The timed phase warms both up again as before; neither call here is judged: one that
    fails here fails again there, and is reported there."""
    import torch

    from grader.assignment import cases
    from grader.child import marks

    parts = {part.name: part for part in assignment.parts}
    first = {}
    for task in benchmarks:
        first.setdefault(task.part, task)
    for task in benchmarks:
        part = parts[task.part]
        if first[task.part] is not task and task not in compiled:
            continue
        try:
            inputs = cases.make_inputs(assignment, part, part.benchmarks[task.index], task.seed, device)
            with torch.no_grad():
                if first[task.part] is task:
                    # Marked as the timed phase marks torch's calls: a backward's kernels start on
                    # autograd's thread, which the witness would otherwise find working outside every call.
                    with marks.current().window("baseline"):
                        cases.function(assignment, part.baseline)(**inputs)
                if task in compiled:
                    torch._dynamo.reset()
                    torch.compile(cases.function(assignment, part.shown.function), dynamic=False)(**inputs)
        except Exception:
            pass
        inputs = None
    if compiled:
        torch._dynamo.reset()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def gib_fraction(gib: float, total: int) -> float:
    return gib * 2**30 / total


def _use_triton_key(key: str) -> None:
    """Triton's digest of its own files, as the parent worked it out (grader/running/triton_key.py), in
    place of hashing them here: what Triton's cache and autotuner call, before any student code."""
    if not key:
        return
    from triton.runtime import autotuner, cache

    def triton_key() -> str:
        return key

    for module in (cache, autotuner):
        if hasattr(module, "triton_key"):
            module.triton_key = triton_key


def _preload(what: str) -> None:
    """A child started ahead of its job (isolation.spawn) imports what it will need meanwhile
    ("torch": torch and Triton). Nothing starts on the GPU."""
    if what != "torch":
        return
    import torch  # noqa: F401
    import triton  # noqa: F401

    _key_triton()


def _key_triton() -> None:
    """Where Triton compiles for the GPU (not its interpreter), its first compile in a process,
    even one that finds the kernel in the cache, hashes Triton's own files (its 415 MB library
    among them) into the cache key, once per process: that first compile took 0.35 s of a timed
    phase's first benchmark on an H200, while the phase held the GPU alone, and the hash alone
    takes 0.28 s on the 2-core machine. The parent hands it over (`_use_triton_key`), so this
    takes nothing; where it did not (no Triton in the parent's Python), the hash is done here,
    before any gate, kept for the process (`triton_key` is cached), and student code finds it done."""
    from triton import knobs
    from triton.runtime import cache

    if not knobs.runtime.interpret:
        cache.triton_key()
    # The cache manager the grader named for this child (isolation.TIMED_PICKS) is imported here,
    # before any student code, not at the first autotuning, inside a student's call.
    knobs.cache.manager_class  # noqa: B018


def main(lifeline: str, preload: str = "", triton_key: str = "", held: str = "") -> None:
    # The grader's witness, where the parent preloaded it, is this process's alone: not ptxas's or
    # the compilers' (isolation._witness). The launchers before this process needed it passed on.
    os.environ.pop("LD_PRELOAD", None)
    _die_with(int(lifeline))
    if held:
        # Started ahead on a GPU shared with other gradings, it imports only once the parent lets
        # it, on its gate (isolation.Spawned.let_import): not all at once with the other child.
        _wait_at_gate(int(held))
    _use_triton_key(triton_key)  # before anything compiles: every child imports Triton
    _preload(preload)
    raw = sys.stdin.buffer.readline(MAX_JOB_BYTES)
    from grader.messages.decoding import read_job, read_tasks
    from grader.messages.frames import FrameWriter
    from grader.messages.reports import Hello, Imported

    job = read_job(raw)
    if not job.ahead:
        sys.stdin.close()
    writer = FrameWriter(job.channel_fd, bytes.fromhex(job.key))
    job.key = ""
    del raw
    benchmarks = _benchmarks(job)
    putter = _kept_outputs_file(job)  # its page table made on a thread from here on
    assignment, compiled_baselines = _compiled_baselines(job, benchmarks)
    if job.device == "cuda":
        import torch  # noqa: F401 (no CUDA yet: importing starts nothing on the GPU)
        import triton  # noqa: F401

        _key_triton()  # at once where it was preloaded

        if compiled_baselines:
            # torch.compile's own modules take seconds to import: a timing child that shows a
            # compiled baseline (spec.Shown) imports them here, not while it holds the GPU alone.
            import torch._dynamo  # noqa: F401
            import torch._inductor.compile_fx  # noqa: F401
        if benchmarks and _takes_gradients(assignment):
            # The baselines' first gradient (`_warm_baselines`) imports torch's symbolic shapes and
            # sympy (judging/warm_up.py): here, before the start of CUDA and its shared hold.
            import torch.fx.experimental.symbolic_shapes  # noqa: F401
    if job.gate_fd >= 0:
        # On a GPU shared with other gradings: CUDA starts only once the parent holds the GPU
        # shared, never during another student's timed phase.
        writer.send(Imported())
        _wait_at_gate(job.gate_fd)
    if job.device == "cuda":
        _prepare_cuda(job.gpu_memory_gib)
        from grader.child import hooked_picks, marks

        marks.install(job.device)  # the witness's marks, ready before any student code (marks.py)
        hooked_picks.install()  # an autotuner's kept timings, for configs with a pre_hook too
        if not benchmarks:
            from grader.child import correctness_autotune

            correctness_autotune.install()  # a correctness run: its autotuners time configs briefly
    else:
        from grader.child import dry_run, interpreter

        interpreter.install(dry=bool(job.precompile))
        dry_run.install(job.precompile)  # a precompile child: student code sees the tier it predicts
    # torch's compiler cache folder (isolation.child_environment) exists on both tiers before any
    # student code runs, whether or not torch._dynamo is imported.
    os.makedirs(os.environ["TORCHINDUCTOR_CACHE_DIR"], exist_ok=True)
    if benchmarks:
        _warm_baselines(assignment, benchmarks, compiled_baselines)
    putter = _registered(putter)
    del assignment  # the worker reads its own, after the snapshot of the harness's objects
    from torch.utils._python_dispatch import TorchDispatchMode

    if not hasattr(TorchDispatchMode, "_should_skip_dynamo"):
        # A torch without the dispatch mode's opt-out (allocations.GuardedAllocations) imports
        # torch._dynamo lazily at the mode's first use, which the guard would refuse: import it now.
        # torch 2.11 (the GPU image) and 2.13 both have the opt-out, which saves 1 s of each child's
        # start on the CPU machine and 6.5 s on the H100's.
        import torch._dynamo  # noqa: F401
    from grader.child import boundary, guard, hooks, submission, switches, worker
    from grader.child.launcher import CudaEntry
    from grader.child.snapshot import HarnessSnapshot

    # Ctrl-C's handler raises KeyboardInterrupt wherever the main thread is, in the harness's code
    # too, and `_thread.interrupt_main` calls it from any thread: the child keeps the default (it
    # dies, and the parent says so). Student code may set no handler of its own (switches.py).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    root = Path(job.submission_dir)
    hooks.install(root, on_interpreted_launch=_target_recorder(job.device), dry=bool(job.precompile))
    if job.unguarded:  # tests only (messages/job.py): student code in full control of this process
        changed = HarnessSnapshot.take().changed
        refusals, is_library = (lambda: []), guard.library_test(root)
    else:
        # Every callable a submission hands Triton runs as its own code, every launch argument is
        # plain data: nothing of the student's runs as Triton's under a sanctioned entry (boundary.py).
        boundary.install()
        # The profiler's switches are taken away before student code runs: gates stand in for them,
        # and only the guard's hook, installed below, holds what they stand for.
        kept = switches.take_away()
        changed = HarnessSnapshot.take().changed  # the bound method: rebinding `changed` later silences nothing
        sanctioned = boundary.sanctioned_entries() | {CudaEntry.__call__.__code__}
        if job.device != "cuda":
            sanctioned |= interpreter.sanctioned_entries()  # kernel.warmup() compiles for the GPU, as on one
        # A wrapper is never an entry: one code object checks every launch (boundary.py), Heuristics.run's too.
        assert boundary.WRAPPER_CODES.isdisjoint(sanctioned), "a wrapper of the grader's was sanctioned"
        edges = {worker.call.__code__, submission.run_module.__code__, boundary.BOUNDARY}
        refusals, is_library = guard.install(root, sanctioned, edges, kept)
        del kept
    if benchmarks:
        from grader.child import timing

        timing.gate_ahead()  # its compile and launcher before the exclusive hold, not inside it
    writer.send(Hello("ready"))
    if job.ahead:
        # Started ahead (isolation.start_ahead): its start is done, beside the correctness cases; the
        # benchmarks it runs are those of the parts that passed them, which the parent sends now.
        chosen = sys.stdin.buffer.readline(MAX_JOB_BYTES)
        sys.stdin.close()
        if not chosen:
            os._exit(0)  # nothing to time: the parent ended the wait
        job.tasks = read_tasks(chosen)
    if job.gate_fd >= 0:
        # Student code runs only once the parent holds the GPU for this phase.
        _wait_at_gate(job.gate_fd)
    worker.Worker(job, writer.send, refusals, changed, is_library, _target_reports(job.device), putter).run()
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: student atexit hooks cannot change what was sent


def _target_recorder(device: str):
    """On the CPU tier, each interpreted launch is also compiled for the GPU (gpu_target.py)."""
    if device == "cuda":
        return None
    from grader.child import gpu_target

    return gpu_target.record_launch


def _target_reports(device: str):
    """On the CPU tier, the GPU's verdict on each kernel a task launched, and how each loads its
    tiles, as messages. (On the GPU tier the launch hook reads the loads: hooks.py.)"""
    if device == "cuda":
        return None
    from grader.child import gpu_target, interpreter
    from grader.messages.reports import KernelLoads, TargetReport

    def reports() -> tuple[list[TargetReport], list[KernelLoads]]:
        compiled = gpu_target.compile_all()
        targets = [TargetReport(r.kernel, r.where, r.compiled, r.error, r.shared_bytes, r.shared_limit, r.tf32_dots,
                                r.registers or 0, r.spills or 0, r.autotuned, r.missing_allocator, r.skippable,
                                resources=r.resources, cached=r.cached, key=r.key)
                   for r in compiled]  # fmt: skip
        return targets, [r.loads for r in compiled if r.loads is not None]

    def begin() -> None:
        gpu_target.forget_launches()  # an earlier task's, left unreported when its call raised
        interpreter.forget_tunings()  # each task's autotuners compare their configs afresh

    return _TaskTargets(begin, reports)


class _TaskTargets:
    """A task's kernels as the GPU would compile them: `begin()` as the task starts, so that
    nothing an earlier task left in the process decides its verdict, then called once the task's
    calls are done, for every kernel they launched."""

    def __init__(self, begin, reports):
        self.begin, self._reports = begin, reports

    def __call__(self):
        return self._reports()
