"""Known-wrong submissions, one classic bug each, lose points for their own reason.

Each folder under tests/submissions/<assignment>/<bug>/ is a submission tree plus an
expect.toml naming the reason the bug must earn, or an expect.toml alone whose `edits` turn the
solution into the bug (conftest.known_wrong), and optionally `timeout_s` (a shorter limit),
`gpu_reason` (where the GPU tier names it differently), `tier = "gpu"` (a bug only a GPU shows:
slow or timing-hostile code) and `parts` (the parts the bug is in, when the submission holds only
their files, or is only about them; the other parts are then not graded). Every failing test of
those parts must carry that reason, and at least one must fail. tests/test_gpu.py runs the same folders on
the GPU tier.
"""

from __future__ import annotations

import re
import tomllib

import pytest

from conftest import SUBMISSIONS, grade, known_wrong
from grader.spec import REPO_ROOT


def expectations() -> list[tuple]:
    found = sorted(SUBMISSIONS.glob("*/*/expect.toml"))
    return [(path.parent, tomllib.loads(path.read_text())) for path in found]


def in_scope(result, expect: dict) -> list:
    """The tests of the parts the bug is in (every part, unless expect.toml names some)."""
    parts = expect.get("parts")
    return [t for t in result.tests if parts is None or t.part in parts]


def _submissions() -> list:
    return [
        pytest.param(folder, id=f"{folder.parent.name}/{folder.name}")
        for folder, expect in expectations()
        if expect.get("tier", "both") != "gpu"
    ]


@pytest.mark.parametrize("folder", _submissions())
def test_bug_earns_its_reason(folder, tmp_path):
    expect = tomllib.loads((folder / "expect.toml").read_text())
    assignment = folder.parent.name
    result = grade(known_wrong(folder, tmp_path), [assignment], timeout_s=expect.get("timeout_s"),
                   parts=expect.get("parts"))  # fmt: skip
    scored = [t for t in in_scope(result, expect) if t.kind == "correctness" and t.graded]
    failed = [t for t in scored if not t.passed]
    assert failed, f"{folder.name} passed every case: the grader missed the bug"
    wrong_reason = {t.name: f"{t.reason}: {t.output}" for t in failed if t.reason != expect["reason"]}
    assert not wrong_reason, f"expected {expect['reason']} everywhere it fails, got {wrong_reason}"
    assert sum(t.score for t in scored) < sum(t.max_score for t in scored), "the bug must cost points"
    for test in failed:
        assert test.output.strip(), "a failure must say what went wrong"
    assert_diagnoses(failed, expect.get("diagnosis"))


def assert_diagnoses(failed: list, wanted: str | None) -> None:
    """A diagnosis names a cause only where its evidence fits (grader/diagnosis.py): the one the
    bug's expect.toml names, on at least one case, and never another, nor one it does not name."""
    diagnosed = {t.name: t.metrics.get("diagnosis") for t in failed}
    if wanted:
        assert wanted in diagnosed.values(), f"no case was diagnosed {wanted}: {diagnosed}"
    others = {n: d for n, d in diagnosed.items() if d not in (None, wanted)}
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


def test_every_reason_code_has_a_submission_that_earns_it():
    reasons = {expect["reason"] for _, expect in expectations()}
    gpu_tier = {"too_slow", "tampering"}
    cpu_tier = {"compile_error",
        "missing_file", "syntax_error", "import_error", "missing_entry_point", "wrong_shape", "wrong_dtype",
        "wrong_result", "nan_or_inf", "unwritten_output", "input_modified", "forbidden_op", "no_kernel_launched",
        "timeout", "crash", "out_of_memory",
    }  # fmt: skip
    assert cpu_tier | gpu_tier <= reasons, f"no known-wrong submission earns: {sorted(cpu_tier | gpu_tier - reasons)}"
    # The rest are earned elsewhere: not_implemented by starter/, no_gpu by every speed test on a
    # CPU (test_reference_submissions.py); not_fused belongs to assignments with a fused part.


def test_an_op_that_costs_points_names_the_students_line_and_what_it_does(tmp_path):
    """`float(scale)` is aten::_local_scalar_dense: the message says so in words and quotes the line."""
    folder = SUBMISSIONS / "gelu" / "float_of_scale"
    result = grade(known_wrong(folder, tmp_path), ["gelu"], parts=["bias_gelu_scale"])
    failed = [t for t in result.tests if t.kind == "correctness" and not t.passed]
    assert failed and all(t.reason == "not_fused" for t in failed)
    message = failed[0].output
    # The profiler names the op aten::item (on a GPU, or where item() is called, its callee aten::_local_scalar_dense).
    assert re.search(r"aten::(item|_local_scalar_dense) \(copies one value to the CPU and waits for the GPU", message), message
    assert "first run from gelu.py, line " in message and "float(scale)" in message, message
