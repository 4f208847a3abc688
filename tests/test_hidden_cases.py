"""Cases hidden until the deadline keep their inputs from everything a student reads before it.

Issue 53, 3: hidden and visible cases ran in one child, so a submission could record a hidden
case's inputs and raise them in the next visible case's error: the hidden case's dtype and length
appeared in report.html, in a `visible` Gradescope test and on the terminal. The submission here
does exactly that: the solution's Triton sum, whose every call after its process's first raises the list
of every input (dtype and length) that process has seen, with when the process started and the time.

vector_add's CPU-tier cases are graded with some marked hidden (as a course marks them in
assignment.toml; the child needs no telling, the parent runs them apart: grader/running/hidden_runs.py).
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from conftest import requires_gpu
from grader.assignment.loading import load_assignment
from grader.assignment.spec import REPO_ROOT
from grader.grading import Settings, grade_submission
from grader.reporting import report, terminal
from grader.reporting.results_json import gradescope

# Appended to the solution's vector_add.py: its `add` wrapped.
RECORDER = """

import time

SEEN = []
PROCESS = f"{time.time_ns()}"  # a process's pid is 2 in every sandbox: when it imported this file names it
solution_add = add


def add(x, y):
    SEEN.append(f"<{x.dtype}:{x.numel()}>")
    out = solution_add(x, y)
    if len(SEEN) > 1:
        raise RuntimeError(f"process {PROCESS} at {time.time():.6f} saw {' '.join(SEEN)}")
    return out
"""
ASSIGNMENT = load_assignment(REPO_ROOT / "assignments" / "vector_add")
CPU_CASES = [i for i, case in enumerate(ASSIGNMENT.parts[0].cases) if case.runs_on("cpu")]
GPU_CASES = [i for i, case in enumerate(ASSIGNMENT.parts[0].cases) if case.runs_on("cuda")]


def with_hidden(indices: set[int]):
    part = ASSIGNMENT.parts[0]
    cases = tuple(dataclasses.replace(c, hidden=i in indices) for i, c in enumerate(part.cases))
    return dataclasses.replace(ASSIGNMENT, parts=(dataclasses.replace(part, cases=cases),))


def signature(case) -> str:
    dtype, length = case.dtype, 1
    for size in case.shape:
        length *= size
    return f"<torch.{dtype}:{length}>"


def visible_outputs(grade) -> dict[str, str]:
    """Everything a student reads before the deadline: the HTML report, the terminal, and
    Gradescope's top-level output and every `visible` test."""
    console = io.StringIO()
    terminal.print_table(grade, Console(file=console, width=400))
    shown = gradescope(grade)
    tests = [t for t in shown["tests"] if t["visibility"] == "visible"]
    return {"report.html": report.render_html(grade), "terminal": console.getvalue(), "output": shown["output"],
            "visible tests": json.dumps([(t["name"], t["output"]) for t in tests], ensure_ascii=False)}  # fmt: skip


def grade_recorder(tmp_path: Path, hidden: set[int], arrange=None, device: str = "cpu"):
    (tmp_path / "sub" / "vector_add").mkdir(parents=True)
    solution = (REPO_ROOT / "solutions" / "vector_add" / "vector_add.py").read_text()
    (tmp_path / "sub" / "vector_add" / "vector_add.py").write_text(solution + RECORDER)
    assignment = with_hidden(hidden)
    grade = grade_submission(tmp_path / "sub", [assignment], Settings(device=device, arrange=arrange))
    secrets = [signature(assignment.parts[0].cases[i]) for i in sorted(hidden)]
    return grade, secrets


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, requires_gpu])])
def test_hidden_cases_run_in_a_child_of_their_own_after_every_visible_one(tmp_path, device):
    """On the GPU tier too, where the timing child and the precompile pass run beside them."""
    listed = CPU_CASES if device == "cpu" else GPU_CASES
    hidden = {listed[1], listed[3]}  # interleaved: visible, hidden, visible, hidden
    grade, secrets = grade_recorder(tmp_path, hidden, device=device)
    calls = {}
    for test in (t for t in grade.tests if t.kind == "correctness"):  # the timing child's are its own
        if found := re.search(r"process (\d+) at ([\d.]+) saw (.*)", test.output):
            calls[test.name] = (test.hidden, int(found[1]), float(found[2]), found[3])
    visible = [c for c in calls.values() if not c[0]]
    secret = [c for c in calls.values() if c[0]]
    assert visible and secret, calls
    assert len({c[1] for c in visible}) == 1 and len({c[1] for c in secret}) == 1  # one child each
    assert {c[1] for c in visible}.isdisjoint(c[1] for c in secret)
    assert max(c[2] for c in visible) < min(c[2] for c in secret)  # after every visible case
    assert all(s not in c[3] for c in visible for s in secrets)  # the visible child never saw them
    assert any(secrets[-1] in c[3] for c in secret)  # the recorder works: the hidden child's own calls show
    for where, text in visible_outputs(grade).items():
        assert not any(s in text for s in secrets), where


@pytest.mark.parametrize("order", ["as listed", "hidden first"])
def test_no_hidden_input_reaches_any_visible_output_whatever_the_order(tmp_path, order):
    """The general form: whichever cases are hidden and in whatever order the tasks are handed out,
    no hidden case's inputs reach what a student reads before the deadline."""
    hidden = {CPU_CASES[0], CPU_CASES[2]}  # as listed: hidden, visible, hidden, visible

    def arrange(tasks):
        if order == "as listed":
            return tasks
        return [t for t in tasks if t.index in hidden] + [t for t in tasks if t.index not in hidden]

    grade, secrets = grade_recorder(tmp_path, hidden, arrange)
    for where, text in visible_outputs(grade).items():
        assert not any(s in text for s in secrets), (where, secrets)
    staff = json.dumps([t["output"] for t in gradescope(grade)["tests"] if t["visibility"] == "after_due_date"])
    assert secrets[-1] in staff  # shown whole after the deadline, and to the staff in results.json
