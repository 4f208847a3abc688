"""Running student code in a fresh child process, and reading back what it reports.

The parent spawns `python -I` (a new interpreter, never a fork) inside the sandbox (sandbox.py),
with a wall-clock limit and the assignment's host memory and process limits (limits.py), through
a launcher that puts up the walls the kernel keeps (exec_walls.py: its memory cgroup, and Landlock
where there is no sandbox), and with an allow-listed environment (child_env.py). The
job travels on the child's standard input; the child's report comes back as signed frames on a
pipe of its own (grader/messages/), read by a thread with caps on every size and count, and its
stdout and stderr are captured and truncated, so a chatty submission cannot flood the report
(child_run.py).

Whatever the child sends is untrusted data: a frame that fails its signature, breaks a cap or
does not parse ends the reading and the child, and costs the task in flight (`tampering` or
`crash`), never the grader. When the child dies in the middle of a task, that task gets the
reason (crash with the signal named, timeout, out_of_memory) and the parent carries on with the
rest in a new child: one bad call costs that call, not the assignment.

A child may be started ahead of its job, to import torch meanwhile, and a timing child ahead of
its tasks, to make its harness ready while the correctness cases run (spawned.py).

Every process the child started dies before the parent reads a result: inside the sandbox its
PID namespace dies with it; without one, this process is a subreaper, so even a daemon that
double-forked and called setsid is reparented here, found and killed (orphans.py).
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from grader.messages import decoding, kept_file
from grader.running import child_env, cpu_share, gpu_lock, memory_cgroup, sandbox, triton_key
from grader.running.child_run import Capture, Channel, ChildRun
# What grading.py and the tests name through this module: a child started ahead (spawned.py).
from grader.running.spawned import (Spawned, _live_children, await_start, bind_kept, importing_after,  # noqa: F401
                                    pass_gate, send_line, start_ahead, tell)
from grader.running.orphans import become_subreaper, children
from grader.running.exec_walls import Walls
from grader.running.limits import Limits, Watchdog
from grader.messages.job import Job
from grader.assignment.loading import load_assignment
from grader.assignment.spec import REPO_ROOT
from grader.witness import build as witness_build
from grader.witness import stream as witness_stream

# The child runs the parent's own grader package, loaded from its folder by path: a lookup along
# sys.path lists the repository's folder, which Landlock (no sandbox) lets no child read (solutions/
# lies there), and went on to the grader of whichever checkout the virtual environment links to.
BOOT = ("import sys, importlib.util as u; sys.path.insert(0, sys.argv[1]); "
        "s = u.spec_from_file_location('grader', sys.argv[1] + '/grader/__init__.py', "
        "submodule_search_locations=[sys.argv[1] + '/grader']); "
        "sys.modules['grader'] = m = u.module_from_spec(s); s.loader.exec_module(m); "
        "from grader.child.main import main; main(*sys.argv[2:])")
INDUCTOR_CACHE = "torchinductor"  # under the compilers' cache (or the child's scratch folder)
# The cache manager a timing child's Triton keeps its autotuner's picks with (Triton imports it
# by this name; the child imports it before any student code: main._key_triton).
TIMED_PICKS = "grader.child.timed_picks:TimedPicks"


def child_environment(device: str, scratch: Path, compiled: Path | None = None,
                      timed: bool = False) -> dict[str, str]:  # fmt: skip
    """`scratch` is the child's own writable folder: its private /tmp in the sandbox. `compiled`
    is the compilers' cache, shared by the children of one grading (compile_cache.py), the
    autotuner's picks included; a `timed` child (one that times benchmarks) keeps its own picks
    there, apart from those a correctness child timed beside other students' work (TIMED_PICKS)."""
    # Only what Python, CUDA and the compilers need of this process's environment (child_env.py).
    env = child_env.inherited(os.environ)
    env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", HOME=str(scratch), TMPDIR=str(scratch))
    env.update(TRITON_CACHE_DIR=str(compiled or scratch / "triton-cache"), TRITON_HOME=str(scratch))
    # torch's compiler keeps its cache here (the shown torch.compile baselines), beside Triton's.
    # Importing torch._dynamo would create it (the child imports it only with a torch that needs
    # it): the child creates it on every tier, so student code that looks for it finds the same
    # folder on each (child/main.py).
    env["TORCHINDUCTOR_CACHE_DIR"] = str((compiled or scratch) / INDUCTOR_CACHE)
    # torch.compile of a shown baseline (spec.Shown) compiles in the child itself, not in a pool of
    # worker processes that would count against the child's process limit.
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    # Where Triton keeps what it compiles and picks is the grader's to say, not a TA's own setting.
    if compiled is not None:
        env["TRITON_CACHE_AUTOTUNING"] = "1"  # the autotuner's timings too: a later child reuses them
        if timed:
            env["TRITON_CACHE_MANAGER"] = TIMED_PICKS
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"  # Triton kernels run on the CPU through the interpreter
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:
        env.update(cpu_share.child_threads())  # the grading's share of the cores, whatever the TA's shell says
    return env


