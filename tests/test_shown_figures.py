"""The shown baselines' figures, timed once per machine by a child that runs no student code
(grader/running/shown_figures.py): where they are kept, what a kept file may hold, and that a
timing child's own word on a shown baseline never reaches a report."""

from __future__ import annotations

import json
import re
import shutil
from types import SimpleNamespace

import pytest

from conftest import grade, requires_gpu
from grader.assignment.loading import load_assignment, load_assignments
from grader.assignment.spec import REPO_ROOT
from grader.judging.verdicts import TaskResult
from grader.messages.reports import Activity, BenchReport, Failure, Timings
from grader.running import shown_figures


def _bench(shown: Timings | None = None) -> BenchReport:
    return BenchReport(Timings([0.1]), Timings([0.2]), Activity(), shown=shown)


def test_a_figure_is_kept_per_gpu_model_and_per_assignment_files(tmp_path):
    (gelu,) = load_assignments(["gelu"])
    h200, h100 = shown_figures.file_for(gelu, "NVIDIA H200"), shown_figures.file_for(gelu, "NVIDIA H100 80GB HBM3")
    assert h200 != h100 and h200.parent == shown_figures.ROOT and h200.name.startswith("gelu-NVIDIA_H200-")
    copy = tmp_path / "gelu"
    shutil.copytree(gelu.directory, copy)
    (copy / "reference.py").write_text((copy / "reference.py").read_text() + "\n# changed\n")
    assert shown_figures.file_for(load_assignment(copy), "NVIDIA H200") != h200, "a changed reference kept the figure"


@pytest.mark.parametrize("held, usable", [
    ({"gelu:shown:0": {"event_ms": [0.5, 0.6]}, "gelu:shown:1": {"error": "BackendCompilerFailed"}}, True),
    ([1, 2], False),
    ({"gelu:shown:0": {"event_ms": []}}, False),
    ({"gelu:shown:0": {"event_ms": [float("nan")]}}, False),
    ({"gelu:shown:0": {"event_ms": [-1.0]}}, False),
    ({"gelu:shown:0": {"event_ms": [0.5], "error": "x"}}, False),
    ({"gelu:shown:0": {"lost": "killed"}}, False),
])  # fmt: skip
def test_a_kept_file_is_read_only_where_it_holds_figures(tmp_path, held, usable):
    path = tmp_path / "gelu-x.json"
    path.write_text(json.dumps(held))
    assert (shown_figures._read(path) == held) if usable else shown_figures._read(path) is None
    assert shown_figures._read(tmp_path / "absent.json") is None


def test_every_report_gets_the_machines_figure_whatever_its_child_said():
    """The timing child runs student code: a shown figure it sends is replaced by the kept one,
    or by why there is none; a part without a shown baseline keeps none."""
    (gelu,) = load_assignments(["gelu"])
    parts = {part.name: part for part in gelu.parts}
    shown = [name for name, part in parts.items() if part.shown]
    plain = next(name for name, part in parts.items() if not part.shown)
    forged = Timings([1e-6] * 10)
    results = {f"{shown[0]}:bench:0": TaskResult(_bench(forged)), f"{shown[0]}:bench:1": TaskResult(_bench(forged)),
               f"{plain}:bench:0": TaskResult(_bench(forged)),
               f"{shown[-1]}:bench:0": TaskResult(Failure("crash", "died"))}  # fmt: skip
    found = {f"{shown[0]}:bench:0": {"event_ms": [0.25, 0.3]}}
    tasks = [SimpleNamespace(id=name, part=name.split(":")[0]) for name in results]
    shown_figures.attach(tasks, results, found, parts)
    first, second = results[f"{shown[0]}:bench:0"].outcome, results[f"{shown[0]}:bench:1"].outcome
    assert first.shown.event_ms == [0.25, 0.3] and not first.shown_error
    assert second.shown is None and "could not be measured" in second.shown_error
    assert results[f"{plain}:bench:0"].outcome.shown is forged, "a part without a shown baseline changed"
    assert isinstance(results[f"{shown[-1]}:bench:0"].outcome, Failure)


