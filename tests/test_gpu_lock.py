"""Workers sharing a GPU: correctness phases overlap, a timing phase runs alone and is not starved.

The lock is flock(2) on files, so its rules hold between processes and between separate opens in
one process alike: threads stand in for workers here. The GPU itself is not needed to check who
waits for whom; whether ratios hold while others compile is a measurement for a GPU.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader.running import cpu_share, gpu_lock, isolation
from grader.judging import verdicts as judging
from grader.course import batch
from grader import grading as grading_module
from grader.running.gpu_lock import ENVIRONMENT, GpuLock
from grader.grading import AssignmentGrading, Settings
from grader.running.tasks import Budget, Phases
from grader.judging.verdicts import TaskResult
from grader.messages.reports import Failure
from grader.judging.numerics import Verdict
from grader.assignment.loading import load_assignments


def _hold(lock: GpuLock, how: str, log: list, name: str, entered: threading.Event, release: threading.Event):
    with getattr(lock, how)() as waited:
        log.append(f"{name} in")
        log.append(waited)
        entered.set()
        release.wait(10)
        # Inside the hold, its last step: whoever the release lets in logs after this.
        log.append(f"{name} out")


def _start(lock, how, log, name):
    entered, release = threading.Event(), threading.Event()
    thread = threading.Thread(target=_hold, args=(lock, how, log, name, entered, release), daemon=True)
    thread.start()
    return thread, entered, release


def test_correctness_phases_overlap_and_a_timing_phase_waits_for_them(tmp_path):
    lock, log = GpuLock(tmp_path, "0"), []
    first, first_in, first_go = _start(GpuLock(tmp_path, "0"), "shared", log, "A")
    second, second_in, second_go = _start(GpuLock(tmp_path, "0"), "shared", log, "B")
    assert first_in.wait(5) and second_in.wait(5), "two correctness phases hold one GPU at once"
    timing, timing_in, timing_go = _start(lock, "exclusive", log, "T")
    assert not timing_in.wait(0.3), "a timing phase started while correctness phases ran"
    first_go.set()
    second_go.set()
    assert timing_in.wait(5)
    timing_go.set()
    for thread in (first, second, timing):
        thread.join(5)
    assert log[log.index("T in") + 1] >= 0.3, "the timing phase does not say it waited"


def test_a_waiting_timing_phase_goes_before_correctness_phases_that_come_after_it(tmp_path):
    log = []
    reader, reader_in, reader_go = _start(GpuLock(tmp_path, "0"), "shared", log, "A")
    assert reader_in.wait(5)
    timing, timing_in, timing_go = _start(GpuLock(tmp_path, "0"), "exclusive", log, "T")
    time.sleep(0.2)  # the timing phase is waiting now, holding the turnstile
    late, late_in, late_go = _start(GpuLock(tmp_path, "0"), "shared", log, "C")
    assert not late_in.wait(0.3), "a new correctness phase slipped past a waiting timing phase"
    reader_go.set()
    assert timing_in.wait(5) and not late_in.is_set()
    timing_go.set()
    assert late_in.wait(5)
    late_go.set()
    for thread in (reader, timing, late):
        thread.join(5)


def test_a_correctness_phase_lets_every_queued_timing_phase_go_first(tmp_path):
    """Between two timed phases the GPU goes to the next one: a correctness phase that asks while
    two wait would otherwise slip in as the first lets go, and hold the GPU until its next case."""
    log = []
    reader, reader_in, reader_go = _start(GpuLock(tmp_path, "0"), "shared", log, "A")
    assert reader_in.wait(5)
    first, first_in, first_go = _start(GpuLock(tmp_path, "0"), "exclusive", log, "T1")
    second, second_in, second_go = _start(GpuLock(tmp_path, "0"), "exclusive", log, "T2")
    time.sleep(0.2)  # both wait: one at the GPU, the other at the turnstile
    late, late_in, late_go = _start(GpuLock(tmp_path, "0"), "shared", log, "C")
    reader_go.set()
    timers = [(first_in, first_go), (second_in, second_go)]
    for _ in range(2):
        deadline = time.monotonic() + 5
        while not any(entered.is_set() and not go.is_set() for entered, go in timers) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not late_in.is_set(), "a correctness phase took the GPU while a timed phase was queued"
        next(go for entered, go in timers if entered.is_set() and not go.is_set()).set()
    assert late_in.wait(5), "the correctness phase never got the GPU once the queue was empty"
    late_go.set()
    for thread in (reader, first, second, late):
        thread.join(5)
    # "in" is written while the GPU is held ("out" after it is let go, when C may be in already).
    assert log.index("C in") > max(log.index("T1 in"), log.index("T2 in"))


def test_each_gpu_has_its_own_lock(tmp_path):
    log = []
    timing, timing_in, timing_go = _start(GpuLock(tmp_path, "0"), "exclusive", log, "T0")
    other, other_in, other_go = _start(GpuLock(tmp_path, "1"), "exclusive", log, "T1")
    assert timing_in.wait(5) and other_in.wait(5), "timing on GPU 1 waited for GPU 0"
    timing_go.set()
    other_go.set()


def _grading_on(lock: GpuLock, name: str) -> SimpleNamespace:
    """What AssignmentGrading.gpu reads of a grading of assignment `name` on a GPU shared through `lock`."""
    return SimpleNamespace(settings=SimpleNamespace(gpu_lock=lock), device="cuda", budget=Budget(60.0),
                           assignment=SimpleNamespace(name=name),
                           phases=Phases(start=0.0, build=0.0, correctness=0.0, timing=0.0))  # fmt: skip


@pytest.mark.parametrize("phase", ["correctness", "timing"])
def test_a_grading_holds_the_lock_per_phase_and_waiting_costs_no_time_limit(tmp_path, phase, monkeypatch):
    lock = GpuLock(tmp_path, "0")
    holds = tmp_path / "holds.log"
    monkeypatch.setenv(gpu_lock.LOG_ENVIRONMENT, str(holds))
    grading = _grading_on(lock, "softmax")
    log = []
    blocker, blocker_in, blocker_go = _start(GpuLock(tmp_path, "0"), "exclusive", log, "other student's timing")
    assert blocker_in.wait(5)
    deadline = grading.budget.deadline
    threading.Timer(0.4, blocker_go.set).start()
    with AssignmentGrading.gpu(grading, phase) as gate:
        began = time.monotonic()
        gate("cuda")
        assert time.monotonic() - began >= 0.3, "CUDA started during the other student's timing"
        log.append("mine")
        if phase == "timing":
            # Starting CUDA holds the GPU shared: another student's correctness may run beside it ...
            _, other_in, other_go = _start(GpuLock(tmp_path, "0"), "shared", log, "other student's correctness")
            assert other_in.wait(5), "a timing child starting CUDA kept out another student's correctness"
            threading.Timer(0.3, other_go.set).start()
            began = time.monotonic()
            gate("run")  # ... and the timing itself waits for it to end
            assert time.monotonic() - began >= 0.2, "timing began beside another student's correctness"
            _, later_in, later_go = _start(GpuLock(tmp_path, "0"), "shared", log, "a later correctness")
            assert not later_in.wait(0.3), "another student's correctness ran during the timed phase"
        else:
            gate("run")
        began = time.monotonic()
        gate("cuda")
        gate("run")
        # At once: had the phase let the lock go, this gate would queue behind `later`, which never ends
        # meanwhile. So the bound is a hang guard, wide enough for a busy machine's scheduling.
        assert time.monotonic() - began < 2.0, "a second child of the phase passes at once: the phase holds the lock"
    if phase == "timing":
        assert later_in.wait(5), "the lock was not released when the phase ended"
        later_go.set()
    blocker.join(5)
    assert grading.phases["waiting"] >= 0.3
    assert grading.budget.deadline - deadline == pytest.approx(grading.phases["waiting"])
    # The hold log has a line per hold of this grading, in the order they ended, and the other student's.
    lines = [line.split(" ", 5) for line in holds.read_text().splitlines()]
    mine = [(how, label) for how, *_, label in lines if label.startswith("softmax")]
    expected = [("shared", f"softmax {phase} cuda start"),
                ("exclusive" if phase == "timing" else "shared", f"softmax {phase}")]  # fmt: skip
    assert mine == expected
    for how, asked, got, released, pid, label in lines:
        assert float(asked) <= float(got) <= float(released) and int(pid) == os.getpid()
    waited = [float(got) - float(asked) for how, asked, got, _, _, label in lines if label == expected[0][1]]
    assert waited[0] >= 0.3, "the log does not show the wait for the other student's timing"
    cpu = SimpleNamespace(settings=SimpleNamespace(gpu_lock=lock), device="cpu", budget=Budget(60.0), phases=Phases())
    with AssignmentGrading.gpu(cpu, phase) as gate:
        assert gate is None, "the CPU tier has no GPU to wait for"


def test_a_child_starts_before_its_gate_and_runs_student_code_after_it(tmp_path, repo):
    """The gate in a real child: its start (sandbox, torch) overlaps the wait, it waits once before
    starting CUDA and once before student code, the student's module is imported only once the
    second stage opened, and both waits move the child's deadline."""
    import dataclasses
    import shutil

    from grader.running import isolation
    from grader.grading import Settings
    from grader.assignment.loading import load_assignment

    submission = tmp_path / "student"
    shutil.copytree(repo / "solutions" / "vector_add", submission / "vector_add")
    source = submission / "vector_add" / "vector_add.py"
    source.write_text('import time\nprint("imported at", time.monotonic(), flush=True)\n' + source.read_text())
    assignment = load_assignment(repo / "assignments" / "vector_add")
    grading = AssignmentGrading(assignment, submission, Settings(device="cpu"))
    opened, seen = [], []

    def gate(stage: str) -> None:
        seen.append((stage, time.monotonic()))
        if stage == "timed":  # told, after the last task's Done: no wait
            return
        time.sleep(2.5)  # another student's timing
        opened.append(time.monotonic())

    try:
        tasks = grading.case_tasks(assignment.parts[0])[:1]
        job = dataclasses.replace(grading.job, tasks=tasks)
        # Without its wait, the child needs a few seconds; the limit is shorter than start + wait.
        run = isolation.run_child(job, grading.workdir, grading.view, 30.0, gate)
        quick = isolation.run_child(dataclasses.replace(grading.job, tasks=tasks), grading.workdir, grading.view,
                                    run.seconds - run.gated_s + 2.0, gate=lambda stage: time.sleep(2.5))  # fmt: skip
    finally:
        grading.scratch.remove()
    assert run.ready and run.finished and not run.timed_out, run.stderr
    assert [stage for stage, _ in seen] == ["cuda", "run", "timed"] and run.gated_s == pytest.approx(5.0, abs=0.4)
    imported = float(run.stdout.split("imported at")[1].split()[0])
    assert imported >= opened[1], "student code ran before the gate's second stage opened"
    assert seen[1][1] - run.began >= run.ready_s + 2.5 - 0.1, "the second stage was taken before the child was up"
    assert quick.finished and not quick.timed_out, "the wait at the gate counted against the time limit"
    assert [t for t in quick.outcomes] == [tasks[0].id]


