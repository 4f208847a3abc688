"""The precompile pass (grader/running/precompile.py): what it compiles is what the graded children
find, and a submission that misbehaves in it costs nothing.

Real parts throughout: sandboxed precompile children, real Triton compiles for the H100/H200
target on this CPU, and, standing for the GPU tier's child, a fresh process compiling through
Triton's own JITFunction outside the interpreter (real_jit.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import requires_gpu
from grader.assignment.loading import load_assignments
from grader.assignment.spec import REPO_ROOT
from grader.grading import AssignmentGrading, Settings, grade_submission
from grader.messages.reports import Done, Failure, Precompiled, Recorded
from grader.messages.specializations import Argument, Option, Specialization
from grader.running import compile_cache, compile_slots, precompile
from grader.running.orphans import children

TESTS = Path(__file__).resolve().parent
HOSTILE = TESTS / "submissions" / "vector_add"

# The solution's kernel, autotuned over two configs on both tiers: under the interpreter every
# config of every case compiles for the GPU too.
TUNED = (REPO_ROOT / "solutions" / "vector_add" / "vector_add.py").read_text() + """

def fitting(configs, named_args, **kwargs):
    return configs


CONFIGS = [triton.Config({"BLOCK_SIZE": 64}), triton.Config({"BLOCK_SIZE": 128}, num_warps=2)]
PRUNE = {"early_config_prune": lambda *a, **k: fitting(*a, **k)}  # the module's `fitting`, as it is at the call
tuned = triton.autotune(configs=CONFIGS, key=["n_elements"], prune_configs_by=PRUNE)(add_kernel)


def add(x, y):
    out = torch.empty_like(x)
    tuned[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK_SIZE"]),)](x, y, out, x.numel())
    return out
"""
# Written for a GPU, as the course's solutions are: one fixed small tile under the interpreter, the
# autotuner on a GPU, whose pruner asks torch.cuda for the device. The pass must take the GPU's path.
AUTOTUNED = TUNED + """
import os

tuned_add, INTERPRETED = add, os.environ.get("TRITON_INTERPRET") == "1"


def fitting(configs, named_args, **kwargs):
    torch.cuda.current_device()  # a GPU's question, as the solutions' pruners ask it
    return configs


def add(x, y):
    if not INTERPRETED:
        return tuned_add(x, y)
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 64),)](x, y, out, x.numel(), BLOCK_SIZE=64)
    return out
"""


# The longest vectors take a larger block: float32 at that length is a kernel only the GPU tier's
# benchmarks launch (its cases take the larger block with bfloat16 only).
SIZED = (REPO_ROOT / "solutions" / "vector_add" / "vector_add.py").read_text() + """

def add(x, y):
    out = torch.empty_like(x)
    block = 2048 if x.numel() > 50_000_000 else 1024
    add_kernel[(triton.cdiv(x.numel(), block),)](x, y, out, x.numel(), BLOCK_SIZE=block)
    return out
"""


def _submission(root: Path, source: str) -> Path:
    (root / "vector_add").mkdir(parents=True)
    (root / "vector_add" / "vector_add.py").write_text(source)
    return root


def _pass(submission: Path, tier: str, limit_s: float = 300.0, workers: int = 2, name: str = "vector_add",
          **settings):  # fmt: skip
    """The pass over an assignment's parts, run to its end in a grading's own folders; returns its
    summary and the grading (whose `compiled` is the cache the pass filled)."""
    (assignment,) = load_assignments([name])
    grading = AssignmentGrading(assignment, submission, Settings(device="cpu", precompile=0, **settings))
    ahead = precompile.Precompile(grading.job, assignment, tier, grading.workdir, grading.view, grading.compiled,
                                  limit_s, workers)  # fmt: skip
    return ahead.run(), grading


def _cubin_keys(cache: Path) -> set[str]:
    """The keys of the kernels compiled for the GPU in Triton's cache."""
    return {folder.name for folder in cache.iterdir() if folder.is_dir() and any(folder.glob("*.cubin"))}


def _kernel_names(cache: Path, keys: set[str]) -> list[str]:
    """Each compiled kernel's name and constants, as Triton's cache keeps them under its key."""
    names = []
    for key in keys:
        for meta in (cache / key).glob("*.json"):
            if not meta.name.startswith("__grp__"):
                data = json.loads(meta.read_text())
                names.append(f"{data.get('name')} {data.get('constants', '')} warps={data.get('num_warps')} "
                             f"stages={data.get('num_stages')} shared={data.get('shared')}")  # fmt: skip
    return names