def limits_of(assignment_dir: str) -> tuple[Limits, float, int]:
    """The parent's limits on a child of the assignment, the GPU memory (GiB) its torch may use,
    and the size of its scratch space."""
    assignment = load_assignment(Path(assignment_dir))
    limits = Limits(int(assignment.host_memory_gib * 2**30), assignment.max_processes)
    return limits, assignment.gpu_memory_gib, int(assignment.scratch_gib * 2**30)


def compiled_cache(workdir: Path) -> Path:
    """The compilers' cache for every child of one grading (one submission, one assignment) that
    keeps none between gradings: in the grading's private workdir (compile_cache.py says why it
    is never another student's)."""
    cache = workdir / "compiled"
    cache.mkdir(mode=0o700, exist_ok=True)
    return cache


COMPILER_NICENESS = 10  # a correctness child's nice value on the GPU tier: a timed child (0) gets ~9x its share of a core


def compiler_niceness() -> int:
    """COMPILER_NICENESS, or GRADER_COMPILER_NICENESS (0-19) where the machine's operator sets it:
    0 measures what the nice value buys (tools/steady_grade.py beside)."""
    given = os.environ.get("GRADER_COMPILER_NICENESS", "")
    return int(given) if given.isdigit() and int(given) <= 19 else COMPILER_NICENESS