def test_figures_are_measured_once_kept_and_read_by_the_next_grading(tmp_path, monkeypatch):
    """The first grading that needs them measures them (here a stand-in for the child) and keeps
    them; the next reads them; figures that could not be measured are not kept."""
    (gelu,) = load_assignments(["gelu"])
    monkeypatch.setattr(shown_figures, "ROOT", tmp_path / "shown")
    monkeypatch.setattr(shown_figures.torch.cuda, "get_device_name", lambda index=0: "NVIDIA H200")
    grading = SimpleNamespace(assignment=gelu)
    parts = [part for part in gelu.parts if part.shown]
    measured, lost = [], []

    def measure(graded):
        measured.append(graded)
        if lost:
            raise shown_figures.Unmeasured("the child died")
        return {shown_figures.shown_task(part, i).id: {"event_ms": [0.5 + i]}
                for part in parts for i in range(len(part.benchmarks))}  # fmt: skip

    monkeypatch.setattr(shown_figures, "_measure", measure)
    lost.append(True)
    assert shown_figures.figures(grading, gelu.parts) == {} and not list((tmp_path / "shown").glob("*.json"))
    lost.clear()
    first = shown_figures.figures(grading, gelu.parts)
    second = shown_figures.figures(grading, gelu.parts)
    assert len(measured) == 2 and first == second
    assert first[f"{parts[0].name}:bench:1"] == {"event_ms": [1.5]}
    assert len(list((tmp_path / "shown").glob("gelu-NVIDIA_H200-*.json"))) == 1


@pytest.mark.gpu
@requires_gpu
def test_on_a_gpu_the_shown_figures_are_timed_once_and_shown_in_every_report(tmp_path, monkeypatch):
    monkeypatch.setattr(shown_figures, "ROOT", tmp_path / "shown")
    measured, real = [], shown_figures._measure
    monkeypatch.setattr(shown_figures, "_measure", lambda grading: measured.append(1) or real(grading))
    graded = [grade(REPO_ROOT / "solutions", ["gelu"], device="cuda") for _ in range(2)]
    assert measured == [1], "the second grading timed the shown baselines again"
    shown = [{t.name: t.metrics.get("shown") for t in result.tests if t.kind == "performance"} for result in graded]
    with_one = {name for name, figure in shown[0].items() if figure}
    assert with_one and all("ms" in shown[0][name] and shown[0][name]["ms"] > 0 for name in with_one), shown[0]
    assert all(shown[1][name]["ms"] == shown[0][name]["ms"] for name in with_one), "the machine's figure changed"
    timed_shown = [re.search(r"\bshown \d", result.environment["phases"]) for result in graded]
    assert timed_shown[0] and not timed_shown[1], [result.environment["phases"] for result in graded]


def test_the_shown_child_compiles_in_caches_no_student_child_wrote(tmp_path, monkeypatch):
    """The grading's compilers' cache is written by the student's children: the child that times
    the course's baselines for the whole machine gets new, empty caches of its own, and a task for
    every benchmark of every part that shows a baseline, each in a phase of its own ("shown")."""
    from contextlib import nullcontext

    (gelu,) = load_assignments(["gelu"])
    planted = tmp_path / "compiled"
    (planted / "torchinductor").mkdir(parents=True)
    (planted / "torchinductor" / "planted.py").write_text("raise SystemExit")
    grading = SimpleNamespace(assignment=gelu, job=None, workdir=tmp_path, view=None, phases={}, compiled=planted,
                              gpu=lambda phase: nullcontext(None))  # fmt: skip
    seen = {}

    def run_tasks(job, tasks, workdir, view, budget, phases, phase, gate, compiled):
        seen.update(tasks=tasks, phase=phase, compiled=compiled, contents=list(compiled.iterdir()))
        return {task.id: TaskResult(_bench(Timings([0.4]))) for task in tasks}

    monkeypatch.setattr(shown_figures, "run_tasks", run_tasks)
    measured = shown_figures._measure(grading)
    assert seen["compiled"] != planted and seen["compiled"].parent == tmp_path and seen["contents"] == []
    wanted = {(part.name, i) for part in gelu.parts if part.shown for i in range(len(part.benchmarks))}
    assert {(t.part, t.index) for t in seen["tasks"]} == wanted and {t.kind for t in seen["tasks"]} == {"shown"}
    assert seen["phase"] == "shown" and all(figure == {"event_ms": [0.4]} for figure in measured.values())
