"""What loading assignment.toml cannot check of an assignment's definition: what reference.py's
functions return, and the handout beside them. `make test` lints every assignment
(tests/test_spec.py); each problem is one sentence that names the fix.

- `README.md`, the student's handout, is there and has its "How it is graded" section;
- `<part>_inputs` returns a dict of keyword arguments: tensors, or plain values (a bool, an int
  or a float) that reach the entry point, the reference and the baseline as they are;
- `<part>_traffic` returns exactly `{"bytes": ..., "flops": ...}`, two numbers: a misspelt key
  would read as 0 on the GPU tier, whose rates and roofline it makes, and go unseen on the CPU tier.

The functions run on torch's "meta" device, which carries shapes and no data: every case and
benchmark is checked in milliseconds, the largest included.
"""

from __future__ import annotations

from pathlib import Path

import torch

from grader.assignment import cases
from grader.assignment.loading import load_assignment
from grader.assignment.spec import REPO_ROOT, Part
from grader.assignment.toml_table import SpecError

HANDOUT_SECTION = "How it is graded"
TRAFFIC_KEYS = ("bytes", "flops")
PLAIN = (bool, int, float)  # what an input may be besides a tensor


def lint(directory: Path) -> list[str]:
    """Every problem of the assignment in `directory`, each naming its fix; [] when there is none."""
    problems = handout(directory)
    try:
        assignment = load_assignment(directory)
    except SpecError as error:
        return problems + [str(error)]
    for part in assignment.parts:
        where = f"{_shown(directory / 'reference.py')}, part {part.name}"
        seen = set()
        for case in part.cases + part.benchmarks:
            if (case.shape, case.dtype, case.layout) in seen:
                continue
            seen.add((case.shape, case.dtype, case.layout))
            found = _case(assignment, part, case, f"{where}, case \"{case.dtype} {case.label}\"")
            if found:  # one case tells what is wrong with a function
                problems.append(found)
                break
    return problems


def _shown(path: Path) -> str:
    """A path as a reader of the repository names it."""
    try:
        return path.relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(path)


def handout(directory: Path) -> list[str]:
    """The handout's problems: none where README.md is there with its section on grading."""
    readme = directory / "README.md"
    if not readme.is_file():
        return [f"{_shown(readme)} is missing: write the student's handout there, with a section "
                f"\"{HANDOUT_SECTION}\" (docs/adding-an-assignment.md)"]  # fmt: skip
    if HANDOUT_SECTION not in readme.read_text(errors="replace"):
        return [f"{_shown(readme)} has no section \"{HANDOUT_SECTION}\": add one that says what earns the points"]
    return []


def _case(assignment, part: Part, case, where: str) -> str | None:
    """The first problem of the part's functions on one case's shapes, or None."""
    dtype = cases.DTYPES[case.dtype]
    try:
        with torch.device("meta"):
            inputs = cases.function(assignment, part.inputs)(tuple(case.shape), dtype, case.layout,
                                                             torch.Generator(), "meta")  # fmt: skip
    except Exception as error:  # reference.py is the course's code: any error is a problem to name
        return f"{where}: {part.inputs}() raised {type(error).__name__}: {error}"
    if problem := _inputs_problem(part, inputs):
        return f"{where}: {problem}"
    try:
        with torch.device("meta"):
            traffic = cases.function(assignment, part.traffic)(**inputs)
    except Exception as error:
        return f"{where}: {part.traffic}() raised {type(error).__name__}: {error}"
    if problem := _traffic_problem(part, traffic):
        return f"{where}: {problem}"
    return None


def _inputs_problem(part: Part, inputs: object) -> str | None:
    if not isinstance(inputs, dict) or not all(isinstance(name, str) for name in inputs):
        return (f"{part.inputs}() returns {type(inputs).__name__}: return a dict of the entry point's keyword "
                "arguments, by name")  # fmt: skip
    for name, value in inputs.items():
        if not isinstance(value, (torch.Tensor, *PLAIN)):
            return (f"{part.inputs}() returns '{name}' as {type(value).__name__}: return a tensor (drawn from "
                    "`generator` on `device`) or a bool, int or float, which the entry point and the reference "
                    "receive as they are")  # fmt: skip
    return None


def _traffic_problem(part: Part, traffic: object) -> str | None:
    keys = sorted(traffic) if isinstance(traffic, dict) else None
    wanted = "{" + ", ".join(f'"{key}": ...' for key in TRAFFIC_KEYS) + "}"
    if keys != sorted(TRAFFIC_KEYS):
        got = f"the keys {keys}" if keys is not None else type(traffic).__name__
        return (f"{part.traffic}() returns {got}: return exactly {wanted}, the fewest bytes the call must move "
                "and the FLOPs it must do (the GPU tier's rates and roofline read them by these names)")  # fmt: skip
    for key in TRAFFIC_KEYS:
        value = traffic[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            return (f"{part.traffic}() returns \"{key}\" as {value!r}: make it a number of at least 0 (an int or "
                    "a float: .numel() and .element_size() give ints, a tensor is not a number here)")  # fmt: skip
    return None
