"""Shared helpers: grading a folder through the real pipeline (child processes and all)."""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
import tomllib
from pathlib import Path

import pytest
import torch

from grader.grading import Settings, grade_submission
from grader.spec import REPO_ROOT, load_assignments

TESTS = Path(__file__).resolve().parent
SUBMISSIONS = TESTS / "submissions"

# The CPU-tier vector_add folders that test_hostile_batch.py grades as students of ONE batch: all
# but the spinning `infinite_loop`. That batch checks each for its expect.toml reason, as
# test_wrong_submissions.py checks every other folder; test_wrong_submissions.py grades these
# itself only where the batch cannot run (no dask's distributed): no folder is graded twice for one check.
SPINS = "infinite_loop"
HOSTILE_BATCH_RUNS = importlib.util.find_spec("distributed") is not None

requires_gpu = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU: run `make test-gpu` on a machine with one"
)


def grade(submission: Path, assignments: list[str], device: str = "cpu", timeout_s: float | None = None,
          parts: list[str] | None = None, sandbox: bool = True):  # fmt: skip
    """Grade `submission` (a folder laid out like starter/) and return the Grade. `parts`, where
    given, grades only the parts of those names (the ones a known-wrong submission is about);
    `sandbox=False` grades as a machine that refuses namespaces would."""
    settings = Settings(device=device, timeout_s=timeout_s, sandbox=sandbox)
    chosen = load_assignments(assignments)
    if parts:
        chosen = [dataclasses.replace(a, parts=tuple(p for p in a.parts if p.name in parts)) for a in chosen]
    return grade_submission(submission, chosen, settings)


def hostile_batch_expectations() -> dict[str, dict]:
    """Each CPU-tier vector_add folder's expect.toml but the spinning one's, by folder name (the
    student's name in the hostile batch)."""
    paths = sorted((SUBMISSIONS / "vector_add").glob("*/expect.toml"))
    found = {path.parent.name: tomllib.loads(path.read_text()) for path in paths}
    return {name: expect for name, expect in found.items() if expect.get("tier", "both") != "gpu" and name != SPINS}


def known_wrong(folder: Path, root: Path) -> Path:
    """The submission that a folder under submissions/ stands for, ready to grade.

    A folder whose expect.toml lists `edits` holds no code: it stands for solutions/<assignment>/
    with each edit made (in `file`, the text `old`, which must occur exactly once, becomes
    `new`), written under `root`. The bug is then exactly those lines, and it follows every
    change to the solution; an edit that no longer applies fails here, by name. Any other folder
    (a hostile submission written from scratch) is the submission itself."""
    edits = tomllib.loads((folder / "expect.toml").read_text()).get("edits")
    if not edits:
        return folder
    assignment = folder.parent.name
    tree = root / f"{assignment}-{folder.name}"
    shutil.copytree(REPO_ROOT / "solutions" / assignment, tree / assignment,
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    for number, edit in enumerate(edits, 1):
        path = tree / assignment / edit["file"]
        text = path.read_text()
        found = text.count(edit["old"])
        assert found == 1, (f"{assignment}/{folder.name}: edit {number} finds its old text {found} times in "
                            f"solutions/{assignment}/{edit['file']}, not once: the solution changed, update the edit")
        path.write_text(text.replace(edit["old"], edit["new"]))
    return tree


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO_ROOT


def pytest_addoption(parser) -> None:
    parser.addoption("--submission", default=str(REPO_ROOT / "starter"), help="the folder `make bench` times")


@pytest.fixture(scope="session")
def submission_dir(request) -> Path:
    return Path(request.config.getoption("--submission")).resolve()


# Tests that share a costly module-scoped fixture (a whole batch, the solutions' grading, a release
# bundle's own `make test`) run on one pytest-xdist worker together, so the fixture is built once:
# each is put in an xdist group named after its module (the Makefile runs `--dist loadgroup`).
# Every other test, in the same module or not, is scheduled on its own. A wrapper, so the groups
# are set before any plugin's own hook: pytest-xdist reads them in its collection hook, which runs
# before a conftest's; and pytest stays below 9 (grader/bootstrap.py), whose node ids ignore the
# group xdist 3.8 appends. Without both, each costly fixture was built on both workers (the
# hostile batch twice, 345 s each). test_layout.py proves the grouping holds.
@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        definitions = getattr(item, "_fixtureinfo", None)
        shared = definitions and any(
            defs and defs[-1].scope == "module" for defs in definitions.name2fixturedefs.values()
        )  # fmt: skip
        if shared:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    return (yield)
