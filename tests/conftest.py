"""Shared helpers: grading a folder through the real pipeline (child processes and all)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import pickle
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import pytest
import torch
from filelock import FileLock, Timeout  # comes with torch

from grader.running import compile_cache, sandbox
from grader.grading import Settings, grade_submission
from grader.reporting.results import Grade
from grader.assignment.loading import load_assignments
from grader.assignment.spec import REPO_ROOT

TESTS = Path(__file__).resolve().parent
SUBMISSIONS = TESTS / "submissions"

# The CPU-tier vector_add folders that test_hostile_batch.py grades as students of ONE batch: all
# but the spinning `infinite_loop`. That batch (`make test-slow`) checks each for its expect.toml
# reason, as test_wrong_submissions.py checks every other folder. test_wrong_submissions.py grades
# these itself where the batch cannot run (no dask's distributed), and otherwise one of each reason
# (`one_of_each_reason`), so that `make test` alone sees every reason a hostile folder earns.
SPINS = "infinite_loop"
HOSTILE_BATCH_RUNS = importlib.util.find_spec("distributed") is not None


def _a_share_of_the_cores() -> None:
    """Each pytest-xdist worker grades on its share of the cores (`make test`: two workers, two
    cores). Beyond that share, a grading's torch (OpenMP) and numpy (OpenBLAS) threads only wait
    for a core, spinning meanwhile: test_wrong_submissions.py alone on two workers took 158 s (273 s
    of user CPU) with two threads a process, 129 s (219 s) with one, most of it in the matmul bugs'
    torch references. Every child this process starts (the graded children, a batch's workers)
    inherits it; a value set by hand is kept."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers and "OMP_NUM_THREADS" not in os.environ:
        share = max(1, (os.cpu_count() or 1) // workers)
        os.environ["OMP_NUM_THREADS"] = str(share)
        torch.set_num_threads(share)


_a_share_of_the_cores()

requires_gpu = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU: run `make test-gpu` on a machine with one"
)


def grade(submission: Path, assignments: list[str], device: str = "cpu", timeout_s: float | None = None,
          parts: list[str] | None = None, sandbox: bool = True, cache: Path | None = None,
          arrange=None):  # fmt: skip
    """Grade `submission` (a folder laid out like starter/) and return the Grade. `parts`, where
    given, grades only the parts of those names (the ones a known-wrong submission is about);
    `sandbox=False` grades as a machine that refuses namespaces would; `cache`, where given, is
    the root of the compile cache the grading keeps its kernels in (compile_cache.py; the owner
    is the submission's path), else they go with its work folder; `arrange` picks and orders the
    correctness tasks the child runs (grading.Settings.arrange)."""
    settings = Settings(device=device, timeout_s=timeout_s, sandbox=sandbox, cache=cache, arrange=arrange)
    chosen = load_assignments(assignments)
    if parts:
        chosen = [dataclasses.replace(a, parts=tuple(p for p in a.parts if p.name in parts)) for a in chosen]
    return grade_submission(submission, chosen, settings)


def repository_files(repo: Path) -> list[str]:
    """Every file of the checkout that git does not ignore (tracked, or new and not yet added)."""
    command = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    try:
        listed = subprocess.run(command, cwd=repo, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: which files belong to the repository is unknown")
    return [name for name in listed.split("\0") if name and (repo / name).is_file()]


def fresh_checkout(destination: Path) -> tuple[Path, dict[str, str]]:
    """The repository as a fresh clone of this working tree has it (its files, none that git
    ignores: no .venv/, no results/), set up by its own `make`, which makes its .venv/ reuse this
    interpreter's torch and Triton as on a GPU image (grader/bootstrap.py). Returns the folder and
    the environment to run its commands in: this run's make, pytest and virtual environment
    variables left out, as in a reader's shell."""
    for name in repository_files(REPO_ROOT):
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, destination / name)
    prefixes = ("MAKE", "MFLAGS", "PYTEST", "VIRTUAL_ENV", "PYTHON", "COLUMNS", "LINES")
    env = {key: value for key, value in os.environ.items() if not key.startswith(prefixes)}
    env["PYTHON"] = sys.executable  # the Python `make` sets .venv/ up from (the Makefile's PYTHON)
    done = subprocess.run(["make", ".venv/.ready"], cwd=destination, env=env, capture_output=True, text=True,
                          timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return destination, env


def no_sandbox_where_none() -> list[str]:
    """`--no-sandbox` where the OS offers no sandbox, as a TA is told to pass it (Landlock and seccomp
    still wall each child); nothing where it offers one."""
    return ["--no-sandbox"] if sandbox.probe().startswith("none") else []


def gradebook_rows(out: Path) -> int:
    """How many tasks a batch writing to `out` has finished: its gradebook's rows (0 before it has one)."""
    path = out / "gradebook.sqlite"
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            return db.execute("SELECT COUNT(*) FROM grades").fetchone()[0]
    except sqlite3.Error:  # no gradebook yet, or the batch is still creating its table
        return 0


def run_while_progressing(process: subprocess.Popen, progress, stall_s: float) -> str:
    """Wait for `process` (its output piped, as text) for as long as it makes progress: `progress()`
    is a count that grows as it works (a batch's finished tasks). A hang guard, not a measurement:
    a process whose count has not moved for `stall_s` is hung, killed with its group, and the test
    fails with its output; a slow machine only makes it take longer. Returns the output."""
    chunks: list[str] = []
    reader = threading.Thread(target=lambda: chunks.extend(process.stdout), daemon=True)
    reader.start()
    last, moved = progress(), time.monotonic()
    while process.poll() is None:
        time.sleep(1)
        if (now := progress()) != last:
            last, moved = now, time.monotonic()
        elif time.monotonic() - moved > stall_s:
            with contextlib.suppress(ProcessLookupError):  # its group, where it leads one (start_new_session)
                os.killpg(process.pid, signal.SIGKILL) if os.getpgid(process.pid) == process.pid else process.kill()
            process.wait()
            reader.join(10)
            pytest.fail(f"no progress for {stall_s:.0f} s (stuck at {last}): killed\n{''.join(chunks)[-5000:]}")
    reader.join()
    return "".join(chunks)


def hostile_batch_expectations() -> dict[str, dict]:
    """Each CPU-tier vector_add folder's expect.toml but the spinning one's, by folder name (the
    student's name in the hostile batch)."""
    paths = sorted((SUBMISSIONS / "vector_add").glob("*/expect.toml"))
    found = {path.parent.name: tomllib.loads(path.read_text()) for path in paths}
    return {name: expect for name, expect in found.items() if expect.get("tier", "both") != "gpu" and name != SPINS}


def one_of_each_reason() -> set[Path]:
    """Of the CPU-tier folders under submissions/, the first by name of each reason in each
    assignment (the spinning one first of its own: no batch grades it): what `make test` grades of
    them, every reason each assignment's bugs earn. The rest of the catalog is `make test-slow`'s."""
    first: dict[tuple[str, str], Path] = {}
    for path in sorted(SUBMISSIONS.glob("*/*/expect.toml"), key=lambda p: (p.parent.name != SPINS, p)):
        expect = tomllib.loads(path.read_text())
        if expect.get("tier", "both") != "gpu":
            first.setdefault((path.parent.parent.name, expect["reason"]), path.parent)
    return set(first.values())


def known_wrong(folder: Path, root: Path) -> Path:
    """The submission that a folder under submissions/ stands for, ready to grade.

    A folder whose expect.toml lists `edits` holds no code: it stands for solutions/<assignment>/
    with each edit made (in `file`, the text `old`, which must occur exactly once, becomes
    `new`), written under `root`. The bug is then exactly those lines, and it follows every
    change to the solution; an edit that no longer applies fails here, by name. Any other folder
    (a hostile submission written from scratch) is the submission itself."""
    edits = tomllib.loads((folder / "expect.toml").read_text()).get("edits")
    if not edits:
        return folder
    assignment = folder.parent.name
    tree = root / f"{assignment}-{folder.name}"
    shutil.copytree(REPO_ROOT / "solutions" / assignment, tree / assignment,
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    for number, edit in enumerate(edits, 1):
        path = tree / assignment / edit["file"]
        text = path.read_text()
        found = text.count(edit["old"])
        assert found == 1, (f"{assignment}/{folder.name}: edit {number} finds its old text {found} times in "
                            f"solutions/{assignment}/{edit['file']}, not once: the solution changed, update the edit")
        path.write_text(text.replace(edit["old"], edit["new"]))
    return tree


class Solutions:
    """solutions/ graded once a session, an assignment at a time, by whichever pytest-xdist worker
    asks first (the others wait at a file lock, or go on without it): the Grade, which
    test_reference_submissions.py checks, and the kernels the grading compiled (compile_cache.py),
    which another grading of the solution's files, or of the solution with an edit, starts from.
    Triton's cache is keyed by each kernel's source (its first line's number too), options and
    target, so such a grading compiles only what the edit changed, and gives the verdicts of one
    from scratch: FlashAttention's lse_in_base_2 (the edit is in the forward, the backward is
    graded) took 29 s alone, 11 s from the solution's kernels."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.compiled = folder / "compiled"
        self.known: dict[str, Grade] = {}

    def grade(self, assignment: str, wait: bool = True) -> Grade | None:
        """The Grade of solutions/<assignment>, graded here if no worker has; None if another
        worker is grading it now and `wait` is False."""
        if assignment not in self.known:
            done = self.folder / f"{assignment}.pickle"
            try:
                with FileLock(self.folder / f"{assignment}.lock", timeout=-1 if wait else 0):
                    if not done.exists():
                        graded = grade(REPO_ROOT / "solutions", [assignment], cache=self.compiled)
                        partial = done.with_suffix(".partial")  # a worker killed mid-write leaves no half pickle
                        partial.write_bytes(pickle.dumps(graded))
                        partial.replace(done)
            except Timeout:
                return None
            self.known[assignment] = pickle.loads(done.read_bytes())
        return self.known[assignment]

    def grade_all(self, assignments: list[str]) -> Grade:
        """The Grade of every one of `assignments`, as one grading of solutions/ gives it: first
        those no other worker is grading now, then the others as they are done."""
        found = {name: self.grade(name, wait=False) for name in assignments}
        grades = [found[name] or self.grade(name) for name in assignments]
        environment = {**grades[0].environment, "phases": "; ".join(g.environment["phases"] for g in grades)}
        return Grade(grades[0].submission, [t for g in grades for t in g.tests], environment,
                     sum(g.seconds for g in grades))  # fmt: skip

    def seed(self, assignment: str, folder: Path, wait: bool = False) -> None:
        """Fill `folder`, the compile cache folder of a grading to come (compile_cache.folder_for),
        with a copy of the kernels the solution's grading compiled: only the grader's own output
        of the course's files, never another submission's. Where another worker is grading the
        solution now, nothing unless `wait`: the grading then compiles everything, as without a seed."""
        if self.grade(assignment, wait) is None:
            return
        solution = REPO_ROOT / "solutions" / assignment
        source = compile_cache.folder_for(self.compiled, str(solution.parent), assignment, solution)
        shutil.copytree(source, folder, dirs_exist_ok=True)
        # Each entry's group file names its files by absolute path, which Triton looks for: the copies'.
        for group in folder.glob("*/__grp__*.json"):
            entry = json.loads(group.read_text())
            entry["child_paths"] = {name: str(group.parent / name) for name in entry["child_paths"]}
            group.write_text(json.dumps(entry))


@pytest.fixture(scope="session")
def solutions(tmp_path_factory) -> Solutions:
    """One for the whole run: under pytest-xdist, in the folder that holds every worker's own."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "solutions-graded"
    folder.mkdir(exist_ok=True)
    return Solutions(folder)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO_ROOT


def pytest_addoption(parser) -> None:
    parser.addoption("--submission", default=str(REPO_ROOT / "starter"), help="the folder `make bench` times")


@pytest.fixture(scope="session")
def submission_dir(request) -> Path:
    return Path(request.config.getoption("--submission")).resolve()


# Tests that share a costly module-scoped fixture (a whole batch, the solutions' grading, a release
# bundle's own `make test`) run on one pytest-xdist worker together, so the fixture is built once:
# each is put in an xdist group named after its module (the Makefile runs `--dist loadgroup`).
# Every other test, in the same module or not, is scheduled on its own. A wrapper, so the groups
# are set before any plugin's own hook: pytest-xdist reads them in its collection hook, which runs
# before a conftest's; and pytest stays below 9 (grader/bootstrap.py), whose node ids ignore the
# group xdist 3.8 appends. Without both, each costly fixture was built on both workers (the
# hostile batch twice, 345 s each). test_layout.py proves the grouping holds.
#
# The longest groups are handed out first (FIRST, longest first: their fixtures took 253 s, 154 s and
# 50 s of a two-core run, 2026-11-26), so that short tests fill the other worker meanwhile and at the
# end, instead of one worker finishing the hostile batch alone while the other waits. (xdist hands
# out the groups before the tests scheduled on their own, the groups with more tests first; FIRST
# orders the rest.) The modules whose tests run in this process alone, 700 of them in 7 s
# altogether, are handed out LAST: a worker keeps up to three tests in hand, and three gradings
# of 10-30 s each at the end had left the other worker with nothing to do meanwhile.
FIRST = ("test_hostile_batch", "test_reference_submissions", "test_service", "test_batch", "test_course_class",
         "test_course_batch", "test_corpus")
LAST = ("test_dispatch_state", "test_strength", "test_intake", "test_channel", "test_bootstrap", "test_sandbox",
        "test_case_inputs", "test_occupancy", "test_fusion", "test_spec", "test_text", "test_ptx", "test_diagnosis",
        "test_numerics", "test_timing", "test_scoring", "test_gpu", "test_witness_gpu")


def _handed_out(item) -> int:
    """Where a test's module comes in the order of handing out: FIRST's, then the others, then LAST's."""
    name = item.module.__name__
    if name in FIRST:
        return FIRST.index(name)
    return len(FIRST) + 1 if name in LAST else len(FIRST)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    items.sort(key=_handed_out)
    for item in items:
        definitions = getattr(item, "_fixtureinfo", None)
        shared = definitions and any(
            defs and defs[-1].scope == "module" for defs in definitions.name2fixturedefs.values()
        )  # fmt: skip
        if shared:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    return (yield)