def spawn(job: Job, workdir: Path, view: sandbox.View | None, gated: bool, compiled: Path | None = None,
          preload: str = "", timed: bool = False, held: bool = False) -> Spawned:  # fmt: skip
    """Start a child for a job of `job`'s assignment and submission, which will wait for its job
    (its tasks come later); with `preload` "torch" it imports torch and Triton first, before it
    reads the job; `held` (with a gate), only once it is let (Spawned.let_import; run_child lets
    it at the latest). `timed`: see child_environment."""
    become_subreaper()
    limits, gpu_memory_gib, scratch = limits_of(job.assignment_dir)
    key = secrets.token_bytes(32)
    read_fd, write_fd = os.pipe()
    _widen(read_fd)
    gate_fd, gate_opener = os.pipe() if gated else (-1, -1)
    lifeline, kept = os.pipe()  # the child sees EOF on `lifeline` once this process is gone, however it died
    held = held and gated

    inner = [sys.executable, "-I", "-c", BOOT, str(REPO_ROOT), str(lifeline), preload, triton_key.triton_key()]
    inner += [str(gate_fd)] if held else []  # the child waits on its gate before it imports
    # Its own memory cgroup where the machine offers one; where not, the seccomp filter refuses
    # the memory a cgroup would have counted (memory_cgroup.py).
    memory = memory_cgroup.group_for(limits.host_memory_bytes)
    seccomp = sandbox.seccomp_filter(counted=memory is not None)
    compiled = compiled or compiled_cache(workdir)
    # A GPU-tier child that does not time compiles (Triton, ptxas: every core it can get) beside other
    # gradings' timed phases, whose host must not wait for a core: it yields them its cores. So does
    # a precompile child of the GPU tier (precompile.py), which runs on the CPU.
    compiles_beside = (job.device == "cuda" and not timed) or job.precompile == "cuda"
    niceness = compiler_niceness() if compiles_beside else 0
    walls = Walls(cgroup_procs=str(memory.procs) if memory else None, niceness=niceness)
    witness = witness_build.library() if job.device == "cuda" and job.witness else None
    witness = witness if isinstance(witness, witness_build.Library) else None
    if view is not None:
        view.scratch_bytes = scratch
        # The witness is preloaded into the child alone (bwrap's --setenv), never into bwrap itself.
        shown = dataclasses.replace(view, readable=[*view.readable, witness.path.parent],
                                    env={**view.env, "LD_PRELOAD": str(witness.path)}) if witness else view  # fmt: skip
        argv = sandbox.command(inner, shown, seccomp, compiled)
        env = child_environment(job.device, Path("/tmp"), compiled, timed)
    else:
        own = workdir / f"scratch-{secrets.token_hex(4)}"
        own.mkdir(mode=0o700)
        # No sandbox: Landlock shows it what the sandbox would have, and it loads the filter itself.
        walls.readable = sandbox.unsandboxed_readable(_shown(job) + ([witness.path.parent] if witness else []))
        walls.writable, walls.seccomp_fd = [str(own), str(compiled)], seccomp
        argv, env = inner, child_environment(job.device, own, compiled, timed)
    argv = walls.command(argv)
    outputs = workdir / f"received-{secrets.token_hex(4)}"
    outputs.mkdir(mode=0o700)
    # A GPU child's outputs cross in a memory file of this process's (kept_file.py), sized once the
    # child's tasks are known (spawned.bind_kept); this process keeps its descriptor.
    kept_outputs = kept_file.KeptFile(workdir) if job.device == "cuda" and not job.precompile else None
    witness_fd, reader = _witness(witness, env, preload=view is None)
    # bwrap and Popen keep the numbers of the descriptors they pass on.
    passed = tuple(f for f in (lifeline, seccomp, write_fd, gate_fd, witness_fd) if f is not None and f >= 0)
    before = children()
    kept_fds = (kept_outputs.fd,) if kept_outputs else ()  # this process's to keep open, unlike `passed`
    process = subprocess.Popen(argv, pass_fds=passed + kept_fds, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, cwd=job.submission_dir if view is None else "/", env=env,
                               start_new_session=True)  # fmt: skip
    _live_children.add(process.pid)
    for fd in passed:
        os.close(fd)
    watchdog = Watchdog(process.pid, limits, before, disk=(compiled, scratch), siblings=_live_children)
    captures = (Capture(process.stdout), Capture(process.stderr))
    for thread in (watchdog, *captures, *([reader] if reader else [])):
        thread.start()
    return Spawned(process, key, read_fd, write_fd, gate_fd, gate_opener, kept, before, watchdog, captures,
                   gpu_memory_gib, outputs, reader, held=held, memory=memory, kept=kept_outputs)  # fmt: skip


def _witness(found: witness_build.Library | None, env: dict[str, str],
             preload: bool) -> tuple[int, witness_stream.Reader | None]:  # fmt: skip
    """On the GPU tier, the witness (grader/witness) for a child: its library, which CUDA loads as
    the child starts it, and a pipe whose reading end a thread here drains. (-1, None) without one.
    The library is preloaded too, so that no other client of CUPTI in the child (torch's profiler)
    can take CUPTI's records from it (witness.c): here where the child is started directly, by the
    sandbox's command line where bwrap starts it (`preload` False)."""
    if found is None:
        return -1, None
    read_end, write_end = os.pipe()
    _widen(read_end)
    env.update(CUDA_INJECTION64_PATH=str(found.path), GRADER_WITNESS_FD=str(write_end),
               GRADER_WITNESS_CBIDS=found.callbacks)  # fmt: skip
    if preload:
        env["LD_PRELOAD"] = str(found.path)
    return write_end, witness_stream.Reader(read_end)


def _shown(job: Job) -> list[Path]:
    """What a child reads of its grading: the submission's copy and the libraries built from it."""
    return [Path(job.submission_dir), *(Path(library).parent for library in job.libraries.values())]