def _real_jit(submission: Path, cache: Path, name: str = "vector_add", *flags: str) -> dict:
    """What the GPU tier's child compiles, and finds in `cache` (real_jit.py, a fresh process)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(cache)
    done = subprocess.run([sys.executable, str(TESTS / "real_jit.py"), name, str(submission), *flags], env=env,
                          capture_output=True, text=True, timeout=1800)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_what_the_pass_compiles_the_gpu_tiers_child_finds(tmp_path):
    """Every kernel a real JITFunction of the student's source compiles, outside the interpreter,
    for the GPU tier's cases and benchmarks (each config of the autotuner at each shape) is in the
    cache the pass filled, under Triton's own key: not one compile is new, so the keys the pass
    computes for each twin are the GPU's. And the pass foresaw nothing the GPU would not compile."""
    submission = _submission(tmp_path / "student", AUTOTUNED)
    summary, grading = _pass(submission, "cuda")
    try:
        assert summary.recorded and summary.compiled == summary.recorded, summary
        found = _real_jit(submission, grading.compiled)
        compiles = set(found["keys"])  # a kernel launched again is compiled once (JITFunction's own cache)
        assert found["misses"] == 0 and found["hits"] == len(compiles) > 0, found
        assert len(compiles) == summary.recorded, "the pass compiled exactly what the GPU would"
        assert len(compiles) >= 2 * 3, "both configs, at lengths of every dtype and divisibility"
    finally:
        grading.scratch.remove()


def test_what_only_the_benchmarks_launch_compiles_while_the_cases_run(tmp_path):
    """The pass compiles in two waves: what the GPU tier's cases launch, by `cases_compiled`
    (the correctness child's job goes then), and what only its benchmarks launch (float32 at the
    longest length), still compiling then, and over by `finish` (before the timing child's job).
    Together they are every kernel the GPU compiles, each once. `start` returns at once: the
    grading sizes its cases while its recording child starts."""
    submission = _submission(tmp_path / "student", SIZED)
    (assignment,) = load_assignments(["vector_add"])
    grading = AssignmentGrading(assignment, submission, Settings(device="cpu", precompile=0))
    ahead = precompile.Precompile(grading.job, assignment, "cuda", grading.workdir, grading.view, grading.compiled,
                                  300.0, 2)  # fmt: skip
    try:
        ahead.start()
        assert not ahead.summary.recorded, "start waited for the recording child"
        ahead.cases_compiled()
        assert ahead.compiling(), "the benchmarks' kernel compiles on after the cases' are compiled"
        cases_compiled = ahead.summary.compiled
        summary = ahead.finish()
        assert not ahead.compiling() and summary.complete, summary
        assert cases_compiled == summary.compiled - 1 == summary.recorded - 1, summary
        found = _real_jit(submission, grading.compiled)
        assert found["misses"] == 0 and found["hits"] == len(set(found["keys"])) == summary.recorded, found
    finally:
        grading.scratch.remove()


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("name", ["matmul", "flash_attention"])
def test_on_a_gpu_the_graded_launches_find_what_the_pass_compiled(tmp_path, name):
    """On a GPU (H100 or H200), nothing standing in: the pass over the solution of each assignment
    with a child per core, then the solution's calls on the GPU tier's inputs, on the GPU, every
    kernel launched and every autotuner timing its configs. Each kernel they compile, the pass had
    compiled: not one compile is new."""
    if not precompile.predicts("cuda"):
        pytest.skip("the pass compiles for an H100 or H200 (compute capability 9.0)")
    summary, grading = _pass(REPO_ROOT / "solutions", "cuda", workers=precompile.cores(), name=name)
    try:
        assert summary.compiled == summary.recorded > 0, summary
        found = _real_jit(REPO_ROOT / "solutions", grading.compiled, name, "--gpu")
        # Parts of one file import it each as a module of their own, whose kernels compile again
        # (and are found again): FlashAttention's 266 kernels were found 312 times.
        assert found["misses"] == 0 and found["hits"] >= len(set(found["keys"])) > 0, found
        # The pass may compile more than the GPU launches, never less: on an H200 (2026-12-03)
        # matmul's GPU calls compiled 77 distinct kernels of the 81 the pass compiled. Which, shown:
        extra = sorted(_kernel_names(grading.compiled, _cubin_keys(grading.compiled) - set(found["keys"])))
        print(f"{name}: the GPU compiled {len(set(found['keys']))} of the pass's {summary.recorded}; "
              f"the others: {extra}")  # fmt: skip
        assert len(set(found["keys"])) <= summary.recorded, (len(set(found["keys"])), summary)
    finally:
        grading.scratch.remove()


