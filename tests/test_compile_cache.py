"""What one grading compiles, the next grading of the very same files finds (compile_cache.py).

Per owner and assignment there is one folder, keyed by the submission's files: a changed file
starts an empty one and removes the old, another owner never shares it, and a grading says in its
phases line whether it found an earlier grading's kernels. A real CPU-tier grading, twice, shows
that the children's Triton cache is that folder (the kernels compiled for the GPU target land in
it) and that the second grading reports it warm with the same verdicts.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from grader import compile_cache
from grader.grading import Settings, grade_submission
from grader.spec import REPO_ROOT, load_assignments


def _submission(root: Path, text: str = "") -> Path:
    shutil.copytree(REPO_ROOT / "solutions" / "vector_add", root / "vector_add")
    if text:
        source = root / "vector_add" / "vector_add.py"
        source.write_text(text + source.read_text())
    return root


def test_one_folder_per_owner_and_files(tmp_path):
    cache, student = tmp_path / "cache", _submission(tmp_path / "a")
    first = compile_cache.folder_for(cache, "alice", "vector_add", student / "vector_add")
    assert not compile_cache.is_warm(first)
    (first / "kernel.cubin").write_bytes(b"x")
    again = compile_cache.folder_for(cache, "alice", "vector_add", student / "vector_add")
    assert again == first and compile_cache.is_warm(again), "the same files find the same folder"
    assert compile_cache.folder_for(cache, "bob", "vector_add", student / "vector_add") != first, "never shared"
    (student / "vector_add" / "vector_add.py").write_text("# changed\n")
    changed = compile_cache.folder_for(cache, "alice", "vector_add", student / "vector_add")
    assert changed != first and not compile_cache.is_warm(changed)
    assert not first.exists(), "the owner's folder of the old files is removed"
    assert sorted(p.name for p in changed.parent.iterdir()) == [changed.name]


def test_links_and_python_caches_do_not_change_the_key(tmp_path):
    student = _submission(tmp_path / "a") / "vector_add"
    before = compile_cache.files_digest(student)
    (student / "__pycache__").mkdir()
    (student / "__pycache__" / "vector_add.cpython-312.pyc").write_bytes(b"\0")
    (student / "link.py").symlink_to(REPO_ROOT / "solutions" / "softmax" / "softmax.py")
    assert compile_cache.files_digest(student) == before, "the grader never reads either"
    (student / "notes.txt").write_text("a file the child can read")
    assert compile_cache.files_digest(student) != before


def test_a_second_grading_of_the_same_files_finds_the_kernels_of_the_first(tmp_path):
    cache, student = tmp_path / "cache", _submission(tmp_path / "student", "# student 1\n")
    settings = Settings(device="cpu", cache=cache, owner="student 1")
    (assignment,) = load_assignments(["vector_add"])
    first = grade_submission(student, [assignment], settings)
    (folder,) = (cache / p for p in cache.rglob("*") if p.is_dir() and p.parent.name == "vector_add")
    compiled = [p for p in folder.rglob("*") if p.suffix in (".cubin", ".ptx", ".ttir")]
    assert compiled, "the children's Triton cache is the grading's folder (kernels compiled for the GPU target)"
    second = grade_submission(student, [assignment], settings)
    assert "earlier grading" not in first.environment["phases"]
    assert "kernels compiled by an earlier grading of these files" in second.environment["phases"]
    verdicts = [[(t.name, t.reason, t.score) for t in g.tests] for g in (first, second)]
    assert verdicts[0] == verdicts[1] and first.score == second.score > 0


def test_an_unwritable_cache_folder_costs_only_the_warmth(tmp_path):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder would be")
    (assignment,) = load_assignments(["vector_add"])
    result = grade_submission(_submission(tmp_path / "s"), [assignment], Settings(device="cpu", cache=blocked))
    assert result.score > 0 and "earlier grading" not in result.environment["phases"]
