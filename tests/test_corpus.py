"""One stack, one verdict (issue 16): public kernels nobody here wrote, each wrapped only to match an
entry point, must get on each tier the verdict written down for it, and the CPU tier must predict
the GPU tier wherever physics allows.

Each folder under tests/corpus/<id>/ holds the submission tree (<assignment>/<file>), SOURCE.md
(where the kernel comes from and what the wrapper changed), the upstream LICENSE, and expect.toml:

    assignment = "softmax"
    parts = ["softmax"]                 # the parts the kernel implements; the others are not graded
    [cpu]
    reason = "ok"                       # the verdict most cases get on this tier
    cases = { "4:float32 3x70000" = "compile_error" }   # the others, by "<index>:<label>"
    [gpu]
    predicted = true                    # until a GPU run replaces the prediction with what it measured
    reason = "ok"
    cases = { ... }
    [differs]                           # cases where the tiers may disagree, and the physical reason
    "4:float32 3x70000" = "..."

A case is named by its index among its part's cases in assignment.toml and its label (dtype, shape,
", strided rows"), e.g. "13:float32 1024x100000"; "<part>/<index>:<label>" names it in one part
only, where an entry implements several. `build` in a tier's table is the verdict of loading the
file (default "ok"), or a table of them by part. On the CPU tier a CUDA part's cases show as `no_gpu` (the file is only
compiled), so its [cpu] reason is "no_gpu".
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from conftest import TESTS, grade, requires_gpu
from grader.reporting.results import REASONS
from grader.assignment.loading import load_assignments

CORPUS = TESTS / "corpus"
ENTRIES = sorted(path.parent for path in CORPUS.glob("*/expect.toml"))


def expectation(folder: Path) -> dict:
    return tomllib.loads((folder / "expect.toml").read_text())


def graded_parts(expect: dict) -> list:
    [assignment] = load_assignments([expect["assignment"]])
    return [part for part in assignment.parts if part.name in expect["parts"]]


def case_names(part) -> list[str]:
    return [f"{index}:{case.label}" for index, case in enumerate(part.cases)]


def expected(expect: dict, tier: str, part: str, case: str) -> str:
    table = expect[tier]
    cases = table.get("cases", {})
    return cases.get(f"{part}/{case}", cases.get(case, table["reason"]))


def build_verdict(expect: dict, tier: str, part: str) -> str:
    build = expect[tier].get("build", "ok")
    return build.get(part, "ok") if isinstance(build, dict) else build


def verdicts(folder: Path, device: str) -> dict[str, tuple[str, str]]:
    """Every case (and load) of the entry's parts graded on `device`: name -> (reason, message)."""
    expect = expectation(folder)
    result = grade(folder, [expect["assignment"]], device=device, parts=expect["parts"])
    parts = {part.name: part for part in graded_parts(expect)}
    found = {}
    for test in result.tests:
        if test.kind == "build":
            found[f"{test.part}: load"] = (test.reason, test.output)
        elif test.kind == "correctness":
            label = test.name.split(": ", 1)[1]
            [case] = [name for name in case_names(parts[test.part]) if name.split(":", 1)[1] == label]
            found[f"{test.part}/{case}"] = (test.reason, test.output)
        # speed is not what the corpus is about
    if os.environ.get("CORPUS_RESULTS"):  # kept for tools/corpus_table.py, which tabulates both tiers
        path = Path(os.environ["CORPUS_RESULTS"]) / f"{'gpu' if device == 'cuda' else 'cpu'}-{folder.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({name: reason for name, (reason, _) in found.items()}, indent=1))
    return found


def mismatches(folder: Path, tier: str, device: str) -> list[str]:
    """Every case (and load) of the entry's parts whose verdict on `device` is not the expected one."""
    expect = expectation(folder)
    wrong = []
    for name, (reason, output) in verdicts(folder, device).items():
        if name.endswith(": load"):
            want = build_verdict(expect, tier, name.removesuffix(": load"))
        else:
            part, case = name.split("/", 1)
            want = expected(expect, tier, part, case)
        if reason != want:
            wrong.append(f"{name}: expected {want}, got {reason}: {output[:400]}")
    return wrong


