"""Known-wrong submissions, one classic bug each, lose points for their own reason.

Each folder under tests/submissions/<assignment>/<bug>/ is a submission tree plus an
expect.toml naming the reason the bug must earn, or an expect.toml alone whose `edits` turn the
solution into the bug (conftest.known_wrong), and optionally `timeout_s` (a shorter limit),
`gpu_reason` (where the GPU tier names it differently; a list where its cases earn several, each
earned and no other), `tier = "gpu"` (a bug only a GPU shows:
slow or timing-hostile code) or `tier = "cpu"` (a bug only in cases the CPU tier alone grades: on
the GPU every case must pass), `parts` (the parts the bug is in, when the submission holds only
their files, or is only about them; the other parts are then not graded), `output` (what the
first failing case's message must say: regular expressions) and `passes` (cases the bug leaves
right, as "part: label": they must pass, though a failing case was graded before them in the same
process; on the GPU tier, those of them it grades). Every failing test of
those parts must carry that reason, and at least one must fail; a hang (`timeout`) costs at most
its `timeout_s` plus 5 s. tests/test_gpu.py runs the same folders on
the GPU tier. The hostile vector_add folders that test_hostile_batch.py grades in its batch get this
check there, on that grading (conftest.hostile_batch_expectations, `make test-slow`); they are
graded here where the batch cannot run. `make test` grades one folder of each reason of each
assignment (conftest.one_of_each_reason), `make test-slow` the others. A bug written as edits starts from a copy of the kernels that the
solution's own grading compiled (conftest.Solutions): only the kernels its edit changed compile
again, and the verdicts are those of a grading from scratch.
"""

from __future__ import annotations

import re
import shutil
import time
import tomllib

import pytest

from conftest import (HOSTILE_BATCH_RUNS, SUBMISSIONS, grade, hostile_batch_expectations, known_wrong,
                      one_of_each_reason)
from grader.running import compile_cache
from grader.kernels import cuda_build
from grader.judging import reasons
from grader.assignment.spec import REPO_ROOT


def expectations() -> list[tuple]:
    found = sorted(SUBMISSIONS.glob("*/*/expect.toml"))
    return [(path.parent, tomllib.loads(path.read_text())) for path in found]


def gpu_reasons(expect: dict) -> set[str]:
    """What a folder earns on the GPU tier: its `gpu_reason` (one, or a list: each earned, and no
    other), else its `reason`."""
    given = expect.get("gpu_reason", expect["reason"])
    return set(given) if isinstance(given, list) else {given}


def in_scope(result, expect: dict) -> list:
    """The tests of the parts the bug is in (every part, unless expect.toml names some)."""
    parts = expect.get("parts")
    return [t for t in result.tests if parts is None or t.part in parts]


def _submissions() -> list:
    """Every CPU-tier folder but those the hostile batch checks (where it runs); of each assignment,
    one folder of each reason in `make test`, the others marked `slow` (`make test-slow`)."""
    batched = {SUBMISSIONS / "vector_add" / name for name in hostile_batch_expectations()} if HOSTILE_BATCH_RUNS else set()
    sample = one_of_each_reason()
    return [
        pytest.param(folder, id=f"{folder.parent.name}/{folder.name}",
                     marks=() if folder in sample else pytest.mark.slow)  # fmt: skip
        for folder, expect in expectations()
        if expect.get("tier", "both") != "gpu" and (folder in sample or folder not in batched)
    ]


@pytest.mark.parametrize("folder", _submissions())
def test_bug_earns_its_reason(folder, tmp_path, solutions):
    expect = tomllib.loads((folder / "expect.toml").read_text())
    assignment = folder.parent.name
    submission, cache = known_wrong(folder, tmp_path), None
    if submission != folder:  # the solution with an edit: its other kernels are the solution's, compiled once
        cache = tmp_path / "compiled"
        folder_of_its_kernels = compile_cache.folder_for(cache, str(submission), assignment, submission / assignment)
        solutions.seed(assignment, folder_of_its_kernels)
    started = time.monotonic()
    result = grade(submission, [assignment], timeout_s=expect.get("timeout_s"), parts=expect.get("parts"), cache=cache)
    elapsed = time.monotonic() - started
    if cache is not None:
        shutil.rmtree(cache)  # a copy of the solution's kernels (FlashAttention's: 42 MB)
    scored = [t for t in in_scope(result, expect) if t.kind == "correctness" and t.graded]
    failed = [t for t in scored if not t.passed]
    assert failed, f"{folder.name} passed every case: the grader missed the bug"
    wrong_reason = {t.name: f"{t.reason}: {t.output}" for t in failed if t.reason != expect["reason"]}
    assert not wrong_reason, f"expected {expect['reason']} everywhere it fails, got {wrong_reason}"
    assert sum(t.score for t in scored) < sum(t.max_score for t in scored), "the bug must cost points"
    for test in failed:
        assert test.output.strip(), "a failure must say what went wrong"
    assert_output(failed[0].output, expect.get("output", []))
    assert_passes(scored, expect.get("passes", []))
    assert_diagnoses(failed, expect.get("diagnosis"))
    if expect["reason"] == "timeout" and "timeout_s" in expect:
        limit = expect["timeout_s"]
        assert elapsed <= limit + 5, f"a hang must cost at most its limit + 5 s: {elapsed:.1f} s for {limit} s"


