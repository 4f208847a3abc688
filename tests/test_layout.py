"""The three folders of an assignment agree, the grader never lists assignments in code, `make
bench` finds its benchmarks, and no comment or docstring sends a reader outside the repository."""

from __future__ import annotations

import ast
import os
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from conftest import repository_files
from grader.assignment import lint
from grader.course.release import MARKER
from grader.assignment.loading import assignment_names, load_assignments

pytestmark = pytest.mark.student

# A document a reader is sent to (`README.md`, `assignments/gelu/README.md`), and a path on some
# machine (/work/..., /tmp/..., ~/...), which no clone of the repository has.
DOCUMENT = re.compile(r"[\w./-]*\w\.md\b")
MACHINE_PATH = re.compile(r"(?<![\w/.:-])(?:~|/(?:work|tmp|home|root|Users|mnt|scratch))/\w[\w./-]*")


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
    problems = [problem for name in assignment_names() for problem in lint.handout(repo / "assignments" / name)]
    assert not problems, "\n".join(problems)


def test_grader_never_names_an_assignment(repo):
    # A name not run on into more letters: `gelu_cuda` and `softmax` name assignments, the word
    # `transposed` does not name `transpose`.
    pattern = re.compile("(?<![a-z])(?:" + "|".join(re.escape(n) for n in assignment_names()) + ")(?![a-z])")
    for path in (repo / "grader").rglob("*.py"):
        assert not pattern.search(path.read_text()), f"{path.name} names an assignment: find them by glob instead"


def test_make_bench_collects_its_benchmarks(repo):
    """`make bench` runs by hand, on a GPU, now and then: a broken import would first show to a
    student. Collecting the file its target names needs no GPU."""
    pytest.importorskip("pytest_benchmark", reason="make bench needs pytest-benchmark")
    target = re.search(r"^bench:.*\n(?:\t.*\n)*?\t.*\$\(PY\) -m pytest (\S+)", (repo / "Makefile").read_text(), re.M)
    assert target, "the Makefile's `bench` target no longer runs `$(PY) -m pytest FILE`"
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", target[1]]
    done = subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=300)
    collected = re.search(r"(\d+) tests? collected", done.stdout)
    assert done.returncode == 0 and collected and int(collected[1]) > 0, done.stdout[-3000:] + done.stderr[-1000:]


def _is_source(path: Path) -> bool:
    """Code and config: Python, TOML, shell, the Makefile, and scripts that name their interpreter."""
    if path.suffix in (".py", ".toml", ".sh") or path.name == "Makefile":
        return True
    with path.open("rb") as file:
        return file.read(2) == b"#!"


def _prose(path: Path, text: str) -> str:
    """What a reader takes for documentation: docstrings and comments of Python, `#` comments of
    shell and Makefiles, all of a TOML file (its strings are notes for people too)."""
    if path.suffix == ".toml":
        return text
    if path.suffix != ".py":
        return "\n".join(re.findall(r"(?:^|[ \t])(#.*)", text, re.M))
    try:
        tree = ast.parse(text)
    except SyntaxError:  # a known-wrong submission: every line of it counts
        return text
    scopes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    docstrings = [ast.get_docstring(node, clean=False) or "" for node in ast.walk(tree) if isinstance(node, scopes)]
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return "\n".join(docstrings + [token.string for token in tokens if token.type == tokenize.COMMENT])


def _pointers_outside(prose: str, known: set[str]) -> list[str]:
    """The documents `prose` names that the repository lacks (a path from the root must be a file's
    path, a bare name some file's name), then the paths on a machine it names."""
    return [name for name in DOCUMENT.findall(prose) if name not in known] + MACHINE_PATH.findall(prose)


