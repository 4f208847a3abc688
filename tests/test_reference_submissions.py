"""The reference solutions earn every CPU-tier point; the untouched starter earns none."""

from __future__ import annotations

import json

import pytest

from conftest import grade
from grader.cli import main
from grader.assignment.loading import assignment_names


def bonus(tests) -> float:
    """The extra-credit points on offer: the solutions earn those too."""
    return sum(t.max_score for t in tests if t.bonus)


@pytest.fixture(scope="module")
def solutions_grade(solutions):
    """Graded an assignment at a time, once a run (conftest.Solutions): known-wrong gradings start from its kernels."""
    return solutions.grade_all(assignment_names())


@pytest.fixture(scope="module")
def starter_grade(repo):
    return grade(repo / "starter", assignment_names())


def test_solutions_earn_every_cpu_tier_point(solutions_grade):
    graded = [t for t in solutions_grade.tests if t.graded]
    failures = [f"{t.name}: {t.reason}: {t.output}" for t in graded if not t.passed]
    assert not failures, "\n".join(failures)
    assert solutions_grade.score == pytest.approx(solutions_grade.graded_max_score + bonus(graded))
    assert solutions_grade.graded_max_score > 0


def test_speed_is_not_graded_without_a_gpu_and_never_shown_as_passed(solutions_grade):
    speed = [t for t in solutions_grade.tests if t.kind == "performance"]
    assert speed, "every assignment here has benchmarks"
    for test in speed:
        assert test.reason == "no_gpu" and not test.passed and test.score == 0 and test.max_score > 0


def test_every_assignment_and_part_is_graded(solutions_grade, repo):
    from grader.assignment.loading import load_assignments

    seen = {(t.assignment, t.part) for t in solutions_grade.tests}
    expected = {(a.name, p.name) for a in load_assignments() for p in a.parts}
    assert seen == expected


def test_starter_earns_nothing_and_every_part_is_not_implemented(starter_grade):
    assert starter_grade.score == 0
    scored = [t for t in starter_grade.tests if t.kind == "correctness"]
    assert scored and all(t.reason == "not_implemented" for t in scored), {t.name: t.reason for t in scored}
    assert all(t.passed for t in starter_grade.tests if t.kind == "build"), "the starter loads; it just does nothing"


def test_cli_writes_a_gradescope_results_json_and_a_report(repo, tmp_path):
    out_json, out_html = tmp_path / "results.json", tmp_path / "report.html"
    argv = ["grade", "--submission", str(repo / "solutions"), "--assignment", "vector_add",
            "--json", str(out_json), "--html", str(out_html), "--device", "cpu"]  # fmt: skip
    assert main(argv) == 0
    result = json.loads(out_json.read_text())
    assert set(result) >= {"score", "execution_time", "output", "tests", "extra_data"}
    assert result["score"] == pytest.approx(sum(t["score"] for t in result["tests"]))
    for test in result["tests"]:
        assert set(test) >= {"name", "number", "score", "max_score", "status", "output", "tags", "visibility"}
        assert test["status"] in ("passed", "failed")
        assert set(test["extra_data"]) == {"assignment", "part", "kind", "reason", "metrics"}
    assert {"torch_version", "triton_version", "grader_version", "device", "seeds"} <= set(result["extra_data"])
    html = out_html.read_text()
    assert "<html" in html and "vector_add" in html and "http" not in html.replace("http-equiv", "")


@pytest.mark.parametrize(
    "argv",
    [
        ["grade", "--assignment", "no_such_assignment"],
        ["grade", "--submission", "/no/such/folder"],
        ["grade", "--device", "tpu"],
        ["frobnicate"],
    ],
)
def test_usage_errors_exit_2(argv):
    assert main(argv) == 2
