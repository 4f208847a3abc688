"""The limits and the sandbox of the child that runs student code, each shown doing its job on a
hostile submission (tests/submissions/vector_add/) graded through the real pipeline. The host
memory limit is shown on `memory_hog` where test_hostile_batch.py grades it (filling memory to the
limit takes seconds of the kernel's time: once is enough), and the time limit on `infinite_loop`
(a spinning hang, cut at 8 s) where test_wrong_submissions.py grades it.

Checks that need the namespaces skip, with the reason the OS gave, on a machine that refuses
them; test_grading_goes_on_where_namespaces_are_refused shows what happens there.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from conftest import SUBMISSIONS, grade, requires_gpu
from grader.running import child_run, isolation, limits, memory_cgroup, sandbox, tasks
from grader.grading import AssignmentGrading, Settings
from grader.messages.job import Job, Task
from grader.messages.reports import Failure
from grader.assignment.loading import load_assignment
from grader.assignment.spec import REPO_ROOT
from grader.assignment.toml_table import SpecError

HOSTILE = SUBMISSIONS / "vector_add"
STATUS = sandbox.probe()
requires_sandbox = pytest.mark.skipif(STATUS.startswith("none"), reason=f"the OS refuses the sandbox here: {STATUS}")


def failures(result) -> list:
    return [t for t in result.tests if t.kind == "correctness" and not t.passed]


@requires_sandbox
def test_the_search_for_solutions_finds_nothing():
    failed = failures(grade(HOSTILE / "searches_for_solutions", ["vector_add"]))
    assert failed and all("found nothing" in t.output for t in failed), [t.output[:300] for t in failed]


def _fake_results_since(moment: float) -> list[Path]:
    """The submission's fake results.json files written since `moment` where the parent or a TA
    could read them: the repository and the temporary directory (its own folder there is gone)."""
    roots = [REPO_ROOT, Path(tempfile.gettempdir())]
    found = []
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in (".venv", ".git")]
            written = [Path(folder, f) for f in files if f == "results.json"]
            found += [path for path in written if path.stat().st_mtime >= moment]
    return [path for path in found if "FAKE-RESULTS" in path.read_text(errors="replace")]


@requires_sandbox
def test_fake_results_land_nowhere_and_change_nothing():
    started = time.time() - 1
    result = grade(HOSTILE / "fake_results", ["vector_add"])
    assert {t.reason for t in failures(result)} == {"not_implemented"}, "graded as the stub it is"
    assert result.score == 0
    assert not _fake_results_since(started), "a fake results.json escaped the child's temporary folder"


@requires_sandbox
def test_no_connection_leaves_the_child(tmp_path):
    submission = shutil.copytree(HOSTILE / "phones_home", tmp_path / "phones_home")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        (submission / "vector_add" / "listener_port.txt").write_text(str(port))  # where phones_home looks
        failed = failures(grade(submission, ["vector_add"]))
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody called
    # The sandbox's own loopback refuses, or its network is down: either way the host's listener stays unreached.
    assert failed and all(re.search(rf"127\.0\.0\.1:{port} (OSError|ConnectionRefusedError)", t.output)
                          for t in failed), [t.output[:300] for t in failed]  # fmt: skip
    assert not any("reached" in t.output for t in failed)


def test_a_fork_bomb_is_held_by_the_process_limit_and_leaves_nothing_behind():
    failed = failures(grade(HOSTILE / "fork_bomb", ["vector_add"], timeout_s=30))
    # Held by the process limit, which the verdict names: the 30 s limit would have made it `timeout`.
    assert {t.reason for t in failed} == {"crash"}
    assert "max_processes" in failed[0].output, failed[0].output
    # Forks of the child keep its command line: any left, here or orphaned, is one of _graders().
    assert not _graders(), "processes of the bomb outlived the grading"


def _flooding_solution(tmp_path: Path) -> Path:
    """The reference solution, printing 10 MB to stdout and to stderr in every call."""
    folder = tmp_path / "flood" / "vector_add"
    shutil.copytree(REPO_ROOT / "solutions" / "vector_add", folder)
    source = (folder / "vector_add.py").read_text()
    marker = "    if x.shape != y.shape"
    assert marker in source
    flood = "    for stream in (sys.stdout, sys.stderr):\n        stream.write(('y' * 1023 + '\\n') * 10240)\n"
    (folder / "vector_add.py").write_text("import sys\n" + source.replace(marker, flood + marker, 1))
    return folder.parent


def test_ten_megabytes_of_output_are_truncated_and_the_grade_is_normal(tmp_path):
    submission = _flooding_solution(tmp_path)
    assignment = load_assignment(REPO_ROOT / "assignments" / "vector_add")
    grading = AssignmentGrading(assignment, submission, Settings(device="cpu"))
    try:
        tasks = grading.case_tasks(assignment.parts[0])
        run = isolation.run_child(dataclasses.replace(grading.job, tasks=tasks), grading.workdir, grading.view, 120)
    finally:
        grading.scratch.remove()
    assert run.finished and not any(isinstance(d.outcome, Failure) for d in run.outcomes.values())
    for text in (run.stdout, run.stderr):
        assert len(text) < 2 * child_run.CAPTURE_BYTES + 200 and "bytes of output left out" in text
    result = grade(submission, ["vector_add"])
    assert not failures(result), "the prints cost nothing"
    assert len(json.dumps([t.output for t in result.tests])) < 20_000


def test_the_sandbox_is_named_in_every_grade():
    result = grade(HOSTILE / "missing_file", ["vector_add"])
    assert result.environment["sandbox"] == sandbox.walls() and sandbox.walls().startswith(STATUS)
    assert STATUS.startswith(("none (", "bubblewrap: ")) and "; memory: " in sandbox.walls()


def test_the_tas_secrets_never_reach_the_child(monkeypatch):
    """Issue 41, 5: everything of the TA's environment but PYTHON* and GRADER_* reached the
    child, and a submission raised AWS_SECRET_ACCESS_KEY and HF_TOKEN into its own feedback. A
    child inherits only what Python, CUDA and the compilers need (grader/running/child_env.py)."""
    planted = {"AWS_SECRET_ACCESS_KEY": "fake-aws-secret-41", "HF_TOKEN": "hf_fake_token_41",
               "LD_PRELOAD": "/fake/preload-41.so", "CUDA_LAUNCH_BLOCKING": "1"}  # fmt: skip
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    failed = failures(grade(HOSTILE / "prints_its_environment", ["vector_add"]))
    assert failed and all("environment: " in t.output and "PATH=" in t.output for t in failed), failed[0].output
    leaked = {name for name, value in planted.items() for t in failed if f"{name}=" in t.output or value in t.output
              and len(value) > 1}  # fmt: skip
    assert not leaked, f"the TA's {sorted(leaked)} reached the child: {failed[0].output[:500]}"


def test_a_missing_file_costs_no_child_and_says_what_the_folder_holds():
    result = grade(HOSTILE / "missing_file", ["vector_add"])
    failed = [t for t in result.tests if t.kind == "correctness"]
    assert failed and all(t.reason == "missing_file" for t in failed)
    assert "vector_add/vector_add.py was not found in the submission. The folder holds: NOTES.txt." in failed[0].output
    assert result.environment["phases"].startswith("vector_add: start 0.0 s"), "a child was started to say so"


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _graders() -> list[int]:
    """Processes running the child's harness that this test's grading could have left: this
    process's descendants (the grader is a subreaper, so an orphan of its children lands here) and
    orphans of init or of this process's ancestors (where an orphan lands without a subreaper).
    Other tests' gradings, running at the same time under pytest-xdist, are descendants of other
    workers and are not counted."""
    mine, ancestor = {1}, _parent(os.getpid())
    while ancestor not in mine and ancestor != 0:
        mine.add(ancestor)
        ancestor = _parent(ancestor)
    found = []
    for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
        try:
            if b"grader.child.main" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
        except OSError:
            continue
        ancestor = _parent(pid)
        while ancestor not in (0, 1, os.getpid()):
            ancestor = _parent(ancestor)
        if ancestor == os.getpid() or _parent(pid) in mine:
            found.append(pid)
    return found


@pytest.mark.parametrize("sandboxed", [True, False], ids=["in the sandbox", "without a sandbox"])
def test_a_daemon_left_behind_does_not_outlive_the_grading(sandboxed):
    if sandboxed and STATUS.startswith("none"):
        pytest.skip(f"no sandbox here: {STATUS}")
    result = grade(HOSTILE / "leaves_a_daemon", ["vector_add"], sandbox=sandboxed)
    assert {t.reason for t in failures(result)} == {"not_implemented"}
    assert not _graders(), "a process the child started is still running after the grading"


def test_grading_goes_on_where_namespaces_are_refused(tmp_path):
    """A machine that refuses namespaces, made here: a user namespace whose limits allow no more."""
    if not shutil.which("unshare"):
        pytest.skip("needs util-linux's unshare to build a namespace-refusing machine")
    limits = "; ".join(f"echo 0 > /proc/sys/user/max_{kind}_namespaces" for kind in ("user", "mnt", "net", "pid"))
    report = tmp_path / "results.json"
    command = f'{limits} && exec "$0" -m grader grade --submission solutions --assignment vector_add ' \
              f'--json {report} --html {tmp_path / "report.html"}'  # fmt: skip
    done = subprocess.run(["unshare", "-r", "sh", "-c", command, sys.executable], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    if done.returncode != 0 and not report.exists() and "unshare" in done.stderr:
        pytest.skip(f"cannot build a namespace-refusing machine here: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = json.loads(report.read_text())
    assert results["extra_data"]["sandbox"].startswith("none ("), results["extra_data"]["sandbox"]
    graded = [t for t in results["tests"] if t["extra_data"]["kind"] == "correctness"]
    assert graded and all(t["status"] == "passed" for t in graded), "the grade is the same without the sandbox"


BAD_LIMITS = [("host_memory_gib", "0"), ("max_processes", "2.5"), ("gpu_memory_gib", '"lots"')]


@pytest.mark.parametrize("key, value", BAD_LIMITS)
def test_a_bad_limit_is_a_spec_error(tmp_path, key, value):
    folder = tmp_path / "vector_add"
    shutil.copytree(REPO_ROOT / "assignments" / "vector_add", folder)
    toml = folder / "assignment.toml"
    toml.write_text(re.sub(rf"^{key} = .*$", f"{key} = {value}", toml.read_text(), count=1, flags=re.MULTILINE))
    assert f"{key} = {value}" in toml.read_text()
    with pytest.raises(SpecError, match=f"key '{key}'"):
        load_assignment(folder)


@pytest.mark.gpu
@requires_gpu
def test_gpu_memory_over_the_cap_is_out_of_memory(tmp_path):
    cap = load_assignment(REPO_ROOT / "assignments" / "vector_add").gpu_memory_gib
    folder = tmp_path / "greedy" / "vector_add"
    folder.mkdir(parents=True)
    (folder / "vector_add.py").write_text(
        "import torch\n\ndef add(x, y):\n"
        f"    return torch.empty(int({cap + 1} * 2**30), dtype=torch.uint8, device=x.device)\n"
    )
    failed = failures(grade(folder.parent, ["vector_add"], device="cuda"))
    assert failed and {t.reason for t in failed} == {"out_of_memory"}, [t.output[:300] for t in failed]


def test_a_checkout_under_tmp_still_grades(tmp_path):
    """The sandbox hides the shared /tmp, but not a grader that lives there (Gradescope's unpacked
    autograder, a TA's scratch checkout): its grader/ and assignments/ stay in sight."""
    checkout = Path(tempfile.mkdtemp(prefix="checkout-", dir="/tmp"))
    try:
        for name in ("grader", "assignments"):
            shutil.copytree(REPO_ROOT / name, checkout / name, ignore=shutil.ignore_patterns("__pycache__"))
        report = tmp_path / "results.json"
        done = subprocess.run([sys.executable, "-m", "grader", "grade", "--submission", str(REPO_ROOT / "solutions"),
                               "--assignment", "vector_add", "--json", str(report), "--html", str(tmp_path / "r.html")],
                              cwd=checkout, capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        graded = [t for t in json.loads(report.read_text())["tests"] if t["extra_data"]["kind"] == "correctness"]
        assert graded and all(t["status"] == "passed" for t in graded), [t["output"][:300] for t in graded]
    finally:
        shutil.rmtree(checkout, ignore_errors=True)


def test_a_child_that_dies_before_any_task_is_not_blamed_on_the_student(tmp_path):
    from grader.running.tasks import Budget, run_tasks

    if torch.cuda.is_available():
        pytest.skip("needs a machine without a GPU: the child is sent to a GPU that is not there")
    # A child sent to the GPU tier on a machine without a GPU dies setting up, before its first task.
    job = Job(str(REPO_ROOT / "assignments" / "vector_add"), str(tmp_path), "cuda", 0, "", [])
    tasks = [Task("add:case:0", "add", "case", 0, 1)]
    results = run_tasks(job, tasks, tmp_path, None, Budget(60))
    failure = results["add:case:0"].outcome
    assert failure.reason == "crash" and "before running any of your code" in failure.message, failure


def test_the_watchdog_survives_a_process_that_vanishes_while_it_looks(monkeypatch):
    """A child's processes can exit between two looks at /proc (a student can make many short-lived
    ones): such a look fails with FileNotFoundError. It once ended the watchdog's thread, and every
    limit with it; a failed look is now retried and the limit still holds."""
    failures = {"left": 3}
    real = limits._scratch_bytes

    def vanishing(pid: int) -> int:
        if failures["left"]:
            failures["left"] -= 1
            raise FileNotFoundError(2, "No such file or directory", f"/proc/{pid}/root/tmp")
        return real(pid)

    monkeypatch.setattr(limits, "_scratch_bytes", vanishing)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        watchdog = limits.Watchdog(child.pid, limits.Limits(host_memory_bytes=1, max_processes=16), set())
        watchdog.start()
        watchdog.join(timeout=10)
        assert failures["left"] == 0 and not watchdog.is_alive(), "the watchdog should have found the limit"
        assert watchdog.verdict is not None and watchdog.verdict[0] == "out_of_memory", watchdog.verdict
        assert child.wait(timeout=10) == -9, "the process over the limit was killed"
    finally:
        child.kill()


def test_the_watchdog_looks_again_at_a_pid_used_again(monkeypatch):
    """The watchdog reads the stat of a process it has seen not to descend from the grader only
    once (limits.Watchdog._outside); a pid that a process of the child takes over later is another
    /proc entry (another inode), read and counted like any other. Here /proc is a table: pid 50 is
    first another user's process, then the leader's child."""
    me, leader = os.getpid(), 4_000_001
    table = {1: (1, (0, 1, 0)), me: (2, (1, 1, 0)), leader: (3, (me, leader, 4096)), 50: (4, (1, 50, 4096))}
    entries = lambda: [SimpleNamespace(name=str(pid), inode=lambda i=inode: i) for pid, (inode, _) in table.items()]  # noqa: E731
    monkeypatch.setattr(limits.os, "scandir", lambda path: entries())
    monkeypatch.setattr(limits, "_stat", lambda pid: table[int(pid)][1])
    monkeypatch.setattr(limits, "_namespace", lambda pid, link="pid": None)
    watchdog = limits.Watchdog(leader, limits.Limits(host_memory_bytes=1 << 30, max_processes=16), set())
    assert watchdog.members() == {leader: 4096} and 50 in watchdog._outsiders
    read = []
    monkeypatch.setattr(limits, "_stat", lambda pid: read.append(int(pid)) or table[int(pid)][1])
    assert watchdog.members() == {leader: 4096} and 50 not in read, "an outsider's stat is read once"
    table[50] = (5, (leader, leader, 8192))  # pid 50 ended, and the child's next process took it
    assert watchdog.members() == {leader: 4096, 50: 8192}


def test_compiled_kernels_on_disk_count_against_the_scratch_limit(tmp_path):
    """The one folder a grading's children share on the host's disk (Triton's cache) is no way
    around `scratch_gib`: the watchdog weighs it and stops the child past the limit."""
    shared = isolation.compiled_cache(tmp_path)
    (shared / "kernel.cubin").write_bytes(b"\0" * 4096)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        ample = limits.Limits(host_memory_bytes=64 << 30, max_processes=16)
        watchdog = limits.Watchdog(child.pid, ample, set(), disk=(shared, 1024))
        watchdog.start()
        watchdog.join(timeout=10)
        assert watchdog.verdict is not None, "4 KiB of compiled kernels over a 1 KiB limit went unseen"
        reason, message = watchdog.verdict
        assert reason == "out_of_memory" and "scratch_gib" in message and "disk" in message, watchdog.verdict
        assert child.wait(timeout=10) == -9
    finally:
        child.kill()


def test_a_gradings_children_share_one_triton_cache_and_no_other_grading_sees_it(tmp_path):
    """Compiled once per grading: every child of one grading (correctness, then each part's timing)
    gets the same Triton cache and autotuning cache, in that grading's private folder."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    env = [isolation.child_environment("cuda", Path("/tmp"), isolation.compiled_cache(w)) for w in (first, first, second)]
    assert env[0]["TRITON_CACHE_DIR"] == env[1]["TRITON_CACHE_DIR"] == str(first / "compiled")
    assert env[2]["TRITON_CACHE_DIR"] == str(second / "compiled")
    assert env[0]["TRITON_CACHE_AUTOTUNING"] == "1"
    assert (first / "compiled").stat().st_mode & 0o777 == 0o700


def test_a_timing_child_keeps_its_autotuner_picks_apart(tmp_path, monkeypatch):
    """The autotuner's picks of a correctness run were timed beside other students' work: every
    timing child, on a shared GPU or not, keeps picks of its own (child/timed_picks.py), and only
    a timing child does. A TA's own cache manager reaches no child."""

    monkeypatch.setenv("TRITON_CACHE_MANAGER", "somewhere:Else")
    compiled = isolation.compiled_cache(tmp_path)
    timed, checking = (isolation.child_environment("cuda", Path("/tmp"), compiled, timed=t) for t in (True, False))
    assert timed["TRITON_CACHE_MANAGER"] == isolation.TIMED_PICKS and "TRITON_CACHE_MANAGER" not in checking
    assert timed["TRITON_CACHE_AUTOTUNING"] == checking["TRITON_CACHE_AUTOTUNING"] == "1"
    assert timed["TRITON_CACHE_DIR"] == checking["TRITON_CACHE_DIR"] == str(tmp_path / "compiled")
    seen = []

    def child(job, workdir, view, timeout_s, gate=None, compiled=None, spawned=None, timed=False):
        seen.append(timed)
        raise RuntimeError("enough")

    monkeypatch.setattr(isolation, "run_child", child)
    task = Task("add:bench:0", "add", "bench", 0, 1, 1, 1 << 20)
    for phase, gate in (("timing", lambda stage: True), ("timing", None), ("correctness", lambda stage: True)):
        with pytest.raises(RuntimeError):
            tasks.run_tasks(Job("", "", "cuda", 0, "", []), [task], tmp_path, None, tasks.Budget(60), phase=phase,
                              gate=gate)  # fmt: skip
    assert seen == [True, True, False]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_torchs_compiler_cache_is_the_same_private_folder_on_both_tiers(device, tmp_path):
    """Importing torch._dynamo makes this folder, and a child imports it only with a torch that
    needs it: the child makes it on both tiers, so code that looks for it (the CS336 kernel in
    tests/corpus) sees one tier."""
    env = isolation.child_environment(device, tmp_path)
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / isolation.INDUCTOR_CACHE)


def test_each_grade_says_where_its_time_went(solutions):
    result = solutions.grade("vector_add")  # a grading of solutions/vector_add, once a run (conftest.Solutions)
    phases = result.environment["phases"]
    assert phases.startswith("vector_add: start "), phases
    seconds = dict(re.findall(r"(\w+) ([\d.]+) s", phases))
    assert {"start", "build", "correctness", "timing", "sizing", "judging"} <= set(seconds), phases
    assert set(seconds) <= {"start", "build", "correctness", "timing", "sizing", "judging", "caches"}, phases
    assert float(seconds["start"]) > 0 and float(seconds["correctness"]) > 0
    assert sum(map(float, seconds.values())) <= result.seconds + 0.5, (phases, result.seconds)
    # Each case says how long its task took in the child: together, within the correctness phase.
    cases = [t.metrics.get("seconds") for t in result.tests if t.kind == "correctness"]
    assert cases and all(isinstance(c, float) and c > 0 for c in cases), cases
    assert sum(cases) <= float(seconds["correctness"]) + 0.1, (cases, phases)


def test_a_child_started_ahead_waits_for_its_job_and_counts_none_of_its_siblings(tmp_path):
    """grading.spawn_timer starts the timing child while the correctness child runs: the waiting
    child imports torch, gets its job later, and its watchdog never takes the sibling for its own
    (the sibling's memory and processes are not its); one that gets no job leaves nothing behind."""
    import threading

    assignment = load_assignment(REPO_ROOT / "assignments" / "vector_add")
    grading = AssignmentGrading(assignment, REPO_ROOT / "solutions", Settings(device="cpu"))
    tasks = grading.case_tasks(assignment.parts[0])
    try:
        ahead = isolation.spawn(grading.job, grading.workdir, grading.view, False, grading.compiled, "torch")
        counted, done = set(), threading.Event()

        def watch() -> None:
            while not done.is_set():
                siblings = set(isolation._live_children) - {ahead.process.pid}
                counted.update(set(ahead.watchdog.members()) & siblings)
                time.sleep(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            sibling = isolation.run_child(dataclasses.replace(grading.job, tasks=tasks[:2]), grading.workdir,
                                          grading.view, 120, compiled=grading.compiled)  # fmt: skip
        finally:
            done.set()
            watcher.join()
        assert sibling.finished and not counted, "the waiting child's watchdog counted its sibling as its own"
        assert ahead.process.poll() is None and ahead.watchdog.verdict is None
        run = isolation.run_child(dataclasses.replace(grading.job, tasks=tasks), grading.workdir, grading.view, 120,
                                  compiled=grading.compiled, spawned=ahead)  # fmt: skip
        assert ahead.taken and run.finished and len(run.outcomes) == len(tasks)
        assert not any(isinstance(done.outcome, Failure) for done in run.outcomes.values())
        unused = isolation.spawn(grading.job, grading.workdir, grading.view, False)
        unused.discard()
        assert unused.process.returncode is not None and unused.process.pid not in isolation._live_children
    finally:
        grading.scratch.remove()


def _maps_torch(pid: int) -> bool:
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


def test_a_held_child_imports_only_once_it_is_let_and_its_job_lets_it_at_the_latest(tmp_path):
    """On a shared GPU the timing child is spawned `held` (grading.spawn_timer): it imports torch
    only once the correctness child has, not all at once with it; a child never let imports when
    its job comes. (Without the sandbox the child is the spawned process, whose maps show torch.)"""
    assignment = load_assignment(REPO_ROOT / "assignments" / "vector_add")
    grading = AssignmentGrading(assignment, REPO_ROOT / "solutions", Settings(device="cpu", sandbox=False))
    job = dataclasses.replace(grading.job, tasks=grading.case_tasks(assignment.parts[0])[:2])
    try:
        let, unlet = (isolation.spawn(grading.job, grading.workdir, None, True, grading.compiled, "torch", held=True)
                      for _ in range(2))  # fmt: skip
        time.sleep(2.0)
        assert not any(_maps_torch(child.process.pid) for child in (let, unlet)), "a held child imported torch"
        let.let_import()
        let.let_import()  # once only: a second byte would open its gate early
        deadline = time.monotonic() + 60
        while not _maps_torch(let.process.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _maps_torch(let.process.pid) and not _maps_torch(unlet.process.pid)
        stages = []
        runs = [isolation.run_child(dataclasses.replace(job), grading.workdir, None, 120, gate=stages.append,
                                    spawned=child) for child in (let, unlet)]  # fmt: skip
    finally:
        grading.scratch.remove()
    for run in runs:
        assert run.finished and len(run.outcomes) == 2, run.stderr
    assert stages.count("cuda") == stages.count("run") == 2, stages


def test_a_child_started_ahead_is_up_before_its_tasks_and_runs_only_those_it_is_given(tmp_path):
    """A timing child started ahead (isolation.start_ahead, grading.spawn_timer) makes its harness
    ready with every task it may be given, holding the GPU beside the others only while it starts
    ("cuda" to "ready"); its tasks come later, the ones the parent chose, and it takes the
    phase's hold ("run") only then. Its start is `start` in the phases, not the phase's time."""
    assignment = load_assignment(REPO_ROOT / "assignments" / "vector_add")
    grading = AssignmentGrading(assignment, REPO_ROOT / "solutions", Settings(device="cpu"))
    every = grading.case_tasks(assignment.parts[0])
    started, phase = [], []
    try:
        child = isolation.spawn(grading.job, grading.workdir, grading.view, True, grading.compiled, "torch")
        isolation.start_ahead(child, dataclasses.replace(grading.job, tasks=every), started.append)
        assert child.ahead.channel.up.wait(timeout=120), "the child started ahead never said it was up"
        assert child.ahead.run.ready and started == ["cuda", "ready"], started
        time.sleep(1.0)  # waiting for its tasks is no part of its start
        chosen = every[1:3]
        run = isolation.run_child(dataclasses.replace(grading.job, tasks=chosen), grading.workdir, grading.view, 120,
                                  gate=phase.append, compiled=grading.compiled, spawned=child)  # fmt: skip
    finally:
        grading.scratch.remove()
    assert run.finished, run.stderr
    assert sorted(run.outcomes) == sorted(t.id for t in chosen), "it ran other tasks than those it was given"
    assert not any(isinstance(done.outcome, Failure) for done in run.outcomes.values())
    assert phase == ["run", "timed"], phase
    phases = tasks.Phases()
    phases.add_child("timing", run)
    assert phases["start"] == pytest.approx(run.ready_s) and 0 < run.ready_s
    assert phases["timing"] < run.seconds + 0.01 and run.seconds < 60, (phases, run.seconds)


def test_a_held_child_started_ahead_with_a_job_larger_than_its_pipe_holds_up_nothing(tmp_path):
    """A held timing child reads its job only once it is let import (after the correctness
    child's start): a job larger than the pipe's buffer is written meanwhile by a thread of its
    own, so starting it ahead returns at once, and the child is up once let."""
    assignment = load_assignment(REPO_ROOT / "assignments" / "vector_add")
    grading = AssignmentGrading(assignment, REPO_ROOT / "solutions", Settings(device="cpu", sandbox=False))
    first = grading.case_tasks(assignment.parts[0])[0]
    many = [dataclasses.replace(first, id=f"{first.id}-{i}") for i in range(2000)]  # about 200 KB of JSON
    try:
        child = isolation.spawn(grading.job, grading.workdir, None, True, grading.compiled, "torch", held=True)
        began = time.monotonic()
        isolation.start_ahead(child, dataclasses.replace(grading.job, tasks=many), lambda stage: None)
        assert time.monotonic() - began < 1.0, "starting the child ahead waited for it to read its job"
        assert not child.ahead.channel.up.wait(timeout=1.0), "a held child started before it was let"
        child.let_import()
        assert child.ahead.channel.up.wait(timeout=120) and child.ahead.run.ready
        run = isolation.run_child(dataclasses.replace(grading.job, tasks=[first]), grading.workdir, None, 120,
                                  gate=lambda stage: None, spawned=child)  # fmt: skip
    finally:
        grading.scratch.remove()
    assert run.finished and list(run.outcomes) == [first.id], run.stderr


def test_a_child_started_ahead_that_dies_in_its_start_lets_go_of_the_gpu(tmp_path):
    """Where the child dies while it starts CUDA (killed here as its gate opens), the hold its
    start took goes with it ("gone"), before its tasks come: a timed phase can take the GPU; and
    its run says no student code ran."""
    from grader.running.gpu_lock import GpuLock

    lock = GpuLock(tmp_path / "locks", "0")
    assignment = load_assignment(REPO_ROOT / "assignments" / "vector_add")
    grading = AssignmentGrading(assignment, REPO_ROOT / "solutions", Settings(device="cpu"))
    stages, held = [], []
    try:
        child = isolation.spawn(grading.job, grading.workdir, grading.view, True, grading.compiled, "torch")

        def gate(stage: str) -> None:
            stages.append(stage)
            if stage == "cuda":
                held.append(lock.beside("start"))
                held[-1].__enter__()
                child.watchdog.kill_all()  # it dies as it starts CUDA
            else:
                held.pop().__exit__(None, None, None)

        isolation.start_ahead(child, dataclasses.replace(grading.job, tasks=grading.case_tasks(assignment.parts[0])),
                              gate)  # fmt: skip
        assert child.ahead.channel.up.wait(timeout=120)
        child.ahead.channel.join(timeout=30)
        assert stages == ["cuda", "gone"] and not held, stages
        with lock.exclusive("a timed phase") as waited:
            assert waited < 5
        run = isolation.run_child(dataclasses.replace(grading.job, tasks=grading.case_tasks(assignment.parts[0])),
                                  grading.workdir, grading.view, 120, gate=stages.append, spawned=child)  # fmt: skip
    finally:
        grading.scratch.remove()
    assert not run.ready and not run.outcomes and stages == ["cuda", "gone"], stages


def test_without_a_sandbox_a_child_runs_in_its_submission_folder(tmp_path):
    """Where the OS refuses the sandbox, the child's working directory is the submission's folder
    (relative paths in student code mean what they mean there), whether it starts with its job or
    ahead of it."""
    folder = tmp_path / "student" / "vector_add"
    shutil.copytree(REPO_ROOT / "solutions" / "vector_add", folder)
    source = folder / "vector_add.py"
    source.write_text('import os\nprint("cwd:", os.getcwd(), flush=True)\n' + source.read_text())
    assignment = load_assignment(REPO_ROOT / "assignments" / "vector_add")
    grading = AssignmentGrading(assignment, folder.parent, Settings(device="cpu", sandbox=False))
    try:
        assert grading.view is None
        job = dataclasses.replace(grading.job, tasks=grading.case_tasks(assignment.parts[0])[:1])
        ahead = isolation.spawn(grading.job, grading.workdir, None, False, grading.compiled, "torch")
        runs = [isolation.run_child(job, grading.workdir, None, 120), isolation.run_child(
            dataclasses.replace(job), grading.workdir, None, 120, spawned=ahead)]  # fmt: skip
    finally:
        grading.scratch.remove()
    for run in runs:
        assert run.finished, run.stderr
        assert run.stdout.split("cwd:")[1].split()[0] == grading.job.submission_dir


@pytest.mark.parametrize("present", [True, False])
def test_the_correctness_child_starts_before_its_cases_are_sized(tmp_path, monkeypatch, present):
    """Sizing each case's output (output_sizes.output_bytes), where no earlier process kept the
    sizes, imports torch's compiler modules in the grading process, seconds on a loaded machine:
    the correctness child is started first and imports torch meanwhile, and the first run of cases
    goes to it. A submission without the part's file starts no child at all."""
    from grader.assignment import output_sizes

    events = []
    real_spawn, real_run_child, real_size = isolation.spawn, isolation.run_child, output_sizes.output_bytes

    def spawn(*args, **kwargs):
        events.append("spawn")
        return real_spawn(*args, **kwargs)

    def run_child(*args, **kwargs):
        spawned = inspect.signature(real_run_child).bind(*args, **kwargs).arguments.get("spawned")
        events.append("run ahead" if spawned is not None else "run fresh")
        return real_run_child(*args, **kwargs)

    def size(*args, **kwargs):
        events.append("size")
        return real_size(*args, **kwargs)

    monkeypatch.setattr(isolation, "spawn", spawn)
    monkeypatch.setattr(isolation, "run_child", run_child)
    monkeypatch.setattr(output_sizes, "output_bytes", size)
    submission = tmp_path / "student"
    shutil.copytree(REPO_ROOT / "solutions" / "vector_add", submission / "vector_add")
    if not present:
        (submission / "vector_add" / "vector_add.py").unlink()
    tests = AssignmentGrading(load_assignment(REPO_ROOT / "assignments" / "vector_add"), submission,
                              Settings(device="cpu")).run()  # fmt: skip
    if present:
        assert events[0] == "spawn" and events.index("spawn") < events.index("size") < events.index("run ahead")
        assert "run fresh" not in events and all(t.score == t.max_score for t in tests if t.kind == "correctness")
    else:
        assert "spawn" not in events and not any(e.startswith("run") for e in events)
        assert {t.reason for t in tests if t.kind == "correctness"} == {"missing_file"}


@pytest.mark.parametrize("interpret", [False, True])
def test_a_child_preloading_torch_takes_tritons_cache_key_before_any_student_code(interpret, monkeypatch):
    """Triton hashes its own 415 MB library into the key of a process's first compile (0.35 s of
    a timed phase on an H200): a child started ahead takes that key while it waits for its job,
    where Triton compiles for the GPU; under the interpreter (the CPU tier) it is not needed."""
    from triton import knobs
    from triton.runtime.cache import triton_key

    from grader.child import main

    monkeypatch.setattr(knobs.runtime, "interpret", interpret)
    triton_key.cache_clear()
    main._preload("torch")
    assert triton_key.cache_info().currsize == (0 if interpret else 1)


@pytest.mark.parametrize("target", ["solutions", "a classmate"])
def test_an_assignment_folder_that_is_a_link_is_not_followed(tmp_path, target):
    """Issue 41, 6: a submission whose vector_add/ was a link to solutions/ (or to a classmate's
    folder) was graded as what it pointed at: 4/4. No link is followed, the folder itself
    included: the part's file is missing, and the message says why."""
    pointed = REPO_ROOT / "solutions" / "vector_add"
    if target == "a classmate":
        pointed = shutil.copytree(pointed, tmp_path / "classmate" / "vector_add")
    (tmp_path / "student").mkdir()
    (tmp_path / "student" / "vector_add").symlink_to(pointed)
    result = grade(tmp_path / "student", ["vector_add"])
    graded = [t for t in result.tests if t.kind == "correctness"]
    assert graded and {t.reason for t in graded} == {"missing_file"} and result.score == 0
    assert "Links are not followed, and the submission has 1: vector_add" in graded[0].output, graded[0].output


def _host_memory_limited_to(gib: float, monkeypatch) -> None:
    """Every child's host memory limit is `gib` (the watchdog's and the cgroup's), as an
    assignment.toml saying so would make it: filling 6 GiB takes seconds of a small machine."""
    real = isolation.limits_of

    def limited(assignment_dir: str):
        found, gpu_memory_gib, scratch = real(assignment_dir)
        return limits.Limits(int(gib * 2**30), found.max_processes), gpu_memory_gib, scratch

    monkeypatch.setattr(isolation, "limits_of", limited)


def _hoarder(tmp_path: Path, gib: float) -> Path:
    submission = shutil.copytree(HOSTILE / "hoards_shared_memory", tmp_path / "hoarder")
    (submission / "vector_add" / "hoard_gib.txt").write_text(str(gib))  # past the limit the test sets
    return submission


def _own_groups() -> list[Path]:
    found = memory_cgroup.hierarchy()
    return sorted(found.base.glob(f"child-{os.getpid()}-*")) if isinstance(found, memory_cgroup.Hierarchy) else []


@pytest.mark.parametrize("sandboxed", [True, False], ids=["in the sandbox", "without a sandbox"])
def test_memory_that_no_process_maps_is_out_of_memory_at_the_limit(tmp_path, monkeypatch, sandboxed):
    """Issue 41, 4: memfd_create and os.write held 6.5 GiB over a 6 GiB limit for 5 s per call,
    never killed: a memfd's pages are in no process's RSS and in no sandbox tmpfs. Each child's
    memory cgroup counts them, and the kernel ends the child at the limit."""
    if not isinstance(memory_cgroup.hierarchy(), memory_cgroup.Hierarchy):
        pytest.skip(f"no memory cgroup here: {memory_cgroup.describe()}")
    if sandboxed and STATUS.startswith("none"):
        pytest.skip(f"no sandbox here: {STATUS}")
    _host_memory_limited_to(1, monkeypatch)
    failed = failures(grade(_hoarder(tmp_path, 1.5), ["vector_add"], sandbox=sandboxed, timeout_s=60))
    assert failed and {t.reason for t in failed} == {"out_of_memory"}, [t.output[:300] for t in failed]
    assert "limit of 1 GiB (host_memory_gib), which counts shared memory, memfd and tmpfs" in failed[0].output
    assert not _own_groups(), "a child's memory cgroup outlived it"


@pytest.mark.parametrize("sandboxed", [True, False], ids=["in the sandbox", "without a sandbox"])
def test_where_no_cgroup_can_be_made_memory_no_process_maps_is_refused(tmp_path, monkeypatch, sandboxed):
    """The fallback of a machine that offers no memory cgroup to this user: the child's seccomp
    filter refuses memfd_create (and System V shared memory), sandboxed or not, and a correct
    submission is graded as before."""
    if sandboxed and STATUS.startswith("none"):
        pytest.skip(f"no sandbox here: {STATUS}")
    monkeypatch.setattr(memory_cgroup, "group_for", lambda limit_bytes: None)
    _host_memory_limited_to(1, monkeypatch)
    failed = failures(grade(_hoarder(tmp_path, 1.5), ["vector_add"], sandbox=sandboxed, timeout_s=60))
    assert failed and {t.reason for t in failed} == {"crash"}, [t.output[:300] for t in failed]
    assert all("PermissionError: [Errno 1] Operation not permitted" in t.output for t in failed), failed[0].output
    if sandboxed:
        assert not failures(grade(REPO_ROOT / "solutions", ["vector_add"], sandbox=sandboxed)), "no memfd, no loss"


@pytest.mark.gpu
@requires_gpu
@pytest.mark.parametrize("walls", ["landlock", "no cgroup"])
def test_the_walls_leave_a_gpu_grading_whole(walls, monkeypatch):
    """On a GPU, what the walls refuse is nothing CUDA, Triton, nvcc's libraries or torch.compile
    need: without the sandbox (Landlock and the launcher's seccomp filter), and where no memory
    cgroup can be made (memfd_create and shmget refused), solutions/ earns every point."""
    if walls == "no cgroup":
        monkeypatch.setattr(memory_cgroup, "group_for", lambda limit_bytes: None)
    result = grade(REPO_ROOT / "solutions", ["vector_add", "gelu"], device="cuda", sandbox=walls != "landlock")
    lost = [(t.name, t.reason, t.output[:200]) for t in result.tests if t.graded and not t.passed]
    assert not lost, lost
    if walls == "landlock":
        assert "Landlock ABI" in result.environment["sandbox"], result.environment["sandbox"]


PINS = """import torch

def add(x, y):
    hoard = [torch.empty(256 << 20, dtype=torch.uint8, pin_memory=True).fill_(1) for _ in range({count})]
    raise RuntimeError(f"pinned {{len(hoard) / 4:.1f}} GiB of host memory: nothing stopped it")
"""


@pytest.mark.gpu
@requires_gpu
def test_pinned_host_memory_counts_against_the_limit(tmp_path, monkeypatch):
    """CUDA's pinned host memory (cudaHostAlloc, under torch's pin_memory) is host memory the
    child holds: past host_memory_gib its memory cgroup ends it. (Measures whether the driver's
    pinned pages are charged to the cgroup: if this fails, they are not.)"""
    if not isinstance(memory_cgroup.hierarchy(), memory_cgroup.Hierarchy):
        pytest.skip(f"no memory cgroup here: {memory_cgroup.describe()}")
    _host_memory_limited_to(2, monkeypatch)
    (tmp_path / "pins" / "vector_add").mkdir(parents=True)
    (tmp_path / "pins" / "vector_add" / "vector_add.py").write_text(PINS.format(count=12))  # 3 GiB
    failed = failures(grade(tmp_path / "pins", ["vector_add"], device="cuda", timeout_s=120))
    assert failed and {t.reason for t in failed} == {"out_of_memory"}, [t.output[:300] for t in failed]


def test_a_memory_cgroup_left_by_a_killed_grader_is_removed():
    """A grader killed mid-grading (kill -9 of a batch) cannot remove its children's groups: the
    next grader process removes those whose maker is gone, and no other."""
    found = memory_cgroup.hierarchy()
    if not isinstance(found, memory_cgroup.Hierarchy):
        pytest.skip(f"no memory cgroup here: {memory_cgroup.describe()}")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    stale, mine = found.base / f"child-{dead}-left", memory_cgroup.group_for(1 << 30)
    stale.mkdir()
    try:
        memory_cgroup._remove_stale(found.base)
        assert not stale.exists() and mine.path.exists()
    finally:
        mine.remove()
        if stale.exists():
            stale.rmdir()