def test_the_cpu_tiers_child_finds_what_the_pass_compiled(tmp_path):
    """On the CPU tier, the correctness child compiles every kernel it launched for the GPU
    (gpu_target.compile_all): after the pass (asked for, as `grade` asks), each of those compiles
    finds Triton's cache holding it, and the verdicts are a grading's without the pass."""
    (assignment,) = load_assignments(["vector_add"])
    submission = _submission(tmp_path / "student", TUNED)
    grading = AssignmentGrading(assignment, submission, Settings(device="cpu", precompile=2))
    try:
        tests = grading.run()
        assert "precompile" in grading.phases and grading.phases.precompiled.startswith("precompiled "), grading.phases
        assert len(grading.phases.compiles) >= 2 * 3, "both configs, at lengths of every dtype and divisibility"
        assert all(grading.phases.compiles.values()), grading.phases.compiles
    finally:
        grading.scratch.remove()
    alone = grade_submission(submission, [assignment], Settings(device="cpu", precompile=0))
    assert "precompile" not in alone.environment["phases"]
    assert [(t.name, t.reason, t.score) for t in tests] == [(t.name, t.reason, t.score) for t in alone.tests]
    assert all(t.reason in ("ok", "no_gpu") for t in tests), [(t.name, t.reason) for t in tests]


@pytest.mark.parametrize("folder", ["fork_bomb", "deadlock", "sys_exit_at_import"])
def test_a_submission_that_misbehaves_in_the_pass_costs_nothing(folder):
    """A call that forks without end, a call that hangs, an import that exits: the pass records
    nothing, ends within its limit, and leaves no process behind."""
    before, started = children(), time.monotonic()
    summary, grading = _pass(HOSTILE / folder, "cuda", limit_s=20.0)
    try:
        assert summary.recorded == 0 and summary.missed, summary
        assert time.monotonic() - started < 20.0 + 15.0, "a hang costs the pass its limit, no more"
        assert children() <= before, "every process of the pass is gone"
    finally:
        grading.scratch.remove()


def test_what_a_submission_plants_through_the_pass_is_not_kept(tmp_path):
    """A submission that plants files in the compilers' cache from its calls, in full control of
    its process (the guard off, as if it beat the guard): through the pass too, the grading's
    verdicts are those of a grading without it, and nothing it planted is kept for the next."""
    (assignment,) = load_assignments(["vector_add"])
    planter = HOSTILE / "plants_in_the_compile_cache"
    graded = {}
    for workers in (0, 1):
        cache = tmp_path / f"cache-{workers}"
        settings = Settings(device="cpu", cache=cache, owner="planter", unguarded=True, precompile=workers)
        graded[workers] = grade_submission(planter, [assignment], settings)
        (kept,) = (p for p in cache.rglob("*") if p.is_dir() and p.parent.name == "vector_add")
        assert compile_cache.is_warm(kept) and not list(kept.rglob("planted-*")), sorted(kept.rglob("planted-*"))
    assert "precompile " in graded[1].environment["phases"] and "precompile " not in graded[0].environment["phases"]
    assert [(t.name, t.reason) for t in graded[1].tests] == [(t.name, t.reason) for t in graded[0].tests]


def test_what_a_recording_child_sends_is_checked():
    """The parent passes on only what it can check: a specialization of a part of the
    assignment, with names and values of the form Triton writes, each once and at most
    MAX_SPECIALIZATIONS; the part is the task's, whatever the child said."""
    (assignment,) = load_assignments(["vector_add"])
    good = Specialization("add", "add_kernel", "/s/vector_add.py", 19, [Argument("x_ptr", "*fp32")],
                          options=[Option("num_warps", "int", "4")])  # fmt: skip
    forged = [
        dataclasses.replace(good, part="elsewhere"),  # taken as the task's part
        dataclasses.replace(good, kernel="add_kernel; import os"),
        dataclasses.replace(good, line=-1),
        dataclasses.replace(good, arguments=[Argument("x_ptr", "*fp32\n")]),
        dataclasses.replace(good, options=[Option("num_warps", "int", "four")]),
        dataclasses.replace(good, options=[Option("num_warps", "pickle", "...")]),
    ]
    many = [dataclasses.replace(good, line=line) for line in range(1, precompile.MAX_SPECIALIZATIONS + 10)]
    recorder = _recorder(assignment, [good, good, *forged])
    assert [s.kernel for s in sum(recorder.record(), [])] == ["add_kernel"], "one good one, once; the part rewritten"
    assert len(sum(_recorder(assignment, many).record(), [])) == precompile.MAX_SPECIALIZATIONS


