"""assignment.toml parsing: every assignment loads, and a bad file says where and what."""

from __future__ import annotations

import shutil

import pytest

from grader.spec import SpecError, assignment_names, load_assignment, load_assignments


def test_every_assignment_loads(repo):
    assignments = load_assignments()
    assert [a.name for a in assignments] == assignment_names()
    for assignment in assignments:
        assert assignment.parts, assignment.name
        for part in assignment.parts:
            # A CUDA part cannot run without a GPU: on the CPU tier it is compile-checked and probed.
            if not part.is_cuda:
                assert any(c.runs_on("cpu") for c in part.cases), f"{assignment.name}/{part.name} has no CPU-tier case"
            assert any(c.runs_on("cuda") for c in part.cases), f"{assignment.name}/{part.name} has no GPU-tier case"


def test_unknown_assignment_is_named(repo):
    with pytest.raises(KeyError, match="no_such_thing"):
        load_assignments(["no_such_thing"])


def _broken(tmp_path, repo, old: str, new: str):
    folder = tmp_path / "vector_add"
    shutil.copytree(repo / "assignments" / "vector_add", folder)
    toml = folder / "assignment.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new, 1))
    return folder


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ('dtype = "float32"', 'dtype = "float31"', r"key 'dtype': expected one of float32"),
        ("seed = ", "seeds = ", r"key 'seed': expected an integer seed"),
        ('layout = "contiguous"', 'layout = "diagonal"', r"key 'layout': expected one of contiguous, strided"),
        ("repetitions = ", "repetitions = -", r"key 'repetitions': expected a positive number"),
        ("[[parts.cases]]", "[[parts.cases]]\nsize = 3", r"unknown key\(s\): size"),
        ("tiers = [[", "tiers = [[0.1, 1.0], [", r"key 'tiers': expected .* best ratio first"),
        ("[parts.tolerance.float16]", "[parts.tolerance.float17]", r"key 'float17': expected a dtype table"),
        ('kernel = "triton"', 'kernel = "triton"\nmax_kernels = 0', r"key 'max_kernels': expected a positive number"),
    ],
)
def test_bad_file_names_path_key_and_expectation(tmp_path, repo, old, new, expected):
    folder = _broken(tmp_path, repo, old, new)
    with pytest.raises(SpecError, match=expected) as caught:
        load_assignment(folder)
    assert str(folder / "assignment.toml") in str(caught.value)


def test_not_toml_at_all(tmp_path, repo):
    folder = _broken(tmp_path, repo, "[assignment]", "[assignment")
    with pytest.raises(SpecError, match="cannot be read as TOML"):
        load_assignment(folder)


def test_missing_tolerance_for_a_case_dtype(tmp_path, repo):
    folder = _broken(tmp_path, repo, "[parts.tolerance.float16]", "[parts.tolerance.float64]")
    with pytest.raises(SpecError, match=r"a \[tolerance.float16\] table"):
        load_assignment(folder)


def _with_variant(tmp_path, repo, variant: str):
    """vector_add with a second part appended after its first."""
    folder = tmp_path / "vector_add"
    shutil.copytree(repo / "assignments" / "vector_add", folder)
    toml = folder / "assignment.toml"
    toml.write_text(toml.read_text() + "\n" + variant)
    return folder


def test_a_part_like_another_copies_it_and_overrides_whole_keys(tmp_path, repo):
    variant = '[[parts]]\nlike = "add"\nname = "add_again"\npoints = { correctness = 1.0 }\n'
    first, second = load_assignment(_with_variant(tmp_path, repo, variant)).parts
    assert second.name == "add_again" and second.correctness_points == 1.0 and second.performance_points == 0.0
    assert (second.entry, second.cases, second.tolerance) == (first.entry, first.cases, first.tolerance)


@pytest.mark.parametrize("base", ['"no_such_part"', '"add_again"', "3"])
def test_like_must_name_an_earlier_part(tmp_path, repo, base):
    variant = f'[[parts]]\nlike = {base}\nname = "add_again"\n'
    with pytest.raises(SpecError, match=r"\[parts\[1\]\] key 'like': expected the name of an earlier part"):
        load_assignment(_with_variant(tmp_path, repo, variant))


def test_a_like_part_still_needs_a_name_of_its_own(tmp_path, repo):
    with pytest.raises(SpecError, match="names must be unique"):
        load_assignment(_with_variant(tmp_path, repo, '[[parts]]\nlike = "add"\n'))
