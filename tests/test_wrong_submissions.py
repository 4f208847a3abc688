"""Known-wrong submissions, one classic bug each, lose points for their own reason.

Each folder under tests/submissions/<assignment>/<bug>/ is a submission tree plus an
expect.toml naming the reason the bug must earn, and optionally `timeout_s` (a shorter limit),
`gpu_reason` (where the GPU tier names it differently), `tier = "gpu"` (a bug only a GPU shows:
slow or timing-hostile code) and `parts` (the parts the bug is in, when the submission holds only
their files; the other parts' tests are then not its concern). Every failing test of those parts
must carry that reason, and at least one must fail. tests/test_gpu.py runs the same folders on
the GPU tier.
"""

from __future__ import annotations

import tomllib

import pytest

from conftest import SUBMISSIONS, grade


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
def test_bug_earns_its_reason(folder):
    expect = tomllib.loads((folder / "expect.toml").read_text())
    assignment = folder.parent.name
    result = grade(folder, [assignment], timeout_s=expect.get("timeout_s"))
    scored = [t for t in in_scope(result, expect) if t.kind == "correctness" and t.graded]
    failed = [t for t in scored if not t.passed]
    assert failed, f"{folder.name} passed every case: the grader missed the bug"
    wrong_reason = {t.name: f"{t.reason}: {t.output}" for t in failed if t.reason != expect["reason"]}
    assert not wrong_reason, f"expected {expect['reason']} everywhere it fails, got {wrong_reason}"
    assert sum(t.score for t in scored) < sum(t.max_score for t in scored), "the bug must cost points"
    for test in failed:
        assert test.output.strip(), "a failure must say what went wrong"


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
