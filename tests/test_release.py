"""The student bundle leaks no solution, ships the tests marked for students and no other, and
passes its own tests; the Gradescope autograder grades a fake /autograder tree."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.course import release
from grader.reporting import gradescope
from grader.assignment.loading import load_assignments
from grader.assignment.spec import REPO_ROOT


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "course"
    release.build(out)
    return out


def _solution_lines(repo: Path) -> dict[str, set[str]]:
    """Per solution file, the substantial lines that its starter does not have: the student's work."""
    found = {}
    for solution in sorted((repo / "solutions").rglob("*")):
        if not solution.is_file() or "__pycache__" in solution.parts:
            continue
        starter = repo / "starter" / solution.relative_to(repo / "solutions")
        given = set(starter.read_text().splitlines()) if starter.exists() else set()
        work = {line.strip() for line in solution.read_text().splitlines() if line not in given}
        found[str(solution.relative_to(repo))] = {line for line in work if len(line) >= 30 and line[0] not in "#/*"}
    return found


def test_bundle_has_the_course_and_no_solutions(bundle):
    assert (bundle / release.MARKER).exists()
    assert not (bundle / "solutions").exists()
    assert not (bundle / "tests" / "submissions").exists()
    for name in ("Makefile", "README.md", "grader/cli.py", "tests/test_numerics.py"):
        assert (bundle / name).is_file(), name
    for assignment in load_assignments():
        for part in assignment.parts:
            assert (bundle / "starter" / assignment.name / part.file).is_file()
            assert (bundle / "assignments" / assignment.name / "assignment.toml").is_file()


def test_the_bundle_ships_the_marked_tests_and_no_other(bundle):
    """Read with a pattern, not with release's own parser, so that the two must agree."""
    marked = re.compile(r"^pytestmark = (\[[^\]]*)?pytest\.mark\.student\b", re.M)
    expected = {p.name for p in (REPO_ROOT / "tests").glob("*.py") if marked.search(p.read_text())}
    shipped = {p.name for p in (bundle / "tests").rglob("*") if p.is_file()}
    assert "test_numerics.py" in expected and "test_release.py" not in expected, expected
    assert shipped == expected | set(release.SUPPORT)


def test_a_test_that_is_not_marked_does_not_ship(tmp_path):
    """Only a module's own `pytestmark` ships it: not a mark on one test, another mark, or prose."""
    files = {
        "conftest.py": "import pytest\n",
        "test_marked.py": "import pytest\n\npytestmark = pytest.mark.student\n",
        "test_in_a_list.py": "import pytest\n\npytestmark = [pytest.mark.student, pytest.mark.skipif(True, reason='x')]\n",
        "test_unmarked.py": "def test_x():\n    pass\n",
        "test_other_mark.py": "import pytest\n\npytestmark = pytest.mark.gpu\n",
        "test_one_test_marked.py": "import pytest\n\n\n@pytest.mark.student\ndef test_x():\n    pass\n",
        "test_says_so_in_prose.py": '"""Not `pytestmark = pytest.mark.student` yet."""\n',
    }  # fmt: skip
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    shipped = [path.name for path in release.student_tests(tmp_path)]
    assert shipped == ["conftest.py", "test_in_a_list.py", "test_marked.py"]


def test_no_line_of_a_solution_leaks_into_the_bundle(bundle):
    """A copied kernel brings dozens of its lines along; one boilerplate line in common is chance."""
    texts = {path: path.read_text(errors="replace") for path in bundle.rglob("*") if path.is_file()}
    leaks = []
    for solution, lines in _solution_lines(REPO_ROOT).items():
        assert len(lines) >= 3, f"{solution}: too few lines differ from its starter for the check to prove anything"
        for path, text in texts.items():
            shared = sorted(line for line in lines if line in text)
            if len(shared) >= 3:
                leaks.append(f"{solution} -> {path.relative_to(bundle)}: {shared[:3]}")
    assert not leaks, "\n".join(leaks)


def test_bundle_refuses_a_folder_in_use(tmp_path):
    (tmp_path / "something").write_text("x")
    with pytest.raises(release.ReleaseError, match="not empty"):
        release.build(tmp_path)


@pytest.mark.slow  # a second set-up and test run inside the bundle: `make test-slow`
def test_bundle_passes_its_own_make_test_in_a_fresh_clone(bundle, tmp_path):
    git = ["git", "-c", "user.name=course staff", "-c", "user.email=staff@example.org"]
    subprocess.run(git + ["init", "-q"], cwd=bundle, check=True)
    subprocess.run(git + ["add", "-A"], cwd=bundle, check=True)
    subprocess.run(git + ["commit", "-q", "-m", "student bundle"], cwd=bundle, check=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(bundle), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PYTEST"))}
    # Set up from this interpreter, which has torch and Triton: the bundle's venv reuses them, as on
    # a GPU image, rather than installing them again (CI's own fresh clone covers the install).
    env["PYTHON"] = sys.executable
    done = subprocess.run(["make", "test"], cwd=clone, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and " failed" not in done.stdout, done.stdout[-2000:]
    venv_packages = (clone / ".venv" / "lib").glob("python*/site-packages/torch")
    assert not list(venv_packages), "the bundle's venv installed torch again instead of reusing this one"


def test_gradescope_zip_grades_a_fake_autograder_tree(tmp_path):
    archive = tmp_path / "autograder.zip"
    names = gradescope.build_zip(archive)
    assert "setup.sh" in names and "run_autograder" in names
    assert not [n for n in names if n.startswith(("solutions/", "tests/"))], "the autograder needs no solutions"
    root = tmp_path / "autograder"
    with zipfile.ZipFile(archive) as opened:
        opened.extractall(root / "source")
    for name in ("setup.sh", "run_autograder"):  # zipfile does not restore modes; Gradescope's unzip does
        path = root / "source" / name
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    # A flat upload: the bare file, as students drag it into Gradescope.
    (root / "submission").mkdir()
    shutil.copy(REPO_ROOT / "solutions" / "vector_add" / "vector_add.py", root / "submission")
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "PYTHON": sys.executable}
    done = subprocess.run([str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((root / "results" / "results.json").read_text())
    by_assignment: dict[str, set[str]] = {}
    for test in results["tests"]:
        by_assignment.setdefault(test["extra_data"]["assignment"], set()).add(test["extra_data"]["reason"])
    assert by_assignment.pop("vector_add") <= {"ok", "no_gpu"}
    # Nothing uploaded for the others: their numerics are missing_file (speed is no_gpu on a CPU anyway).
    assert all("missing_file" in r and r <= {"missing_file", "no_gpu"} for r in by_assignment.values()), by_assignment


def test_graded_file_names_are_unique_across_assignments():
    """Gradescope uploads may be bare files: each name must say which assignment it belongs to."""
    owners: dict[str, str] = {}
    for assignment in load_assignments():
        for part in assignment.parts:
            assert owners.setdefault(part.file, assignment.name) == assignment.name, part.file