def _recorder(assignment, sent: list[Specialization]) -> precompile.Precompile:
    """A pass whose recording child (not started) said `sent` for the assignment's part."""
    ahead = precompile.Precompile.__new__(precompile.Precompile)
    ahead.assignment, ahead.tier, ahead.limit_s = assignment, "cuda", 1.0
    ahead.summary = precompile.Summary()
    outcome = Recorded(sent)
    ahead._run = lambda tasks, compiles, limit: SimpleNamespace(outcomes={t.id: Done(t.id, outcome) for t in tasks})
    return ahead


def test_a_share_not_compiled_is_said_with_why_in_the_phases_line():
    """A compiling child that dies partway, or says it could not compile: the pass counts what
    came back compiled, and its line says how many were not and why (how the child ended, as
    the parent saw it), so a staff member reading a grading's phases knows why a warm grading
    went through the pass again."""
    (assignment,) = load_assignments(["vector_add"])
    good = Specialization("add", "add_kernel", "/s/vector_add.py", 19, [Argument("x_ptr", "*fp32")])
    share = [dataclasses.replace(good, line=line) for line in (1, 2, 3)]
    ahead = _recorder(assignment, share)
    ahead.summary.recorded, ahead.summary.children = 6, 2
    ahead.deadline, ahead._counting = time.monotonic() + 60, threading.Lock()

    def child(outcomes, death):
        def run(tasks, compiles, limit):
            said = {t.id: Done(t.id, o) for t, o in zip(tasks, outcomes) if o is not None}
            return SimpleNamespace(outcomes=said, death=lambda: death)
        return run

    ahead._run = child([Precompiled(True), None, None], ("out_of_memory", "killed: memory over 8 GiB\nstderr..."))
    ahead._compile_share(share, slotted=False)
    ahead._run = child([Precompiled(True), Precompiled(True), Failure("crash", "ptxas: out of registers\n...")], ())
    ahead._compile_share(share, slotted=False)
    assert ahead.summary.compiled == 3 and not ahead.summary.complete, ahead.summary
    assert ahead.summary.missed == [
        "2 of 3 kernels not compiled: the child ended before it had compiled them (killed: memory over 8 GiB)",
        "1 of 3 kernels not compiled: the child could not compile them (ptxas: out of registers)"]
    assert ahead.summary.line().endswith("; missed: 2 of 3 kernels not compiled: the child ended before it had "
                                         "compiled them (killed: memory over 8 GiB))")  # fmt: skip


def test_how_many_compiling_children():
    """By default the GPU tier's pass has a child per core but one, also where assignments are
    graded side by side (the machine's slots share the cores among them: compile_slots.py), and
    the CPU tier's none (measured: no faster on two cores); a number given is taken on either
    tier, 0 for none. The children compile for the GPU the GPU tier checks for."""
    from grader.child.target import TARGET

    cores = len(os.sched_getaffinity(0))
    assert precompile.children_for(Settings(device="cpu"), "cpu") == 0
    assert precompile.children_for(Settings(device="cuda"), "cuda") == cores - 1  # none on one core
    assert precompile.children_for(Settings(device="cuda", precompile=12, parallel=4), "cuda") == 12
    assert precompile.children_for(Settings(device="cpu", precompile=2), "cpu") == 2
    assert precompile.children_for(Settings(device="cuda", precompile=0), "cuda") == 0
    assert precompile.TARGET_CAPABILITY == divmod(TARGET.arch, 10)