@pytest.mark.parametrize(
    "prose, found",
    [
        ("the contract (DESIGN.md section 4)", ["DESIGN.md"]),
        ("see /work/shared/notes for the figures", ["/work/shared/notes"]),
        ("measured into /tmp/gpu-logs/run.json", ["/tmp/gpu-logs/run.json"]),
        ("the salt in ~/secret.txt", ["~/secret.txt"]),
        ("tests/README.md has the details", ["tests/README.md"]),
        ("README.md, \"Grading a class\"; assignments/gelu/README.md", []),
        ("a private, size-limited /tmp; https://github.com/home/x and /proc/self/root", []),
    ],
)
def test_pointers_outside_the_repository_are_found(prose, found):
    assert _pointers_outside(prose, {"README.md", "assignments/gelu/README.md"}) == found


def test_no_comment_or_docstring_points_outside_the_repository(repo):
    """A reader of a clone, or of the student bundle, has only what is in it: a pointer to a
    document elsewhere, or to a path on the machine the code was written on, leads nowhere; and
    a pointer to a section of a document (its name, a comma, the heading in quotes) needs that
    heading there."""
    files = repository_files(repo)
    known = set(files) | {name.rsplit("/", 1)[-1] for name in files}
    found = []
    for name in files:
        path = repo / name
        if _is_source(path):
            prose = _prose(path, path.read_text(errors="replace"))
            found += [f"{name}: {pointer}" for pointer in _pointers_outside(prose, known)]
            found += [f"{name}: {pointer}" for pointer in _sections_missing(repo, prose, files)]
    assert not found, "say the thing itself, or point to a file of the repository:\n" + "\n".join(found)


# A pointer to a section of a document: its name, then a comma or an opening parenthesis, then the
# heading in double quotes.
SECTION = re.compile(r'([\w./-]*\w\.md)(?:, | \()"([^"]+)"')
HEADING = re.compile(r"^#+\s+(.*?)\s*$", re.M)


def _headings(path: Path) -> set[str]:
    return {heading.strip("`") for heading in HEADING.findall(path.read_text())} | set(HEADING.findall(path.read_text()))


def _sections_missing(repo: Path, prose: str, files: list[str]) -> list[str]:
    """The section pointers of `prose` whose document (a path from the root, or the root's README
    by its bare name) lacks that heading."""
    missing = []
    for document, heading in SECTION.findall(prose):
        if document in files and heading not in _headings(repo / document):
            missing.append(f'{document}, "{heading}" (no such heading)')
    return missing


def test_a_pointer_to_a_missing_section_is_found(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "staff.md").write_text("# Staff\n\n## Grading a class\n")
    prose = 'see docs/staff.md, "Grading a class"; docs/staff.md ("The salt"); other.md, "X"'
    assert _sections_missing(tmp_path, prose, ["docs/staff.md"]) == ['docs/staff.md, "The salt" (no such heading)']