def test_workers_are_given_no_lock_of_their_own(monkeypatch):
    """A batch's workers lock their GPU where every other grading of the machine does: none is
    handed a folder of the batch's own (four gradings that each held a lock of their own shared
    one H200 and cost honest solutions points)."""
    pytest.importorskip("distributed")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    shared = batch.worker_specs("cuda", 4)
    envs = [spec["options"]["env"] for spec in shared.values()]
    assert envs == [{"CUDA_VISIBLE_DEVICES": gpu, cpu_share.AT_ONCE: "4"} for gpu in ("0", "1", "0", "1")]
    monkeypatch.setenv(ENVIRONMENT, "/some/folder")
    assert GpuLock.for_this_gpu().gpu.parent == Path("/some/folder")
    monkeypatch.delenv(ENVIRONMENT)
    assert GpuLock.for_this_gpu().gpu.parent == gpu_lock.DEFAULT_FOLDER


# One process of the tests below, started by a shell of its own that exits at once (a double fork:
# nothing of the test's process, no folder, no variable, is handed to it): it loads
# gpu_lock.py by path (a copy another user may read), waits for the GPU's timed hold in the
# machine's default folder, says when it got it, and holds it a while.
_HOLDER = """
import importlib.util, os, sys, time
os.environ.pop("GRADER_GPU_LOCKS", None)
spec = importlib.util.spec_from_file_location("gpu_lock", sys.argv[1])
gpu_lock = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_lock)
folder, note = gpu_lock.machine_folder()
with gpu_lock.GpuLock(folder, sys.argv[2]).timed("test"):
    open(sys.argv[3], "w").write(f"{time.time()} {note}")
    time.sleep(float(sys.argv[4]))
    open(sys.argv[3] + ".out", "w").write(str(time.time()))  # the last moment it surely held the GPU
"""


