"""The layouts of a recording child's inputs, worked out by the parent and kept
(grader/assignment/input_layouts.py): the very zeros the child made itself, without torch's
compiler modules in the child, and a kept file that is not what the grader wrote is not used."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.assignment import cases, input_layouts
from grader.assignment.loading import assignment_names, load_assignments
from grader.assignment.spec import REPO_ROOT
from grader.child.precompile import laid_out
from grader.grading import AssignmentGrading, Settings
from grader.messages import decoding
from grader.messages.job import Input, Job
from grader.messages.specializations import identity
from grader.running import precompile

# A recording child's making of its inputs, in a fresh interpreter: from the layouts given on the
# standard input, or (none given) on torch's meta device as before; prints whether torch's compiler
# modules were imported.
MAKING = """
import json, sys
from grader.assignment import cases
from grader.assignment.loading import load_assignments
from grader.child.precompile import laid_out
from grader.messages.job import Input
(softmax,) = load_assignments(["softmax"])
part = softmax.parts[0]
given = json.loads(sys.stdin.read())
for index, case in enumerate(cases.launched_on(part, "cuda")):
    if given:
        laid_out([Input(**i) for i in given[index]])
    else:
        cases.zeros_shaped_as(softmax, part, case)
print("torch._dynamo" in sys.modules)
"""


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(input_layouts, "FOLDER", tmp_path / "input-layouts")
    return tmp_path / "input-layouts"


def _same(made: dict, shaped: dict) -> None:
    assert list(made) == list(shaped)
    for name, value in shaped.items():
        if isinstance(value, cases.torch.Tensor):
            got = made[name]
            assert (got.shape, got.stride(), got.storage_offset(), got.dtype, got.requires_grad) == \
                (value.shape, value.stride(), value.storage_offset(), value.dtype, value.requires_grad), name
            assert not got.any(), "zeros"
        else:
            assert made[name] == value and type(made[name]) is type(value), name


@pytest.mark.parametrize("tier", ["cpu", "cuda"])
def test_every_call_of_every_assignment_gets_the_zeros_it_got_before(folder, tier):
    for assignment in load_assignments(assignment_names()):
        given = input_layouts.layouts(assignment, tier)
        for part in assignment.parts:
            launched = cases.launched_on(part, tier)
            assert len(given.get(part.name, [])) == len(launched), (assignment.name, part.name)
            for index, case in enumerate(launched):
                _same(laid_out(given[part.name][index]), cases.zeros_shaped_as(assignment, part, case))
    assert len(list(folder.glob("*.json"))) == len(assignment_names()), "one kept file per assignment"


def test_the_child_makes_them_without_torchs_compiler_modules(folder):
    (softmax,) = load_assignments(["softmax"])
    given = [[vars(i) for i in inputs] for inputs in input_layouts.layouts(softmax, "cuda")["softmax"]]

    def imported(layouts) -> bool:
        done = subprocess.run([sys.executable, "-c", MAKING], cwd=REPO_ROOT, input=json.dumps(layouts),
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip() == "True"

    assert imported([]), "on the meta device, torch.rand imports them: the seconds this saves"
    assert not imported(given)


def test_layouts_travel_in_the_job_as_they_were():
    inputs = [Input("x", "tensor", "", [4, 3], [40, 1], 5, "bfloat16", True), Input("causal", "bool", "True")]
    job = Job("a", "s", "cpu", 3, "00", [], layouts={"forward": [inputs]})
    assert decoding.read_job(decoding.job_json(job)).layouts == {"forward": [inputs]}


@pytest.mark.parametrize("forged", [
    {"x": [{"name": "x", "kind": "tensor", "shape": [-1], "stride": [1], "dtype": "float32"}]},
    {"x": [{"name": "x", "kind": "tensor", "shape": [1 << 20, 1 << 20], "stride": [1 << 20, 1], "dtype": "float32"}]},
    {"x": [{"name": "x", "kind": "tensor", "shape": [4], "stride": [1], "dtype": "Tensor"}]},
    {"x": [{"name": "x", "kind": "eval", "text": "1"}]},
    {"x": [{"name": "x", "kind": "tensor", "shape": [4], "stride": [1], "dtype": "float32", "extra": 1}]},
    ["x"],
])  # fmt: skip
def test_a_kept_file_that_is_not_what_the_grader_wrote_is_worked_out_again(folder, forged):
    (vector_add,) = load_assignments(["vector_add"])
    right = input_layouts.layouts(vector_add, "cuda")
    (path,) = folder.glob("vector_add-*.json")
    path.write_text(json.dumps(forged))
    assert input_layouts.layouts(vector_add, "cuda") == right
    assert "extra" not in path.read_text() and json.loads(path.read_text()) != forged, "written again"


def test_the_recording_child_records_the_same_kernels_from_the_layouts(folder):
    """The pass's recording over the solution of softmax on the GPU tier's shapes: with the
    layouts in its job, and with none (the child works them out), the same specializations."""
    (softmax,) = load_assignments(["softmax"])
    found = []
    for given in (True, False):
        grading = AssignmentGrading(softmax, REPO_ROOT / "solutions", Settings(device="cpu", precompile=0))
        ahead = precompile.Precompile(grading.job, softmax, "cuda", grading.workdir, grading.view, grading.compiled,
                                      300.0, 2)  # fmt: skip
        if not given:
            ahead.job = dataclasses.replace(ahead.job, layouts={})
            ahead.record = _without_layouts(ahead)
        # Each grading has a folder of its own: the kernels' file is named by its name alone.
        found.append(sorted(repr(identity(dataclasses.replace(spec, file=Path(spec.file).name)))
                            for spec in sum(ahead.record(), [])))  # fmt: skip
        assert bool(ahead.job.layouts) is given
    assert found[0] == found[1] and len(found[0]) >= 10


def _without_layouts(ahead: precompile.Precompile):
    """The pass's record, its job's layouts left empty (a part the parent could not lay out)."""
    def record():
        real = input_layouts.layouts
        input_layouts.layouts = lambda *a: {}
        try:
            return precompile.Precompile.record(ahead)
        finally:
            input_layouts.layouts = real

    return record