def test_a_pass_whose_children_find_no_slot_costs_only_its_advice(tmp_path, monkeypatch):
    """Every compiling slot of the machine held by another process (another grading's pass): the
    pass's children beyond its own wait for one within the pass's limit, then give up, and the
    pass says so: it was only advice. Its own two children need none, and compile it all."""
    LIMIT_S = 45.0  # the recording child's time too: five times what it takes on a busy 2-core machine
    monkeypatch.setenv("GRADER_GPU_LOCKS", str(tmp_path / "locks"))
    monkeypatch.setattr(precompile, "OWN_CHILDREN", 0)  # every child waits for a slot
    holder = _hold_slots(tmp_path / "locks", compile_slots.machine_slots())
    try:
        submission = _submission(tmp_path / "student", TUNED)
        started = time.monotonic()
        summary, grading = _pass(submission, "cuda", limit_s=LIMIT_S)
        grading.scratch.remove()
        assert summary.recorded and summary.compiled == 0 and summary.children == 2, summary
        assert any(m.startswith("no compiling slot came free") for m in summary.missed), summary.missed
        assert not summary.complete
        assert time.monotonic() - started < LIMIT_S + 30.0, "the wait ends with the pass's limit"
        monkeypatch.undo()  # the pass's own two children, as every pass has them, need no slot
        monkeypatch.setenv("GRADER_GPU_LOCKS", str(tmp_path / "locks"))
        summary, grading = _pass(submission, "cuda")
        grading.scratch.remove()
        assert summary.children == 2 and summary.complete, summary
    finally:
        holder.kill()
        holder.wait()


def test_a_slot_is_free_again_when_its_holder_is_killed(tmp_path):
    """Two processes of no common parent hold the only two slots: a third asks in vain, until one
    holder is killed with SIGKILL (the kernel releases its flock)."""
    folder = tmp_path / "locks"
    first, second = _hold_slots(folder, 1, count=2), _hold_slots(folder, 1, count=2)
    try:
        with compile_slots.slot(0.3, folder, 2) as held:
            assert not held
        second.kill()
        second.wait()
        with compile_slots.slot(30.0, folder, 2) as held:
            assert held
    finally:
        for holder in (first, second):
            holder.kill()
            holder.wait()


def _hold_slots(folder: Path, number: int, count: int | None = None) -> subprocess.Popen:
    """A process of its own (a new session: no common parent with this one's children) holding
    `number` of the `count` slots in `folder`, once it says so."""
    code = (f"import sys, time; from contextlib import ExitStack; from pathlib import Path; "
            f"from grader.running import compile_slots as c\n"
            f"with ExitStack() as s:\n"
            f"    assert all(s.enter_context(c.slot(30.0, Path({str(folder)!r}), {count or number})) "
            f"for _ in range({number}))\n"
            f"    print('held', flush=True); time.sleep(600)")  # fmt: skip
    holder = subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True,
                              start_new_session=True)  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_warm_grading_skips_the_pass_an_earlier_grading_completed(tmp_path):
    """A grading of the very same files, on the same tier, after one whose pass was complete: no
    recording child, no compiling child (on an H200 a warm pass took 8-36 s per assignment to find
    every kernel compiled), the same verdicts, and the mark kept for the next. A change to a file
    starts a cold folder, the pass with it; a mark of the GPU tier says nothing of the CPU tier's."""
    (assignment,) = load_assignments(["vector_add"])
    submission = _submission(tmp_path / "student", TUNED)
    settings = Settings(device="cpu", precompile=2, cache=tmp_path / "cache", owner="student")

    def graded():
        grade = grade_submission(submission, [assignment], settings)
        return [(t.name, t.reason, t.score) for t in grade.tests], grade.environment["phases"]

    cold, cold_line = graded()
    assert "precompile " in cold_line and "precompiled " in cold_line, cold_line
    (kept,) = (p for p in (tmp_path / "cache").rglob("*") if p.is_dir() and p.parent.name == "vector_add")
    assert compile_cache.foreseen(kept, "cpu") and not compile_cache.foreseen(kept, "cuda")
    for _ in range(2):
        warm, warm_line = graded()
        assert warm == cold and precompile.SKIPPED in warm_line and "precompile " not in warm_line, warm_line
        assert compile_cache.foreseen(kept, "cpu"), "the mark stays while the folder is unchanged"
    path = submission / "vector_add" / "vector_add.py"
    path.write_text(path.read_text() + "\n# changed\n")
    _, changed_line = graded()
    assert "precompiled " in changed_line and precompile.SKIPPED not in changed_line, changed_line
