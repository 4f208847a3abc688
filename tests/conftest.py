"""Shared helpers: grading a folder through the real pipeline (child processes and all)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grader.grading import Settings, grade_submission
from grader.spec import REPO_ROOT, load_assignments

TESTS = Path(__file__).resolve().parent
SUBMISSIONS = TESTS / "submissions"

requires_gpu = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU: run `make test-gpu` on a machine with one"
)


def grade(submission: Path, assignments: list[str], device: str = "cpu", timeout_s: float | None = None):
    """Grade `submission` (a folder laid out like starter/) and return the Grade."""
    settings = Settings(device=device, timeout_s=timeout_s)
    return grade_submission(submission, load_assignments(assignments), settings)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO_ROOT


def pytest_addoption(parser) -> None:
    parser.addoption("--submission", default=str(REPO_ROOT / "starter"), help="the folder `make bench` times")


@pytest.fixture(scope="session")
def submission_dir(request) -> Path:
    return Path(request.config.getoption("--submission")).resolve()