# Every Markdown document of the project; tests/corpus/ holds others' kernels with their own files.
def _documents(repo: Path) -> list[str]:
    return [name for name in repository_files(repo) if name.endswith(".md") and not name.startswith("tests/corpus/")]


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_of_the_documentation_leads_somewhere(repo):
    """Each relative link of the README and docs/ names a file of the repository (and, after `#`, one
    of its headings). A student bundle leaves tests/ and tools/ out on purpose: links there are
    not followed in one."""
    bundle = (repo / MARKER).exists()
    broken = []
    for name in ["README.md", *(d for d in _documents(repo) if d.startswith("docs/"))]:
        for target in LINK.findall((repo / name).read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path, _, anchor = target.partition("#")
            found = ((repo / name).parent / path).resolve() if path else repo / name
            if bundle and found.relative_to(repo.resolve()).parts[0] in ("tests", "tools"):
                continue
            if not found.is_file():
                broken.append(f"{name}: {target} (no such file)")
            elif anchor and anchor not in {_slug(h) for h in HEADING.findall(found.read_text())}:
                broken.append(f"{name}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


README_LINES = 250
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
# Narrated history: work sessions counted off, days told one after another.
NARRATED = re.compile(r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|another|earlier|later|"
                      r"previous|next) session\b|\b(?:later|earlier) (?:that|the same) day\b|\bthe same day\b|"
                      r"\blater (?:still|again)\b|\blater on 20\d\d\b", re.I)  # fmt: skip


def _diary(name: str, text: str) -> list[str]:
    """Where a document keeps a diary: a date outside a table row (a handout's Calibration section
    excepted, where each measured table says where and when), or history narrated anywhere."""
    found, calibration, fenced = [], None, False  # the heading level of the Calibration section we are in
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced:
            continue  # an example (a course.toml, a CSV) may hold any date
        if heading := re.match(r"^(#+)\s+(.*)", line):
            level = len(heading[1])
            if calibration is not None and level <= calibration:
                calibration = None
            if heading[2].startswith("Calibration") and name.startswith("assignments/"):
                calibration = level
        if DATE.search(line) and not line.lstrip().startswith("|") and calibration is None:
            found.append(f"{name}:{number}: a date in prose: {line.strip()[:100]}")
        if match := NARRATED.search(line):
            found.append(f"{name}:{number}: history narrated ({match[0]!r}): {line.strip()[:100]}")
    return found


def test_the_readme_is_short_and_no_document_keeps_a_diary(repo):
    """README.md stays a page one reads (what the project is, the two commands, the loops, the
    layout, links), at most 250 lines. No document keeps a dated diary: a date belongs to a
    measurement, in a table row (docs/measurements.md, which its tool writes) or a handout's
    Calibration section; what happened when is git's history. Code and TOML may cite where a
    figure was measured, but narrate no history either."""
    lines = len((repo / "README.md").read_text().splitlines())
    assert lines <= README_LINES, f"README.md has {lines} lines: move detail into docs/ (at most {README_LINES})"
    found = [hit for name in _documents(repo) for hit in _diary(name, (repo / name).read_text())]
    for name in repository_files(repo):
        path = repo / name
        if not name.startswith("tests/corpus/") and _is_source(path) and name != "tests/test_layout.py":
            text = _prose(path, path.read_text(errors="replace"))
            found += [f"{name}: history narrated ({m!r})" for m in NARRATED.findall(text)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "text, found",
    [
        ("Measured on 2026-11-24 on an H100.", 1),
        ("| 2026-11-24 | H100 | 580.159.04 |", 0),
        ("A fourth session on the H200 found why.", 1),
        ("Later that day the machine was slower.", 1),
        ("a session fixture; the profiler's session", 0),
    ],
)
def test_a_diary_is_found(text, found):
    assert len(_diary("docs/x.md", text)) == found


def test_the_measurements_page_is_what_its_tool_writes(repo):
    """docs/measurements.md is rendered from docs/measurements/*.json by tools/measurements.py: a
    figure edited by hand there would be lost at the next re-measure."""
    tool = repo / "tools" / "measurements.py"
    if not tool.exists():
        pytest.skip("a student bundle: the staff's tools are left out")
    done = subprocess.run([sys.executable, str(tool), "check"], cwd=repo, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


PROBE = '''
import os
import pytest

@pytest.fixture(scope="module")
def shared():
    with open(os.environ["PROBE_LOG"], "a") as log:
        log.write(os.environ.get("PYTEST_XDIST_WORKER", "none") + "\\n")

@pytest.mark.parametrize("i", range(8))
def test_uses_the_shared_fixture(shared, i):
    pass
'''


def test_a_shared_module_fixture_is_built_once_under_make_test(repo, tmp_path):
    """`make test` runs two pytest-xdist workers with `--dist loadgroup`; conftest.py groups the
    tests of a costly module-scoped fixture so that one worker builds it. A pytest or xdist that
    drops the group (pytest 9 with xdist 3.8 did) would build each twice: a batch, twice."""
    pytest.importorskip("xdist", reason="pytest-xdist is not installed: `make test` runs on one core here")
    (tmp_path / "conftest.py").write_text((repo / "tests" / "conftest.py").read_text())
    (tmp_path / "test_probe.py").write_text(PROBE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not the repository's settings
    log = tmp_path / "built.log"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                           "-c", str(tmp_path / "pytest.ini"), str(tmp_path / "test_probe.py")],
                          cwd=tmp_path, env={**os.environ, "PROBE_LOG": str(log)}, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert len(log.read_text().split()) == 1, f"the fixture was built by workers {log.read_text().split()}"


# The layout of grader/: packages named for the stages a grading passes through (the assignment's
# data, running student code, the child, judging, the kernels as built, reporting, the course, the
# messages between parent and child, the witness); directly under grader/ only what starts it all.
TOP_LEVEL = {"__init__.py", "__main__.py", "cli.py", "bootstrap.py", "grading.py"}
MAX_MODULE_LINES = 400


def _module_name(package_root: Path, path: Path) -> str:
    parts = path.relative_to(package_root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package_root: Path) -> dict[str, set[str]]:
    """Each module of the package under `package_root`, and the modules of it that it imports
    (read from its AST: every `import` and `from ... import`, at any depth, inside a function or
    under TYPE_CHECKING alike)."""
    modules = {_module_name(package_root, path): path for path in package_root.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names if alias.name in modules}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules:
                found.add(node.module)
                found |= {f"{node.module}.{alias.name}" for alias in node.names if f"{node.module}.{alias.name}" in modules}
        graph[name] = found - {name}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def test_no_import_circle_among_the_grader_modules(repo):
    """A circle hides which module a reader should read first, and ends in an import that works
    only in one order; the shared piece belongs in a module of its own."""
    circles = import_circles(import_graph(repo / "grader"))
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def test_an_import_circle_is_found(tmp_path):
    package = tmp_path / "grader"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "inner" / "__init__.py").write_text("")
    (package / "a.py").write_text("from grader.inner import b\n")
    (package / "inner" / "b.py").write_text("def f():\n    from grader.c import x\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import grader.a\nx = 1\n")
    (package / "d.py").write_text("from grader import a\n")
    assert import_circles(import_graph(package)) == [["grader.a", "grader.c", "grader.inner.b"]]


def loose_modules(package_root: Path) -> list[str]:
    return sorted(p.name for p in package_root.glob("*.py") if p.name not in TOP_LEVEL)


def test_directly_under_grader_only_what_starts_a_grading(repo):
    """Every other module sits in the package of its stage: grader/'s listing is the pipeline."""
    loose = loose_modules(repo / "grader")
    assert not loose, f"modules directly under grader/: {loose}; move each into the package of its stage"


def test_a_loose_module_is_found(tmp_path):
    (tmp_path / "running").mkdir()
    for name in ("cli.py", "grading.py", "sandbox.py", "running/limits.py"):
        (tmp_path / name).write_text("")
    assert loose_modules(tmp_path) == ["sandbox.py"]


def long_modules(root: Path, limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    """Every Python module under `root/grader` over `limit` lines, by path from `root`."""
    found = {}
    for path in sorted((root / "grader").rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > limit:
            found[path.relative_to(root).as_posix()] = lines
    return found


def test_no_module_over_400_lines(repo):
    """A module one reads in one sitting; a longer one holds more than one thing, split by what
    its parts do."""
    over = long_modules(repo)
    assert not over, f"modules over {MAX_MODULE_LINES} lines: {over}"


def test_a_long_module_is_found(tmp_path):
    (tmp_path / "grader" / "stage").mkdir(parents=True)
    (tmp_path / "grader" / "stage" / "long.py").write_text("x = 1\n" * 401)
    (tmp_path / "grader" / "short.py").write_text("x = 1\n" * 400)
    assert long_modules(tmp_path) == {"grader/stage/long.py": 401}
