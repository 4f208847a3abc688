"""A killed grading's scratch folder is removed by the next grading, and a live one's never
(grader/running/workdirs.py). Before, every grading killed mid-run (kill -9, the OOM killer, a
Dask worker ended when a batch was stopped) left its folder under /tmp: the submission's copy,
its compiled kernels and its cases' outputs, gigabytes for the large cases."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import sys
import time
from pathlib import Path

from grader.assignment.spec import REPO_ROOT
from grader.running import workdirs

HOLDER = "import sys, time; from grader.running.workdirs import Workdir; print(Workdir('x').path, flush=True); time.sleep(600)"


def _holder(tmp: Path) -> tuple[subprocess.Popen, Path]:
    """A process that made a grading folder under `tmp` and lives on with it."""
    env = {**os.environ, "TMPDIR": str(tmp)}
    process = subprocess.Popen([sys.executable, "-c", HOLDER], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, text=True)
    return process, Path(process.stdout.readline().strip())


def test_a_sweep_removes_the_folder_of_a_killed_grading_and_keeps_a_living_ones(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    killed, gone = _holder(tmp)
    living, kept = _holder(tmp)
    try:
        (gone / "outputs").mkdir()
        (gone / "outputs" / "case-0.pt").write_bytes(b"x" * 1024)
        unlocked = tmp / "grade-made-by-hand"  # no lock file: being made, or not a grading's
        unlocked.mkdir()
        (tmp / "grade-a-link").symlink_to(gone)
        assert workdirs.sweep(tmp) == [], "every folder with a lock file is held"
        killed.kill()
        killed.wait(timeout=60)
        assert gone.is_dir(), "kill -9 ran no clean-up of the grading's own"
        assert workdirs.sweep(tmp) == [gone]
        assert not gone.exists() and kept.is_dir() and unlocked.is_dir()
        assert (tmp / "grade-a-link").is_symlink(), "a link is not followed, nor removed"
    finally:
        living.kill()
        living.wait(timeout=60)
    assert workdirs.sweep(tmp) == [kept], "the living holder's folder, once it died"


def test_a_grading_killed_mid_run_leaves_a_folder_that_the_next_grading_removes(tmp_path):
    """Real gradings, as a TA's machine meets them: one killed by SIGKILL while its child runs,
    then one that runs to its end. Afterwards no grading folder is left."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}

    def grading(name: str) -> list[str]:
        return [sys.executable, "-m", "grader", "grade", "--submission", str(REPO_ROOT / "starter"), "--assignment",
                "vector_add", "--device", "cpu", "--json", str(tmp_path / f"{name}.json"),
                "--html", str(tmp_path / f"{name}.html")]  # fmt: skip

    first = subprocess.Popen(grading("killed"), cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    began = time.monotonic()
    try:
        while not list(tmp.glob("grade-vector_add-*/submission")):
            assert first.poll() is None, "the grading ended before its folder was seen"
            assert time.monotonic() - began < 300, "no grading folder in 300 s"
            time.sleep(0.05)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
    left = list(tmp.glob("grade-*"))
    assert len(left) == 1, left
    subprocess.run(grading("next"), cwd=REPO_ROOT, env=env, capture_output=True, check=True, timeout=600)
    assert (tmp_path / "next.json").is_file()
    assert not list(tmp.glob("grade-*")), "the killed grading's folder, or the next one's, is still there"


def test_a_folder_removed_later_is_gone_once_the_removals_are_waited_for(tmp_path, monkeypatch):
    """`remove(later=True)` returns before the folder is gone (a grade's results do not wait for it),
    keeps it locked against other gradings' sweeps while it goes, and `wait_for_removals` returns
    once it is gone and its `then` has run."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(workdirs.tempfile, "tempdir", None)
    folder = workdirs.Workdir("later")
    (folder.path / "outputs").mkdir()
    (folder.path / "outputs" / "case-0.pt").write_bytes(b"x" * 4096)
    release, rmtree = threading.Event(), workdirs.shutil.rmtree

    def held_back(path, **kwargs):
        if Path(path) == folder.path:
            release.wait(60)  # the removal's thread, at work on the folder
        rmtree(path, **kwargs)

    monkeypatch.setattr(workdirs.shutil, "rmtree", held_back)
    called = []
    folder.remove(later=True, then=lambda: called.append(True))
    assert folder.path.is_dir() and not called, "the removal did not wait on its thread"
    assert workdirs.sweep(tmp_path) == [] and folder.path.is_dir(), "a sweep took a folder still being removed"
    release.set()
    workdirs.wait_for_removals()
    assert called and not folder.path.exists()