def _entries() -> list:
    return [pytest.param(folder, id=folder.name) for folder in ENTRIES]


def test_the_corpus_has_a_dozen_entries_each_with_its_source_and_licence():
    assert len(ENTRIES) >= 12, f"issue 16 asks for at least 12 public kernels, the corpus has {len(ENTRIES)}"
    for folder in ENTRIES:
        assert (folder / "SOURCE.md").is_file(), f"{folder.name}: SOURCE.md says where the kernel comes from"
        licence = folder / "LICENSE"
        assert licence.is_file() and licence.read_text().strip(), f"{folder.name}: the upstream LICENSE, verbatim"


@pytest.mark.parametrize("folder", _entries())
def test_expectations_name_real_parts_cases_and_reasons(folder):
    """A typo in expect.toml would silently test nothing: every part, case and reason must exist."""
    expect = expectation(folder)
    parts = graded_parts(expect)
    assert sorted(p.name for p in parts) == sorted(expect["parts"]), \
        f"{folder.name}: parts {expect['parts']} are not all parts of {expect['assignment']}"  # fmt: skip
    for part in parts:
        assert (folder / expect["assignment"] / part.file).is_file(), f"{folder.name}: no {part.file}"
    known = {name for part in parts for name in case_names(part)}
    known |= {f"{part.name}/{name}" for part in parts for name in case_names(part)}
    for tier in ("cpu", "gpu"):
        table = expect[tier]
        builds = [build_verdict(expect, tier, part.name) for part in parts]
        reasons = [table["reason"], *builds, *table.get("cases", {}).values()]
        assert set(reasons) <= set(REASONS), f"{folder.name} [{tier}]: unknown reason in {reasons}"
        assert set(table.get("cases", {})) <= known, f"{folder.name} [{tier}]: {set(table['cases']) - known}"
    assert set(expect.get("differs", {})) <= known, f"{folder.name} [differs]: {set(expect['differs']) - known}"


@pytest.mark.parametrize("folder", _entries())
def test_expectations_of_the_two_tiers_agree_unless_physics_differs(folder):
    """The issue's rule: on a case that both tiers grade, the CPU tier's verdict is the GPU's, unless
    [differs] says why it cannot be (bfloat16 dots the interpreter gets wrong, races it hides...)."""
    expect = expectation(folder)
    differs = expect.get("differs", {})
    disagree = []
    for part in graded_parts(expect):
        for name, case in zip(case_names(part), part.cases):
            if case.tier != "both" or name in differs or f"{part.name}/{name}" in differs:
                continue
            cpu, gpu = expected(expect, "cpu", part.name, name), expected(expect, "gpu", part.name, name)
            if cpu != gpu:
                disagree.append(f"{part.name}/{name}: CPU tier {cpu}, GPU tier {gpu}")
    assert not disagree, (f"{folder.name}: the tiers disagree where the GPU's verdict is predictable:\n"
                          + "\n".join(disagree))


@pytest.mark.slow  # a kernel's whole grading on the CPU tier, up to minutes each: `make test-slow`
@pytest.mark.parametrize("folder", _entries())
def test_cpu_tier_gives_each_case_its_verdict(folder):
    wrong = mismatches(folder, "cpu", "cpu")
    assert not wrong, f"{folder.name} on the CPU tier:\n" + "\n".join(wrong)


@pytest.mark.gpu
@requires_gpu
@pytest.mark.parametrize("folder", _entries())
def test_gpu_tier_gives_each_case_its_verdict(folder):
    wrong = mismatches(folder, "gpu", "cuda")
    predicted = expectation(folder)["gpu"].get("predicted", False)
    note = " ([gpu] is still a prediction: replace it with what this run measured)" if predicted else ""
    assert not wrong, f"{folder.name} on the GPU tier{note}:\n" + "\n".join(wrong)
