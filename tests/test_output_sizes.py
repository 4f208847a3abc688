"""Each case's output size, kept once worked out: the same sizes, without torch's compiler modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from grader.assignment import cases, output_sizes
from grader.assignment.loading import assignment_names, load_assignments
from grader.assignment.spec import REPO_ROOT

# A grading process's sizing, as grading.AssignmentGrading.task does it, in a fresh interpreter:
# prints whether torch's compiler modules were imported, and the sizes of vector_add's cases.
SIZING = """
import sys
from grader.assignment import output_sizes
from grader.assignment.loading import load_assignments
(assignment,) = load_assignments(["vector_add"])
sizes = [output_sizes.output_bytes(assignment, part, case) for part in assignment.parts for case in part.cases]
print("torch._dynamo" in sys.modules, sizes)
"""


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """An empty folder of kept sizes, and a process that has kept none yet."""
    monkeypatch.setattr(output_sizes, "ROOT", tmp_path / "output-sizes")
    monkeypatch.setattr(output_sizes, "_known", {})
    return tmp_path / "output-sizes"


def _sizing_process(cache_home) -> tuple[bool, list[int]]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home)}
    out = subprocess.run([sys.executable, "-c", SIZING], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                         check=True).stdout.split(" ", 1)  # fmt: skip
    return out[0] == "True", json.loads(out[1])


def test_kept_sizes_are_the_sizes_of_every_case_of_every_assignment(kept):
    for assignment in load_assignments(assignment_names()):
        for part in assignment.parts:
            for case in (*part.cases, *part.benchmarks):
                assert output_sizes.output_bytes(assignment, part, case) == cases.output_bytes(assignment, part, case)
    assert len(list(kept.glob("*.json"))) == len(assignment_names()), "one file per assignment"


def test_a_second_process_reads_them_without_torchs_compiler_modules(tmp_path):
    first_imported, first = _sizing_process(tmp_path)
    second_imported, second = _sizing_process(tmp_path)
    assert first_imported, "the first process worked the sizes out on the meta device"
    assert not second_imported and second == first, "the second did not read what the first kept"
    assert first[:2] == [4, 97 * 2]  # float32 1, float16 97


def test_a_file_that_is_not_what_the_grader_wrote_is_worked_out_again(kept):
    (vector_add,) = load_assignments(["vector_add"])
    part, case = vector_add.parts[0], vector_add.parts[0].cases[2]
    right = output_sizes.output_bytes(vector_add, part, case)
    (path,) = kept.glob("vector_add-*.json")
    for forged in ({output_sizes.case_name(part, case): -1}, {output_sizes.case_name(part, case): "1"}, ["x"]):
        path.write_text(json.dumps(forged))
        output_sizes._known.clear()
        assert output_sizes.output_bytes(vector_add, part, case) == right
    assert json.loads(path.read_text())[output_sizes.case_name(part, case)] == right, "the file was not written again"


def test_a_folder_that_cannot_be_made_costs_only_the_time_to_work_them_out(tmp_path, monkeypatch):
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setattr(output_sizes, "ROOT", blocker / "output-sizes")  # under a file: no folder, even for root
    monkeypatch.setattr(output_sizes, "_known", {})
    (vector_add,) = load_assignments(["vector_add"])
    part = vector_add.parts[0]
    assert [output_sizes.output_bytes(vector_add, part, c) for c in part.cases[:2]] == [4, 97 * 2]
