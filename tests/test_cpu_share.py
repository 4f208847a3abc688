"""Each process of a GPU grading runs its share of the host's cores (cpu_share.py): the children of
six gradings side by side each brought 16 threads to 16 cores, and ran 1.6 to 2.3 times as long."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
import torch

from conftest import requires_gpu
from grader.assignment.loading import load_assignments
from grader.course import batch
from grader.grading import Settings, grade_submission
from grader.running import cpu_share, isolation


@pytest.mark.parametrize("gradings, cores, expected", [(6, 16, 1), (1, 16, 8), (4, 64, 8), (1, 2, 1), (3, 2, 1),
                                                       (0, 16, 8)])  # fmt: skip
def test_the_cores_are_split_over_the_gradings_that_share_them(gradings, cores, expected):
    assert cpu_share.threads(gradings, cores) == expected


@pytest.fixture
def own_threads():
    """torch's thread count of this process, as it was before the test."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_a_gpu_tier_child_runs_as_many_threads_as_its_grading_whatever_the_shell_says(monkeypatch, tmp_path, own_threads):
    monkeypatch.setenv("OMP_NUM_THREADS", "64")  # a cluster's job script, say
    assert cpu_share.take(gradings=1_000) == 1  # more gradings than cores: one thread each
    env = isolation.child_environment("cuda", tmp_path)
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    # torch in a process started with those variables runs that many: what the child's does.
    seen = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"], env=env,
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert seen.strip() == "1"


def test_the_cpu_tier_keeps_the_shells_thread_count(monkeypatch, tmp_path, own_threads):
    """There one child runs at a time, and the grading takes no share (grade_assignment)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    torch.set_num_threads(1)
    assert isolation.child_environment("cpu", tmp_path)["OMP_NUM_THREADS"] == "3"
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert "OMP_NUM_THREADS" not in isolation.child_environment("cpu", tmp_path)


def test_a_batchs_gpu_workers_know_how_many_share_the_host(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    specs = batch.worker_specs("cuda", 5)
    counts = {spec["options"]["env"][cpu_share.AT_ONCE] for spec in specs.values()}
    assert counts == {"5"}
    monkeypatch.setenv(cpu_share.AT_ONCE, "5")
    assert cpu_share.gradings_here() == 5
    for bad in ("", "0", "-2", "many"):
        monkeypatch.setenv(cpu_share.AT_ONCE, bad)
        assert cpu_share.gradings_here() == 1
    assert all(cpu_share.AT_ONCE not in spec["options"]["env"] for spec in batch.worker_specs("cpu", 2).values())


@requires_gpu
@pytest.mark.gpu
def test_student_code_on_the_gpu_sees_its_gradings_share(repo, tmp_path, own_threads):
    """A real GPU grading told that more gradings share the host than it has cores: the student's
    call reports torch's thread count in the child as its error, which the verdict shows."""
    folder = tmp_path / "vector_add"
    folder.mkdir()
    (folder / "vector_add.py").write_text(
        "import torch\n\ndef add(x, y):\n    raise RuntimeError(f'threads={torch.get_num_threads()}')\n")
    chosen = [dataclasses.replace(a, parts=a.parts[:1]) for a in load_assignments(["vector_add"])]
    gradings = 1_000
    result = grade_submission(tmp_path, chosen, Settings(device="cuda", gradings=gradings))
    said = {t.output for t in result.tests if t.kind == "correctness"}
    expected = f"threads={cpu_share.threads(gradings)}"
    assert said and all(expected in text for text in said), said
    assert torch.get_num_threads() == cpu_share.threads(gradings)  # the judging process's own