@pytest.fixture
def shared_folder():
    """A folder every user may read and write, with the holder and gpu_lock.py in it."""
    folder = Path(tempfile.mkdtemp(prefix="gpu-lock-test-"))
    folder.chmod(0o777)
    (folder / "holder.py").write_text(_HOLDER)
    shutil.copyfile(gpu_lock.__file__, folder / "gpu_lock.py")
    for path in folder.iterdir():
        path.chmod(0o644)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def gpu():
    """A GPU's name no other test or grading uses; its lock files in the machine's folder go after."""
    name = f"test-{secrets.token_hex(4)}"
    yield name
    for path in gpu_lock.DEFAULT_FOLDER.glob(f"gpu-{name}.*"):
        path.unlink(missing_ok=True)


def _detached(folder: Path, name: str, gpu: str, hold_s: float, user: list[str] = (), python: str = sys.executable) -> Path:
    """Start a holder through a shell that exits at once, with no lock folder in its environment."""
    said = folder / name
    holder = [*user, python, str(folder / "holder.py"), str(folder / "gpu_lock.py"), gpu, str(said), str(hold_s)]
    shell = f"({' '.join(map(shlex.quote, holder))} >{shlex.quote(str(said))}.log 2>&1 &)"
    subprocess.run(["sh", "-c", shell], check=True, env={k: v for k, v in os.environ.items() if k != ENVIRONMENT})
    return said