def run_child(job: Job, workdir: Path, view: sandbox.View | None, timeout_s: float,
              gate: Callable[[str], None] | None = None, compiled: Path | None = None,
              spawned: Spawned | None = None, timed: bool = False) -> ChildRun:  # fmt: skip
    """One child over `job.tasks`; `view` None runs it without a sandbox (the OS refused one).
    With a `gate`, the child waits until `gate(stage)` returns: once torch is imported, before
    it starts CUDA (stage "cuda"), and once its harness is up, before any student code ("run");
    those waits count against no time limit. Once the last task's Done is in, the gate is told so
    without a wait ("timed": what the child sends after it, the outputs it kept for later, is no
    timing). Nothing ends a child between two tasks to let another student go first: a child's
    tasks run in one process whatever else the GPU is doing, so a submission's verdicts never
    depend on the other gradings beside it (grading.AssignmentGrading.gpu). `compiled`
    is the grading's compilers' cache (compile_cache.py; by default one in `workdir`; `timed`: see
    child_environment). `spawned`, a child started ahead (`spawn`,
    with a gate where `gate` is given), gets this job; without it a child starts now. The time
    limit counts from the job's sending: what a child did before it had its job was no student's."""
    child = spawned or spawn(job, workdir, view, gate is not None, compiled, timed=timed)
    child.taken = True
    child.let_import()  # where it still waits to import: its job is here
    job.key, job.channel_fd, job.gate_fd = child.key.hex(), child.write_fd, child.gate_fd
    job.gpu_memory_gib = child.gpu_memory_gib
    if child.ahead is None:
        job.kept_fd, job.kept_seed = bind_kept(child, job.tasks)
    run = child.ahead.run if child.ahead is not None else ChildRun()
    process, watchdog = child.process, child.watchdog

    def open_gate(stage: str) -> None:
        if stage == "timed":  # no wait: the phase is told its timings are over, the child goes on
            tell(gate, stage, run, watchdog)
            return
        pass_gate(gate, stage, run, child)

    if child.ahead is None:
        channel = Channel(child.read_fd, child.key, child.outputs, job.tasks, run, lambda: watchdog.kill_all(),
                          int(child.gpu_memory_gib * 2**30), open_gate if gate is not None else None, child.kept)  # fmt: skip
        started = run.began = time.monotonic()
        channel.start()
        send_line(process, decoding.job_json(job))
    else:  # its harness is up (or on its way): it is given its tasks, then the GPU for them
        channel = child.ahead.channel
        up = await_start(child, timeout_s)
        run.gates.clear()  # the start's waits: from here the time limit counts the tasks' time
        channel.open_gate, channel.on_end = (open_gate if gate is not None else None), None
        channel.take_tasks(job.tasks)
        started = run.began = time.monotonic()
        child.ahead.sending.join()  # the child read its job (it is up), or is gone
        send_line(process, decoding.tasks_json(job.tasks))
        run.timed_out = not up
        if up and run.ready and gate is not None:
            open_gate("run")
    # A timing child's end, step by step, in the hold log: its phase keeps the GPU from the next
    # timed phase until the child is gone (gpu_lock.Timed.share).
    mark = f"{Path(job.assignment_dir).name} bench" if job.tasks and job.tasks[0].kind == "bench" else ""
    channel.mark = mark
    run.timed_out = run.timed_out or _wait(process, started, timeout_s, run, gate is not None)
    if mark:
        gpu_lock.note(f"{mark} child exited")
    child.reap()
    out, err = child.captures
    for thread in (channel, out, err):
        thread.join(timeout=5)
    run.returncode, run.seconds = process.returncode, time.monotonic() - started
    run.timed_out = run.timed_out and not watchdog.verdict
    run.witness = child.witness.result() if child.witness is not None else None
    if mark:
        gpu_lock.note(f"{mark} child reaped")
    run.stdout, run.stderr, run.limit_hit = out.text(), err.text(), watchdog.verdict or child.memory_verdict
    if run.gate_error is not None:
        raise run.gate_error
    return run


def _widen(pipe: int) -> None:
    """A pipe of 1 MiB, not 64 KiB: an output of a gigabyte crosses it in 1,000 writes, not 16,000
    (each a switch between the two processes). Where the system refuses, the pipe stays as it is."""
    try:
        fcntl.fcntl(pipe, fcntl.F_SETPIPE_SZ, 1 << 20)
    except OSError:
        pass


def _wait(process: subprocess.Popen, started: float, timeout_s: float, run: ChildRun, gated: bool) -> bool:
    """Wait for the child's end; True if it outlived `timeout_s` plus what it waited at its gate
    (with a gate the wait goes by the second, since the deadline moves while the child waits)."""
    while True:
        now = time.monotonic()
        left = started + max(timeout_s, 0.1) + run.waited(now) - now
        if left <= 0:
            return True
        try:
            process.wait(timeout=min(left, 1.0) if gated else left)
            return False
        except subprocess.TimeoutExpired:
            if not gated:
                return True
