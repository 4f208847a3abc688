"""The three folders of an assignment agree, and the grader never lists assignments in code."""

from __future__ import annotations

import re

from grader.spec import assignment_names, load_assignments


def _folders(repo, top: str) -> set[str]:
    return {p.name for p in (repo / top).iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}


def test_assignments_starter_and_solutions_agree(repo):
    names = set(assignment_names())
    assert names, "no assignment found"
    assert _folders(repo, "assignments") == names
    assert _folders(repo, "starter") == names, "every assignment needs a starter/ folder, and only those"
    assert _folders(repo, "solutions") == names, "every assignment needs a solutions/ folder, and only those"


def test_starter_and_solution_have_the_same_files(repo):
    for assignment in load_assignments():
        starter = {p.name for p in (repo / "starter" / assignment.name).iterdir() if p.is_file()}
        solution = {p.name for p in (repo / "solutions" / assignment.name).iterdir() if p.is_file()}
        assert starter == solution, assignment.name
        for part in assignment.parts:
            assert part.file in starter, f"{assignment.name}: {part.file} is graded but not in starter/"


def test_each_assignment_has_a_handout(repo):
    for name in assignment_names():
        readme = (repo / "assignments" / name / "README.md").read_text()
        assert "How it is graded" in readme, name


def test_grader_never_names_an_assignment(repo):
    pattern = re.compile("|".join(re.escape(n) for n in assignment_names()))
    for path in (repo / "grader").rglob("*.py"):
        assert not pattern.search(path.read_text()), f"{path.name} names an assignment: find them by glob instead"