def _wait_for(path: Path, seconds: float = 60.0) -> str:
    deadline = time.monotonic() + seconds  # a hang guard: each step below takes under a second
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path.name} never came: {(path.parent / (path.name + '.log')).read_text()}")


def _not_before(first: Path, second: Path) -> str:
    """The second holder got the GPU only once the first had let go; what the second said."""
    _wait_for(first)
    released = float(_wait_for(Path(f"{first}.out")))
    said = _wait_for(second)
    assert float(said.split(" ")[0]) >= released, "a second grading timed while the first held the GPU"
    return said


def test_gradings_that_share_no_parent_share_the_machine_s_lock(shared_folder, gpu):
    """Two `make grade`s in two terminals: processes with no parent in common, with no folder
    named for them, still take turns on one GPU, through the machine's default folder."""
    first = _detached(shared_folder, "first", gpu, 1.5)
    _wait_for(first)
    second = _detached(shared_folder, "second", gpu, 0.0)
    _not_before(first, second)
    found = os.lstat(gpu_lock.DEFAULT_FOLDER)
    assert stat.S_IMODE(found.st_mode) == 0o1777, "other users could not make their locks in the folder"
    assert stat.S_IMODE(os.stat(gpu_lock.DEFAULT_FOLDER / f"gpu-{gpu}.lock").st_mode) == 0o644


def test_another_user_s_grading_waits_for_the_gpu_too(shared_folder, gpu):
    """Two students on one node: a grading of another user waits for this user's timed phase."""
    python = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.path.exists(p)), None)
    if os.getuid() != 0 or not shutil.which("setpriv") or python is None:
        pytest.skip("needs root, setpriv (util-linux) and a system python3 to start a process as another user")
    first = _detached(shared_folder, "first", gpu, 1.5)
    _wait_for(first)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    said = _not_before(first, _detached(shared_folder, "second", gpu, 0.0, nobody, python))
    assert "this user's own" not in said, "the other user did not lock in the machine's folder"


def test_a_folder_another_user_planted_is_passed_over_and_said(tmp_path, monkeypatch):
    """A link (or a folder closed to others) where the machine's locks belong is not used: the
    grading locks in a folder of its user's own, and says what that costs."""
    planted = tmp_path / "planted"
    planted.symlink_to(tmp_path)
    monkeypatch.setattr(gpu_lock, "DEFAULT_FOLDER", planted)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(ENVIRONMENT, raising=False)
    folder, note = gpu_lock.machine_folder()
    assert folder == tmp_path / "home" / ".cache" / "kernel-grader" / "gpu-locks"
    assert "other users' gradings are not kept out" in note


@pytest.mark.parametrize("gpu_gib, caps, fit", [(79.2, [16.0], 4), (79.2, [16.0, 40.0], 1), (139.8, [40.0], 3),
                                                (79.2, [8.0, 6.0], 7), (12.0, [40.0], 1)])  # fmt: skip
def test_workers_of_one_gpu_are_as_many_as_the_largest_cap_fits(gpu_gib, caps, fit):
    assert batch.gradings_per_gpu(gpu_gib, caps) == fit


