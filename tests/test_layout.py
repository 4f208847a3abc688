"""The three folders of an assignment agree, and the grader never lists assignments in code."""

from __future__ import annotations

import re

import pytest

from grader.release import MARKER
from grader.spec import assignment_names, load_assignments


@pytest.fixture
def solutions(repo):
    """solutions/, or a skip in a student bundle (marked by its release file), which has none."""
    if (repo / MARKER).exists():
        assert not (repo / "solutions").exists(), "a student bundle must not hold solutions/"
        pytest.skip("a student bundle: solutions/ is left out on purpose")
    return repo / "solutions"


def _folders(repo, top: str) -> set[str]:
    return {p.name for p in (repo / top).iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}


def test_assignments_and_starter_agree(repo):
    names = set(assignment_names())
    assert names, "no assignment found"
    assert _folders(repo, "assignments") == names
    assert _folders(repo, "starter") == names, "every assignment needs a starter/ folder, and only those"
    for assignment in load_assignments():
        starter = {p.name for p in (repo / "starter" / assignment.name).iterdir() if p.is_file()}
        for part in assignment.parts:
            assert part.file in starter, f"{assignment.name}: {part.file} is graded but not in starter/"


def test_every_assignment_has_solutions_with_the_starter_files(repo, solutions):
    assert _folders(repo, "solutions") == set(assignment_names()), "every assignment needs a solutions/ folder, and only those"
    for assignment in load_assignments():
        starter = {p.name for p in (repo / "starter" / assignment.name).iterdir() if p.is_file()}
        solution = {p.name for p in (solutions / assignment.name).iterdir() if p.is_file()}
        assert starter == solution, assignment.name


def test_each_assignment_has_a_handout(repo):
    for name in assignment_names():
        readme = (repo / "assignments" / name / "README.md").read_text()
        assert "How it is graded" in readme, name


def test_grader_never_names_an_assignment(repo):
    pattern = re.compile("|".join(re.escape(n) for n in assignment_names()))
    for path in (repo / "grader").rglob("*.py"):
        assert not pattern.search(path.read_text()), f"{path.name} names an assignment: find them by glob instead"