def assert_output(message: str, patterns: list[str]) -> None:
    """What a failure's message must say (expect.toml's `output`: regular expressions, each found in it)."""
    missing = [pattern for pattern in patterns if not re.search(pattern, message)]
    assert not missing, f"the message does not match {missing}: {message}"


def assert_passes(scored: list, names: list[str], every: bool = True) -> None:
    """expect.toml's `passes`: each of those cases (`part: label`) passed; `every`: each was graded."""
    by_name = {f"{t.part}: {t.name.split(': ', 1)[1]}": t for t in scored}
    missing = [name for name in names if name not in by_name]
    assert not (every and missing), f"`passes` names cases that were not graded: {missing}"
    failed = {name: f"{by_name[name].reason}: {by_name[name].output[:300]}" for name in names
              if name in by_name and not by_name[name].passed}  # fmt: skip
    assert not failed, f"cases the bug leaves right failed: {failed}"


def assert_diagnoses(failed: list, wanted: str | None, may: tuple[str, ...] = ()) -> None:
    """A diagnosis names a cause only where its evidence fits (grader/judging/diagnosis.py): the one the
    bug's expect.toml names, on at least one case, and never another, nor one it does not name.
    `may` names diagnoses that also fit the bug but need not show (a race decides whether they do)."""
    diagnosed = {t.name: t.metrics.get("diagnosis") for t in failed}
    if wanted:
        assert wanted in diagnosed.values(), f"no case was diagnosed {wanted}: {diagnosed}"
    others = {n: d for n, d in diagnosed.items() if d not in (None, wanted, *may)}
    assert not others, f"cases given a diagnosis the bug does not earn: {others}"


def test_each_edit_still_applies_to_its_solution(tmp_path):
    """A bug written as edits of the solution must still find its lines there, and change them."""
    for folder, expect in expectations():
        if "edits" not in expect:
            continue
        tree = known_wrong(folder, tmp_path) / folder.parent.name
        solution = REPO_ROOT / "solutions" / folder.parent.name
        files = {edit["file"] for edit in expect["edits"]}
        assert any((tree / f).read_text() != (solution / f).read_text() for f in files), \
            f"{folder.name}: its edits leave the solution as it was"  # fmt: skip
        stray = [p.name for p in folder.iterdir() if p.name != "expect.toml"]
        assert not stray, f"{folder.name} has edits, so its files would be ignored: {stray}"


def _gpu_only_cuda_bugs() -> list:
    """The bugs that only a GPU shows in a CUDA C file: all the CPU tier does with them is build them."""
    found = []
    for folder, expect in expectations():
        files = {edit["file"] for edit in expect.get("edits", [])} | {path.name for path in folder.rglob("*.cu")}
        if expect.get("tier") == "gpu" and any(name.endswith(".cu") for name in files):
            found.append(pytest.param(folder, id=f"{folder.parent.name}/{folder.name}"))
    return found


@pytest.mark.skipif(cuda_build.nvcc() is None, reason="nvcc is not installed on this machine")
@pytest.mark.parametrize("folder", _gpu_only_cuda_bugs())
def test_a_cuda_bug_that_only_a_gpu_shows_compiles(folder, tmp_path):
    """Such a bug must build, or the GPU tier grades it compile_error instead of its reason: a
    stray edit would only show there, on borrowed GPU time. nvcc builds it here as the grader does."""
    tree = known_wrong(folder, tmp_path) / folder.parent.name
    sources = sorted(tree.glob("*.cu"))
    assert sources, f"{folder.name}: no .cu file in the submission"
    for source in sources:
        built = cuda_build.build(source)
        assert built.library is not None, f"{folder.name}: {source.name} does not build: {built.message}"


def test_every_reason_code_has_a_submission_that_earns_it():
    """grader/judging/reasons.py says where each reason is earned; each known-wrong one has its submission
    here (a CPU-tier one earns it on the CPU tier, so in this run), the others their own tests."""
    on_cpu = {e["reason"] for _, e in expectations() if e.get("tier", "both") != "gpu"}
    anywhere = {e["reason"] for _, e in expectations()} | {r for _, e in expectations() for r in gpu_reasons(e)}
    wanted = {
        "known_wrong": on_cpu,
        "known_wrong_gpu": anywhere,
        "starter": set(),  # test_reference_submissions.py: every starter case is not_implemented
        "off_gpu": set(),  # test_reference_submissions.py: every speed test on a CPU is no_gpu
        "solutions": set(),  # test_reference_submissions.py: solutions/ pass every case
    }
    missing = [r.code for r in reasons.REGISTRY if wanted[r.earned_by] and r.code not in wanted[r.earned_by]]
    assert not missing, f"no known-wrong submission earns: {missing}"
    assert {r.earned_by for r in reasons.REGISTRY} <= set(wanted)
    assert on_cpu | anywhere <= set(reasons.CODES)