def test_a_batch_asking_for_more_workers_than_fit_gets_fewer_and_says_why(tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    monkeypatch.setattr(batch, "resolve_device", lambda requested: "cuda")
    monkeypatch.setattr(batch, "visible_gpus", lambda: ["0"])
    monkeypatch.setattr(batch, "smallest_gpu_gib", lambda: 79.2)
    assignments = [SimpleNamespace(gpu_memory_gib=16.0), SimpleNamespace(gpu_memory_gib=24.0)]

    def engine(workers):
        options = batch.Options(tmp_path, tmp_path, assignments, "cuda", workers, None, False)
        return batch.Engine(options)

    crowded = engine(6)
    assert crowded.workers == 3 and crowded.shares_gpus
    assert "--workers 6: 3 fit" in crowded.notice and "24 GiB" in crowded.notice
    roomy = engine(3)
    assert roomy.workers == 3 and roomy.notice == ""
    alone = engine(None)
    assert alone.workers is None and not alone.shares_gpus and alone.notice == ""


def test_judging_waits_for_another_students_timing_and_holds_the_lock_shared(tmp_path):
    """The parent's judging runs float64 references on the GPU: never inside another's timed phase."""
    lock = GpuLock(tmp_path, "0")
    grading = SimpleNamespace(settings=SimpleNamespace(gpu_lock=lock), device="cuda", phases=Phases(),
                              assignment=SimpleNamespace(name="softmax"))
    log = []
    blocker, blocker_in, blocker_go = _start(GpuLock(tmp_path, "0"), "exclusive", log, "other student's timing")
    assert blocker_in.wait(5)
    threading.Timer(0.4, blocker_go.set).start()
    with AssignmentGrading.judging(grading):
        log.append("judging")
        _, timing_in, timing_go = _start(GpuLock(tmp_path, "0"), "exclusive", log, "a later timing")
        assert not timing_in.wait(0.3), "a timing phase began while the grader judged"
        _, shared_in, shared_go = _start(GpuLock(tmp_path, "0"), "shared", log, "a correctness phase")
    assert grading.phases["waiting"] >= 0.3, "judging did not wait for the other student's timing"
    assert timing_in.wait(5), "the lock was not released when judging ended"
    for event in (timing_go, shared_go):
        event.set()
    blocker.join(5)
    cpu = SimpleNamespace(settings=SimpleNamespace(gpu_lock=lock), device="cpu", phases=Phases(),
                          assignment=SimpleNamespace(name="softmax"))
    with AssignmentGrading.judging(cpu):
        assert "waiting" not in cpu.phases, "the CPU tier judges on the CPU: nothing to wait for"


def _waiting_timed_phase(tmp_path, log: list):
    """Another student's correctness run that holds the GPU, and a timed phase that waits for it
    (at the turnstile): ((reader, its release), (the timed phase, entered, release))."""
    reader, reader_in, reader_go = _start(GpuLock(tmp_path, "0"), "shared", log, "a correctness run")
    assert reader_in.wait(5)
    timing, timing_in, timing_go = _start(GpuLock(tmp_path, "0"), "exclusive", log, "a timed phase")
    time.sleep(0.2)
    assert not timing_in.is_set()
    return (reader, reader_go), (timing, timing_in, timing_go)


def test_the_graders_own_short_holds_pass_a_waiting_timed_phase_but_never_run_inside_one(tmp_path):
    """`beside`: a judging or a timing child's start of CUDA goes on while a timed phase waits for
    correctness runs (the timed phase then waits for it too), where a new correctness run would
    wait at the turnstile; while a timed phase holds the GPU, it waits like anyone else."""
    log = []
    (reader, reader_go), (timing, timing_in, timing_go) = _waiting_timed_phase(tmp_path, log)
    _, late_in, late_go = _start(GpuLock(tmp_path, "0"), "shared", log, "a later correctness run")
    beside, beside_in, beside_go = _start(GpuLock(tmp_path, "0"), "beside", log, "B")
    assert beside_in.wait(5), "the grader's own hold waited behind a timed phase that had not begun"
    assert log[log.index("B in") + 1] < 0.2
    assert not late_in.wait(0.2), "a correctness run passed the waiting timed phase"
    reader_go.set()
    assert not timing_in.wait(0.3), "the timed phase began while the grader's own hold was on the GPU"
    beside_go.set()
    assert timing_in.wait(5) and not late_in.is_set()
    _, second_in, second_go = _start(GpuLock(tmp_path, "0"), "beside", log, "B2")
    assert not second_in.wait(0.3), "the grader's own hold ran inside a timed phase"
    timing_go.set()
    assert second_in.wait(5) and late_in.wait(5)
    for event in (second_go, late_go):
        event.set()
    for thread in (reader, timing, beside):
        thread.join(5)


@pytest.mark.parametrize("phase", ["correctness", "timing"])
def test_a_child_starts_cuda_while_another_timed_phase_waits_and_runs_after_it(tmp_path, phase):
    """Its start runs no student code: it goes on beside the timed phase that waits, so the
    student is ready when the GPU passes on (behind the turnstile, timing children's starts had
    waited up to 5.2 s, and a correctness run had taken the GPU for 6 s in between); its student
    code waits for that timed phase to end."""
    log = []
    (reader, reader_go), (timing, timing_in, timing_go) = _waiting_timed_phase(tmp_path, log)
    grading = _grading_on(GpuLock(tmp_path, "0"), "softmax")
    with AssignmentGrading.gpu(grading, phase) as gate:
        began = time.monotonic()
        gate("cuda")
        # At once: behind the timed phase it would wait for `timing_go`, set only after this gate (a hang guard).
        assert time.monotonic() - began < 2.0, "the child's start of CUDA waited behind a timed phase"
        reader_go.set()
        threading.Timer(0.3, timing_go.set).start()  # the other timed phase, once it has the GPU, for 0.3 s
        gate("run")
        assert timing_in.is_set() and "a timed phase out" in log, "student code ran inside another's timed phase"
    for thread in (reader, timing):
        thread.join(5)


def test_a_students_cases_are_judged_beside_a_timed_phase_that_waits(tmp_path):
    """Judged at once, the student joins the queue to time; behind the turnstile, judgings had
    waited 4 to 6 s for a timed phase that itself waited for other students' cases."""
    lock, log = GpuLock(tmp_path, "0"), []
    grading = SimpleNamespace(settings=SimpleNamespace(gpu_lock=lock), device="cuda", phases=Phases(),
                              assignment=SimpleNamespace(name="softmax"))  # fmt: skip
    (reader, reader_go), (timing, timing_in, timing_go) = _waiting_timed_phase(tmp_path, log)
    began = time.monotonic()
    with AssignmentGrading.judging(grading):
        # At once: behind the timed phase it would wait for `timing_go`, set only after this (a hang guard).
        assert time.monotonic() - began < 2.0, "the judging waited behind a timed phase that had not begun"
        reader_go.set()
        assert not timing_in.wait(0.3), "a timed phase began while the grader judged"
    assert timing_in.wait(5), "the lock was not released when judging ended"
    timing_go.set()
    for thread in (reader, timing):
        thread.join(5)


def test_a_timed_phases_outputs_are_judged_behind_the_timed_phase_at_the_turnstile(tmp_path):
    """The next timed phase, which waited for this one's child to end, goes first: the judging
    of the outputs would otherwise hold it back as the GPU passes to it."""
    lock, log = GpuLock(tmp_path, "0"), []
    grading = SimpleNamespace(settings=SimpleNamespace(gpu_lock=lock), device="cuda", phases=Phases(),
                              assignment=SimpleNamespace(name="softmax"))  # fmt: skip
    (reader, reader_go), (timing, timing_in, timing_go) = _waiting_timed_phase(tmp_path, log)
    judged = threading.Event()

    def judge():
        with AssignmentGrading.judging(grading, "timing judging", after_timing=True):
            judged.set()

    threading.Thread(target=judge, daemon=True).start()
    assert not judged.wait(0.3), "the outputs were judged before the timed phase that waits had the GPU"
    reader_go.set()
    assert timing_in.wait(5) and not judged.wait(0.3)
    timing_go.set()
    assert judged.wait(5), "the judging never got the GPU"
    assert grading.phases["waiting"] >= 0.5
    for thread in (reader, timing):
        thread.join(5)


def test_a_timed_phase_sends_with_the_gpu_shared_and_judges_after_the_next_timed_phase(tmp_path, monkeypatch):
    """Once a timed phase's timings are over (gate stage "timed"), its child sends what it kept
    with the GPU held shared: other students' correctness runs come back onto it, but another
    timed phase, waiting since before or coming after, starts only when that child is gone (it
    ran the student's code). The verdicts, whose references run on the GPU, come after, under a
    hold of their own that lets the waiting timed phase go first."""
    holds = tmp_path / "holds.log"
    monkeypatch.setenv(gpu_lock.LOG_ENVIRONMENT, str(holds))
    grading = object.__new__(AssignmentGrading)
    grading.assignment, grading.device = load_assignments(["vector_add"])[0], "cuda"
    grading.settings = Settings(device="cuda", gpu_lock=GpuLock(tmp_path, "0"))
    grading.budget, grading.phases = Budget(60.0), Phases(start=0.0, build=0.0, correctness=0.0, timing=0.0)
    grading.job = grading.workdir = grading.view = grading.compiled = None
    grading.built_kernels, grading.cwd, grading.precompiling = set(), tmp_path, None
    log, others = [], {}

    def child(job, tasks, workdir, view, budget, phases, phase, gate, compiled, spawned):
        assert phase == "timing"
        gate("cuda")
        gate("run")
        _, early_in, early_go = _start(GpuLock(tmp_path, "0"), "shared", log, "a correctness waiting")
        assert not early_in.wait(0.3), "a correctness run ran inside the timed phase"
        gate("timed")
        assert early_in.wait(5), "a correctness run waiting since the timings did not start once they ended"
        others["thread"], others["in"], others["go"] = _start(GpuLock(tmp_path, "0"), "exclusive", log, "a timing")
        assert not others["in"].wait(0.3), "another timed phase began while this one's child sent its outputs"
        early_go.set()
        assert not others["in"].wait(0.3), "another timed phase began while this one's child was alive"
        gate("timed")  # a second call is harmless: the check below sees no other timed phase start early
        threading.Timer(0.4, others["go"].set).start()
        return {task.id: TaskResult(Failure("timeout", "stands in for a benchmark's report")) for task in tasks}

    def judge(assignment, part, case, result, device, own):
        assert others["in"].is_set(), "the verdicts were made before the waiting timed phase had the GPU"
        assert "a timing out" in log, "the verdicts' references ran inside another student's timed phase"
        log.append("judged")
        return Verdict("timeout", result.outcome.message)

    monkeypatch.setattr(grading_module, "run_tasks", child)
    monkeypatch.setattr(judging, "judge_bench", judge)
    parts = grading.assignment.parts
    verdicts = AssignmentGrading.time_parts(grading, {part.name: [] for part in parts})
    assert len(verdicts) == sum(len(part.benchmarks) for part in parts) == log.count("judged") > 0
    assert grading.phases["waiting"] >= 0.3, "the judging does not say it waited"
    others["thread"].join(5)
    lines = [line.split(" ", 5) for line in holds.read_text().splitlines()]
    mine = [(how, label) for how, _, _, _, _, label in lines if label.startswith("vector_add")]
    assert mine == [("shared", "vector_add timing cuda start"), ("exclusive", "vector_add timing"),
                    ("shared", "vector_add timing sending"), ("shared", "vector_add timing judging")]  # fmt: skip
    timed, sent = [line for line in lines if line[5] in ("vector_add timing", "vector_add timing sending")]
    assert float(timed[3]) <= float(sent[1]) == float(sent[2]) <= float(sent[3]), "the holds do not follow on"


# A student whose code behaves differently in a fresh process (as attorch's GELU does under Triton:
# its kernel fails the first compile in a process and passes every later one): the first call in a
# process fails, the others are right. Each call takes a moment, so a run of cases is long enough
# for a timed phase to queue behind it.
_FIRST_CALL_FAILS = """

_first_call = [True]
_right_add = add


def add(x, y):
    import time

    time.sleep(0.3)
    if _first_call[0]:
        _first_call[0] = False
        raise RuntimeError("the first call in a process fails")
    return _right_add(x, y)
"""


def test_a_correctness_phase_under_way_keeps_the_gpu_to_its_end_while_a_timed_phase_waits(tmp_path):
    """A timed phase that queues behind a correctness phase under way waits for its end: the phase
    is not cut short between two cases."""
    lock = GpuLock(tmp_path, "0")
    grading = _grading_on(lock, "matmul")
    log = []
    with AssignmentGrading.gpu(grading, "correctness") as gate:
        gate("cuda")
        gate("run")
        timing, timing_in, timing_go = _start(GpuLock(tmp_path, "0"), "exclusive", log, "other student's timing")
        assert not timing_in.wait(0.5), "a timed phase began while a correctness phase held the GPU"
        assert lock.timing_waits()
        gate("cuda")  # a second child of the phase (after a crash) passes at once: it would hang here
        gate("run")
        assert not timing_in.wait(0.2)
    assert timing_in.wait(5), "the lock was not released when the phase ended"
    timing_go.set()
    timing.join(5)


def test_verdicts_do_not_depend_on_a_timed_phase_waiting_beside_them(tmp_path, repo):
    """A real child under a phase's gate, with another student's timed phase waiting from the first
    case on: every case runs in that one child, so a submission whose code behaves differently in a
    fresh process gets the verdicts it gets graded alone (here: only the first call fails)."""
    import shutil

    from grader.grading import Settings
    from grader.running.tasks import run_tasks
    from grader.messages.reports import CaseReport
    from grader.assignment.loading import load_assignment

    student = tmp_path / "student" / "vector_add"
    shutil.copytree(repo / "solutions" / "vector_add", student)
    (student / "vector_add.py").write_text((student / "vector_add.py").read_text() + _FIRST_CALL_FAILS)
    assignment = load_assignment(repo / "assignments" / "vector_add")
    grading = AssignmentGrading(assignment, student.parent, Settings(device="cpu"))
    tasks = grading.case_tasks(assignment.parts[0])[:3]
    lock, log, stages, waiting = GpuLock(tmp_path / "locks", "0"), [], [], []
    with AssignmentGrading.gpu(_grading_on(lock, "vector_add"), "correctness") as phase_gate:

        def gate(stage: str) -> None:
            stages.append(stage)
            phase_gate(stage)
            if stage == "run":  # the GPU is held: another student's timed phase queues behind it
                waiting.append(_start(GpuLock(tmp_path / "locks", "0"), "exclusive", log, "other student's timing"))

        try:
            results = run_tasks(grading.job, tasks, grading.workdir, grading.view, Budget(120.0), gate=gate)
        finally:
            grading.scratch.remove()
        thread, timing_in, timing_go = waiting[0]
        assert lock.timing_waits() and not timing_in.is_set(), "the timed phase did not wait through the cases"
    assert timing_in.wait(5)
    timing_go.set()
    thread.join(5)
    outcomes = [results[t.id].outcome for t in tasks]
    assert not isinstance(outcomes[0], CaseReport), "the first call in the process did not fail"
    assert all(isinstance(o, CaseReport) for o in outcomes[1:]), [getattr(o, "message", o) for o in outcomes[1:]]
    assert stages == ["cuda", "run", "timed"], f"the cases ran in more than one child: {stages}"


def _gated_grading(repo):
    from grader.grading import Settings
    from grader.assignment.loading import load_assignment

    assignment = load_assignment(repo / "assignments" / "vector_add")
    grading = AssignmentGrading(assignment, repo / "solutions", Settings(device="cpu"))
    return grading, grading.case_tasks(assignment.parts[0])[:3]


def test_a_gate_that_fails_ends_its_child_and_the_grading_hears_of_it(repo):
    """A fault of the grader's own at the gate (a lock that cannot be taken, say): the child is
    killed and the error reaches the caller, never a wait that moves the child's deadline for ever."""
    import shutil

    from grader.running import isolation
    from grader.running.tasks import run_tasks

    grading, tasks = _gated_grading(repo)

    def gate(stage: str) -> None:
        if stage == "run":
            raise OSError("the lock's folder is gone")

    began = time.monotonic()
    try:
        with pytest.raises(OSError, match="the lock's folder is gone"):
            run_tasks(grading.job, tasks, grading.workdir, grading.view, Budget(120.0), gate=gate)
    finally:
        grading.scratch.remove()
    assert time.monotonic() - began < 60, "the grading waited on after its gate failed"
    assert not isolation._live_children, "the child outlived its failed gate"


def test_a_held_timing_child_is_let_import_when_the_correctness_child_has_before_its_wait_for_the_gpu():
    """isolation.importing_after: the correctness child's stage "cuda" (torch imported, CUDA not yet
    started) lets the timing child import, before that stage waits for the GPU's lock."""
    said = []
    timer = SimpleNamespace(let_import=lambda: said.append("timer imports"))
    gate = isolation.importing_after(lambda stage: said.append(f"gate {stage}"), timer)
    gate("cuda")
    assert said == ["timer imports", "gate cuda"]
    gate("run")
    gate("timed")
    assert said[2:] == ["gate run", "gate timed"]
    assert isolation.importing_after(None, timer) is None, "no gate (a GPU of its own): the timer was not held"
