"""The set-up's byte-compiling of packages a GPU image lends the venv (grader/bootstrap.py): what a
grading imports from them is compiled once, in place, and nothing else is touched."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from grader import bootstrap


@pytest.fixture
def lent(tmp_path, monkeypatch) -> Path:
    """A site-packages folder as an image lends it: no bytecode cache, and none written on import."""
    root = tmp_path / "site-packages"
    (root / "alpha").mkdir(parents=True)
    (root / "alpha" / "__init__.py").write_text("")
    (root / "alpha" / "sub.py").write_text("import beta\n")
    (root / "alpha" / "unused.py").write_text("VALUE = 1\n")  # in an imported package: compiled with it
    (root / "beta.py").write_text("VALUE = 2\n")
    (root / "gamma").mkdir()
    (root / "gamma" / "__init__.py").write_text("")  # never imported
    (root / "broken.py").write_text("raise RuntimeError('an import that fails')\n")
    monkeypatch.setenv("PYTHONPATH", str(root))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    return root


def test_the_packages_an_import_loads_are_found_by_their_top_folder(lent):
    found = bootstrap.reused_packages(Path(sys.executable), [str(lent)], ["alpha.sub", "broken"])
    assert found == [lent / "alpha", lent / "beta.py"]


def test_they_are_compiled_in_place_and_nothing_else_is(lent):
    unwritable = bootstrap.byte_compile_reused(Path(sys.executable), [str(lent)], ["alpha.sub"])
    assert unwritable == []
    assert {p.name.split(".")[0] for p in (lent / "alpha" / "__pycache__").glob("*.pyc")} == {"__init__", "sub", "unused"}
    assert list((lent / "__pycache__").glob("beta.*.pyc"))
    assert not (lent / "gamma" / "__pycache__").exists()
    assert not list((lent / "__pycache__").glob("broken.*.pyc"))


def test_a_folder_this_user_cannot_write_is_named_and_left_alone(lent, monkeypatch):
    """Read-only for this user (as root, who may write anywhere, the check is what os.access says)."""
    real = os.access
    monkeypatch.setattr(bootstrap.os, "access", lambda path, mode: real(path, mode) and Path(path) != lent / "alpha")
    unwritable = bootstrap.byte_compile_reused(Path(sys.executable), [str(lent)], ["alpha.sub"])
    assert unwritable == [lent / "alpha"]
    assert not (lent / "alpha" / "__pycache__").exists()
    assert list((lent / "__pycache__").glob("beta.*.pyc"))


def test_an_installation_with_bytecode_is_left_as_it_is(lent):
    """Where the first package already has its bytecode (pip wrote it), nothing is imported or compiled."""
    import py_compile

    py_compile.compile(str(lent / "alpha" / "__init__.py"), doraise=True)
    assert not bootstrap.lacks_bytecode(Path(sys.executable), ["alpha.sub"])
    assert bootstrap.byte_compile_reused(Path(sys.executable), [str(lent)], ["alpha.sub"]) == []
    assert not list((lent / "alpha" / "__pycache__").glob("sub.*.pyc"))
    assert not (lent / "__pycache__").exists()
