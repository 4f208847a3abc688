"""The documentation's commands as a reader types them. Each command of the README, docs/ and the
handouts (a line of a shell block, or inline code that starts one) either runs as written in a
fresh checkout, or, where it needs what a test cannot give it (a placeholder to fill, a GPU, a
graded class, the whole test suite), names a subcommand and options the grader's parser takes and
a Makefile target that exists. `make grade` itself runs in test_student_view.py.

Issue 54: the TA docs' `python -m grader ...` failed from the system Python with a raw
ModuleNotFoundError, and `make bench` without a GPU said so last, under 76 skips and two warnings."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest
import torch

from conftest import fresh_checkout
from grader.assignment.spec import REPO_ROOT
from grader.cli import _parser

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
GRADER = re.compile(r"^(?:[A-Z_]+=\S+\s+)*(\S*python\S*)\s+-m\s+grader\s+([a-z][\w-]*)(.*)$")
MAKE = re.compile(r"^make\s+([\w./-]+)(.*)$")
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_]{2,}\b|\bdir\b|\.\.\.|\[|\|")
NEEDS_A_GPU = re.compile(r"--device cuda|\bprofile\b|test-gpu")
NEEDS_A_CLASS = re.compile(r"grader (?:batch|override|tokens|serve|submit)\b|^make (?:batch|submit)\b")  # or a server
WHOLE_SUITE = re.compile(r"^make (?:test|test-slow|release|grade)\b")  # long, or run by test_student_view.py


def documents() -> list:
    docs = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    return docs + sorted((REPO_ROOT / "assignments").glob("*/README.md"))


def commands(text: str) -> list[str]:
    """The commands `text` gives: each line of a shell block (continuations joined, comments
    after two spaces cut), and inline code that starts with make or a Python."""
    found = []
    for language, body in FENCE.findall(text):
        if language in ("", "bash", "sh", "shell"):
            for line in re.sub(r"\s*\\\n\s*", " ", body).splitlines():
                found.append(re.split(r"\s{2,}#", line)[0].strip())
    found += [code.strip() for code in INLINE.findall(FENCE.sub("", text))]
    return [c for c in found if GRADER.match(c) or MAKE.match(c)]


def _all() -> list[tuple[str, str]]:
    return sorted({(doc.relative_to(REPO_ROOT).as_posix(), c) for doc in documents() for c in commands(doc.read_text())})


def test_commands_are_found_in_the_docs():
    found = [c for _, c in _all()]
    assert ".venv/bin/python -m grader grade --assignment softmax" in found and "make bench" in found
    assert commands("```\nmake grade     # grade starter/\npython -m grader batch X \\\n  --out Y\n```\n") == [
        "make grade", "python -m grader batch X --out Y"]  # fmt: skip


@pytest.mark.parametrize("doc, command", _all())
def test_each_command_names_what_runs_it(doc, command):
    """A grader command runs with the Python of `.venv/` (the system's has none of its packages),
    names a subcommand and options the parser takes; a make command names a target of the Makefile
    and variables it reads."""
    if found := GRADER.match(command):
        python, sub, rest = found.groups()
        assert python == ".venv/bin/python", f"{doc}: `{command}`: write `.venv/bin/python -m grader`, which `make` sets up"
        parsers = _parser()._subparsers._group_actions[0].choices
        assert sub in parsers, f"{doc}: `{command}`: no subcommand {sub!r}"
        known = {o for action in parsers[sub]._actions for o in action.option_strings}
        unknown = set(re.findall(r"(?<!\S)(--[\w-]+)", rest)) - known
        assert not unknown, f"{doc}: `{command}`: {sub} takes no {sorted(unknown)}"
    else:
        target, rest = MAKE.match(command).groups()
        makefile = (REPO_ROOT / "Makefile").read_text().replace("$(VENV)", ".venv")
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"{doc}: `{command}`: no target {target}"
        for variable in re.findall(r"(\w+)=", rest):
            assert f"$({variable})" in makefile, f"{doc}: `{command}`: the Makefile reads no {variable}"


def runnable() -> list[str]:
    """The commands to run as written: no placeholder, no GPU, no course or server, not the suite."""
    skip = (PLACEHOLDER, NEEDS_A_GPU, NEEDS_A_CLASS, WHOLE_SUITE)
    return sorted({c for _, c in _all() if not any(pattern.search(c) for pattern in skip)})


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    return fresh_checkout(tmp_path_factory.mktemp("checkout"))


@pytest.mark.parametrize("command", runnable())
def test_the_command_runs_as_written_in_a_fresh_checkout(checkout, command):
    if command.startswith("make bench") and torch.cuda.is_available():
        pytest.skip("on a GPU make bench times every benchmark: test_make_bench_without_a_gpu_says_so_first")
    root, env = checkout
    done = subprocess.run(shlex.split(command), cwd=root, env={**env, "COLUMNS": "100"}, capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 0 and "Traceback" not in said, f"`{command}` exited {done.returncode}:\n{said[-3000:]}"


def test_make_bench_without_a_gpu_says_so_first(checkout):
    if torch.cuda.is_available():
        pytest.skip("there is a GPU here: make bench times every benchmark")
    root, env = checkout
    done = subprocess.run(["make", "bench"], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    lines = (done.stdout + done.stderr).splitlines()
    assert done.returncode == 0 and lines[0].startswith("make bench: benchmarks need a CUDA GPU"), lines[:5]
    assert len(lines) <= 3 and "Warning" not in done.stderr, "said plainly, without pytest's skips and warnings"


def test_python_m_grader_from_a_python_without_its_packages_says_how_to_reach_it(checkout):
    """`python -S` leaves out every installed package: the system's Python, as far as the grader knows."""
    root, env = checkout
    done = subprocess.run([sys.executable, "-S", "-m", "grader", "grade", "--assignment", "softmax"], cwd=root,
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "has no module" in done.stderr and ".venv/bin/python -m grader grade --assignment softmax" in done.stderr
