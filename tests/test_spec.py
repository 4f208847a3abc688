"""assignment.toml parsing: every assignment loads, and a bad file says where and what: a bad
key or case, or a function that reference.py does not define."""

from __future__ import annotations

import re
import shutil

import pytest

from grader.assignment import lint
from grader.assignment.loading import assignment_names, load_assignment, load_assignments
from grader.assignment.spec import Case
from grader.assignment.toml_table import SpecError

pytestmark = pytest.mark.student


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


def _copy(tmp_path, repo):
    """vector_add's folder copied under tmp_path, to be broken there."""
    folder = tmp_path / "vector_add"
    shutil.copytree(repo / "assignments" / "vector_add", folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def _broken(tmp_path, repo, old: str, new: str, file: str = "assignment.toml"):
    """vector_add with the first `old` in `file` made `new`."""
    folder = _copy(tmp_path, repo)
    path = folder / file
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return folder


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ('"float32 1",', '{ shape = [1], dtype = "float31" },',
         r"\[parts\[0\] \(add\)\.cases\[0\]\] key 'dtype': expected one of float32"),
        ("seed = ", "seeds = ", r"\[assignment\] key 'seed': expected an integer seed"),
        ('"float32 1",', '{ shape = [1], dtype = "float32", layout = "diagonal" },',
         r"key 'layout': expected one of contiguous, strided"),
        ("repetitions = ", "repetitions = -", r"key 'repetitions': expected a positive number"),
        ('"float32 1",', '{ shape = [1], dtype = "float32", size = 3 },', r"unknown key\(s\): size"),
        ("cases = [", "cases = [3, ", r"\[parts\[0\] \(add\)\.cases\[0\]\] case 3: expected a line .* or a table"),
        ("tiers = [[", "tiers = [[0.1, 1.0], [", r"key 'tiers': expected .* best ratio first"),
        ("tolerance.float16 =", "tolerance.float17 =", r"key 'float17': expected a dtype table"),
        ('kernel = "triton"', 'kernel = "triton"\nmax_kernels = 0', r"key 'max_kernels': expected a positive number"),
        ('kernel = "triton"', 'kernel = "triton"\nloads = "blockpointers"', r"key 'loads': expected one of any, block_pointers"),
        ('kernel = "triton"', 'kernel = "none"\nloads = "block_pointers"', r"key 'loads': expected \"any\" for kernel = \"none\""),
        ('kernel = "triton"', 'kernel = "triton"\nteaches = ["tensor_core"]',
         r"key 'teaches': expected a list of .* each one of tensor_cores, vector_loads, bank_conflicts"),
        ('kernel = "triton"', 'kernel = "triton"\nteaches = "tensor_cores"', r"key 'teaches': expected a list"),
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
    folder = _broken(tmp_path, repo, "tolerance.float16 =", "tolerance.float64 =")
    with pytest.raises(SpecError, match=r"a \[tolerance.float16\] table"):
        load_assignment(folder)


def _with_variant(tmp_path, repo, variant: str):
    """vector_add with a second part appended after its first."""
    folder = _copy(tmp_path, repo)
    toml = folder / "assignment.toml"
    toml.write_text(toml.read_text() + "\n" + variant)
    return folder


def test_a_part_like_another_copies_it_and_overrides_whole_keys(tmp_path, repo):
    variant = '[[parts]]\nlike = "add"\nname = "add_again"\npoints = { correctness = 1.0 }\n'
    first, second = load_assignment(_with_variant(tmp_path, repo, variant)).parts
    assert second.name == "add_again" and second.correctness_points == 1.0 and second.performance_points == 0.0
    assert (second.entry, second.cases, second.tolerance) == (first.entry, first.cases, first.tolerance)
    # A copy calls the functions of the part it copies, the defaults named after that part included.
    assert (second.inputs, second.reference, second.baseline, second.traffic) == (
        "add_inputs", "add_reference", "add_baseline", "add_traffic")


@pytest.mark.parametrize("base", ['"no_such_part"', '"add_again"', "3"])
def test_like_must_name_an_earlier_part(tmp_path, repo, base):
    variant = f'[[parts]]\nlike = {base}\nname = "add_again"\n'
    with pytest.raises(SpecError, match=r"\[parts\[1\]\] key 'like': expected the name of an earlier part"):
        load_assignment(_with_variant(tmp_path, repo, variant))


def test_a_like_part_still_needs_a_name_of_its_own(tmp_path, repo):
    with pytest.raises(SpecError, match="names must be unique"):
        load_assignment(_with_variant(tmp_path, repo, '[[parts]]\nlike = "add"\n'))


def test_a_part_calls_functions_named_after_it_unless_it_names_others(repo):
    """vector_add's part names none of its functions; gelu_cuda names gelu's but its arguments."""
    [add] = load_assignment(repo / "assignments" / "vector_add").parts
    assert (add.inputs, add.reference, add.baseline, add.traffic) == (
        "add_inputs", "add_reference", "add_baseline", "add_traffic")
    assert add.arguments is None and add.output_shape is None  # only a CUDA C part calls them
    parts = {p.name: p for p in load_assignment(repo / "assignments" / "gelu").parts}
    cuda = parts["gelu_cuda"]
    expected = ("gelu_inputs", "gelu_cuda_arguments", "gelu_output_shape")
    assert (cuda.inputs, cuda.arguments, cuda.output_shape) == expected


@pytest.mark.parametrize(
    "file, old, new, key, name, defines",
    [
        # a default, then a name the part gives
        ("reference.py", "def add_baseline(", "def add_baseline_v2(", "baseline", "add_baseline", "add_baseline_v2, add_inputs"),
        ("assignment.toml", 'entry = "add"', 'entry = "add"\ntraffic = "add_trafic"', "traffic", "add_trafic", "add_baseline, add_inputs"),
        # a shown baseline (its own table)
        ("assignment.toml", 'entry = "add"', 'entry = "add"\nshown = { label = "torch.compile", function = "add_compild" }',
         "shown.function", "add_compild", "add_baseline, add_inputs"),
    ],
)  # fmt: skip
def test_a_function_reference_py_lacks_fails_at_load(tmp_path, repo, file, old, new, key, name, defines):
    folder = _broken(tmp_path, repo, old, new, file)
    with pytest.raises(SpecError) as caught:
        load_assignment(folder)
    message = str(caught.value)
    assert str(folder / "assignment.toml") in message and "vector_add" in message
    assert f"[parts[0] (add)] key '{key}': reference.py defines no function '{name}'" in message, message
    assert message.endswith(f"; it defines {defines}, add_reference, add_traffic"), message  # not the private _vector


def test_reference_py_is_read_not_imported(tmp_path, repo):
    """The check parses reference.py: code that runs at import (here, a failure) does not run at load."""
    failing = "import torch\n\nraise RuntimeError('imported')\n"
    folder = _broken(tmp_path, repo, "import torch\n", failing, "reference.py")
    assert load_assignment(folder).parts[0].inputs == "add_inputs"


def test_a_reference_py_that_does_not_parse(tmp_path, repo):
    folder = _broken(tmp_path, repo, "def add_inputs(", "def add_inputs((", "reference.py")
    with pytest.raises(SpecError, match=r"reference.py: cannot be parsed"):
        load_assignment(folder)


def test_no_reference_py(tmp_path, repo):
    folder = _copy(tmp_path, repo)
    (folder / "reference.py").unlink()
    with pytest.raises(SpecError, match="the assignment has no reference.py beside it"):
        load_assignment(folder)


@pytest.mark.parametrize(
    "line, case",
    [
        ("float32 4096x4096", Case((4096, 4096), "float32")),
        ("bfloat16 1000x1000 strided", Case((1000, 1000), "bfloat16", layout="strided")),
        ("float16 1x1x1x64 gpu", Case((1, 1, 1, 64), "float16", tier="gpu")),
        ("  float16   7   cpu   strided ", Case((7,), "float16", layout="strided", tier="cpu")),
        ("float16 3 contiguous both", Case((3,), "float16")),
    ],
)
def test_a_case_on_one_line_is_the_table_it_stands_for(tmp_path, repo, line, case):
    table = f"{{ shape = {list(case.shape)}, dtype = {case.dtype!r}, layout = {case.layout!r}, tier = {case.tier!r} }}"
    folder = _broken(tmp_path, repo, '"float32 1",', f"{line!r}, {table},")
    cases = load_assignment(folder).parts[0].cases
    assert cases[:2] == (case, case)
    assert cases[2:] == load_assignment(repo / "assignments" / "vector_add").parts[0].cases[1:]


@pytest.mark.parametrize(
    "line",
    ["float31 4x4", "float32", "4x4 float32", "float32 0x4", "float32 4x", "float32 4*4", "float32 4x4 strided strided",
     "float32 4x4 cpu gpu", "float32 4x4 diagonal", "float32 4x4 gpu 2", "float32 4x4 hidden hidden"],
)  # fmt: skip
def test_a_bad_case_line_names_the_part_and_the_line(tmp_path, repo, line):
    folder = _broken(tmp_path, repo, '"float16 97",', f"{line!r},")
    with pytest.raises(SpecError) as caught:
        load_assignment(folder)
    message = str(caught.value)
    assert message.startswith(f"{folder / 'assignment.toml'}: [parts[0] (add).cases[1]] case {line!r}: expected a line "
                              '"DTYPE SHAPE [LAYOUT] [TIER] [hidden]"'), message  # fmt: skip


def test_every_assignment_passes_the_lint(repo):
    """What loading cannot check: each part's reference.py functions on every case's shapes, and
    the handout (grader/assignment/lint.py)."""
    problems = [problem for name in assignment_names() for problem in lint.lint(repo / "assignments" / name)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "old, new, expected",
    [
        # Issue 54: a typo of _traffic's key passed unnoticed on the CPU tier, which never times.
        ('return {"bytes": 3 * n', 'return {"byte": 3 * n',
         r'add_traffic\(\) returns the keys \[\'byte\', \'flops\'\]: return exactly \{"bytes": \.\.\., "flops": \.\.\.\}'),
        ('"flops": n}', '"flops": torch.tensor(n)}', r'add_traffic\(\) returns "flops" as .*: make it a number'),
        ('"y": _vector(shape, dtype, generator, device)}', '"y": [1, 2]}',
         r"add_inputs\(\) returns 'y' as list: return a tensor .* or a bool, int or float"),
        ('return {"x": _vector(shape, dtype, generator, device), "y": _vector(shape, dtype, generator, device)}',
         "return (_vector(shape, dtype, generator, device), _vector(shape, dtype, generator, device))",
         r"add_inputs\(\) returns tuple: return a dict of the entry point's keyword arguments"),
    ],
)
def test_the_lint_names_the_fix(tmp_path, repo, old, new, expected):
    folder = _broken(tmp_path, repo, old, new, "reference.py")
    [problem] = lint.lint(folder)
    assert re.search(expected, problem), problem
    assert "reference.py, part add, case" in problem


def test_a_float_input_passes_the_lint(tmp_path, repo):
    """A plain value (a scale, a flag) reaches the entry point and the reference as it is."""
    folder = _broken(tmp_path, repo, '"y": _vector(shape, dtype, generator, device)}',
                     '"y": _vector(shape, dtype, generator, device), "alpha": 0.5}', "reference.py")  # fmt: skip
    text = (folder / "reference.py").read_text()
    (folder / "reference.py").write_text(text.replace("def add_traffic(x, y):", "def add_traffic(x, y, alpha):"))
    assert lint.lint(folder) == []


def test_a_missing_handout_is_named_with_its_fix(tmp_path, repo):
    """Issue 54: a missing README.md made test_layout.py raise FileNotFoundError."""
    folder = _copy(tmp_path, repo)
    (folder / "README.md").unlink()
    assert lint.lint(folder) == [f"{folder / 'README.md'} is missing: write the student's handout there, with a "
                                 "section \"How it is graded\" (docs/adding-an-assignment.md)"]  # fmt: skip
    (folder / "README.md").write_text("# Vector addition\n")
    assert "has no section \"How it is graded\"" in lint.handout(folder)[0]


def test_the_adding_an_assignment_guide_gives_each_limit_its_default(tmp_path, repo):
    """Issue 54: docs/adding-an-assignment.md listed the [assignment] limits as required; each has a
    default, which the guide gives, and an assignment.toml without them loads with those."""
    folder = _copy(tmp_path, repo)
    toml = folder / "assignment.toml"
    toml.write_text(re.sub(r"^(host_memory_gib|max_processes|gpu_memory_gib) = .*$", "", toml.read_text(), flags=re.M))
    loaded = load_assignment(folder)
    guide = (repo / "docs" / "adding-an-assignment.md").read_text()
    for name in ("host_memory_gib", "max_processes", "gpu_memory_gib", "scratch_gib"):
        found = re.search(rf"^\| `{name}` \| ([\d.]+) \|", guide, re.M)
        assert found, f"the guide's table of [assignment] keys has no default for {name}"
        assert float(found[1]) == getattr(loaded, name), name
