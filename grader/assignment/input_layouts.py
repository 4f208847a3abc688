"""The layout of every call's inputs that a precompile pass's recording child makes, worked out
once per machine and kept.

A recording child (child/precompile.py) calls each Triton part with zeros laid out as each case's
inputs. It found that layout by running the assignment's input code on torch's "meta" device,
whose first random draw there (torch.rand) goes through a Python decomposition that imports
torch's compiler modules: about 6 s of the 8.8 s a recording of the Softmax solution took on the
2-core machine, and as much in every pass on a GPU machine. The layouts depend only on what the
output sizes depend on (output_sizes.depends_on), so they are worked out as those are, kept in a
file beside them (kept.py), and handed to the child in its job (Job.layouts): it makes its zeros
from them. A part whose inputs hold a value no Input carries gets no layouts, and its child works
them out as before; a file that does not hold what this module writes is worked out again.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from grader.assignment import cases
from grader.assignment.output_sizes import ROOT, case_name, depends_on
from grader.assignment.spec import Assignment
from grader.messages.job import Input
from grader.messages.specializations import written
from grader.running.kept import kept

FOLDER = ROOT.parent / "input-layouts"
MAX_DIMS = 8
MAX_EXTENT = 1 << 34  # elements of one input's storage: far beyond any course's benchmark


def layouts(assignment: Assignment, tier: str) -> dict[str, list[list[Input]]]:
    """Per part that launches on `tier`, the inputs of each of its calls there, in
    cases.launched_on's order; a part any of whose calls cannot be laid out is left out."""
    path = FOLDER / f"{assignment.name}-{depends_on(assignment)}.json"
    found = kept(path, assignment.name, _read, lambda: _work_out(assignment), lambda v: json.dumps(_plain(v)))
    given = {}
    for part in assignment.parts:
        calls = [found.get(case_name(part, case)) for case in cases.launched_on(part, tier)]
        if calls and all(call is not None for call in calls):
            given[part.name] = calls
    return given


def _work_out(assignment: Assignment) -> dict[str, list[Input]]:
    found = {}
    for part in assignment.parts:
        for case in (*part.cases, *part.benchmarks):
            inputs = _described(cases.shaped_inputs(assignment, part, case))
            if inputs is not None:
                found[case_name(part, case)] = inputs
    return found


def _described(values: dict[str, object]) -> list[Input] | None:
    """The inputs as Inputs; None where a value is of a kind none carries."""
    inputs = []
    for name, value in values.items():
        if isinstance(value, torch.Tensor):
            inputs.append(Input(name, "tensor", "", list(value.shape), list(value.stride()), value.storage_offset(),
                                str(value.dtype).removeprefix("torch."), value.requires_grad))  # fmt: skip
            continue
        plain = written(value)
        if plain is None or plain[0] == "dtype":
            return None
        inputs.append(Input(name, *plain))
    return inputs


def _plain(found: dict[str, list[Input]]) -> dict:
    return {key: [vars(given) for given in inputs] for key, inputs in found.items()}


def _read(path: Path) -> dict[str, list[Input]] | None:
    """The kept layouts; None where there are none, or where the file is not what this module writes."""
    try:
        data = json.loads(path.read_text())
        found = {str(key): [Input(**given) for given in inputs] for key, inputs in data.items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    return found if all(_well_formed(given) for inputs in found.values() for given in inputs) else None


def _well_formed(given: Input) -> bool:
    if given.kind != "tensor":
        return given.kind in ("int", "float", "bool", "str", "none") and isinstance(given.text, str)
    dims = (given.shape, given.stride)
    if not all(isinstance(d, list) and len(d) <= MAX_DIMS and all(type(n) is int and n >= 0 for n in d) for d in dims):
        return False
    return (len(given.shape) == len(given.stride) and type(given.offset) is int and 0 <= given.offset
            and cases.storage_extent(given.shape, given.stride, given.offset) <= MAX_EXTENT
            and isinstance(getattr(torch, str(given.dtype), None), torch.dtype)
            and type(given.grad) is bool)  # fmt: skip
