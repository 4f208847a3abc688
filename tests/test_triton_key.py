"""Triton's digest of its own files, worked out once by the parent and handed to each child
(grader/running/triton_key.py, child/main.py `_use_triton_key`): the same digest Triton works out, read
again without hashing, worked out again when Triton's files change or the file is not the grader's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from grader.assignment.spec import REPO_ROOT

FAKE_CACHE = """
import functools

@functools.lru_cache()
def triton_key():
    with open(__file__.replace("runtime/cache.py", "hashed.log"), "a") as log:
        log.write("hashed\\n")
    return "9.9.9-" + open(__file__.replace("runtime/cache.py", "digest.txt")).read()
"""


def _fake_triton(root: Path, digest: str) -> Path:
    """A package named triton with the files triton_key hashes, and a triton_key that logs each hash."""
    package = root / "triton"
    for folder in ("runtime", "compiler", "backends/nvidia", "language", "_C"):
        (package / folder).mkdir(parents=True, exist_ok=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "runtime" / "cache.py").write_text(FAKE_CACHE)
    (package / "_C" / "libtriton.so").write_bytes(b"\0" * 1000)
    (package / "language" / "core.py").write_text("# the language\n")
    (package / "digest.txt").write_text(digest)
    return package


def _key(root: Path, cache: Path) -> dict:
    """The key a fresh process gets, and whether it imported Triton's cache module for it."""
    probe = ("import json, sys\nfrom grader.running import triton_key\nkey = triton_key.triton_key()\n"
             "print(json.dumps({'key': key, 'imported': 'triton.runtime.cache' in sys.modules}))")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{root}:{REPO_ROOT}", "XDG_CACHE_HOME": str(cache)}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_the_key_is_tritons_own():
    from triton.runtime.cache import triton_key as tritons

    from grader.running import triton_key

    assert triton_key.triton_key() == tritons()


def test_it_is_worked_out_once_and_again_when_tritons_files_change(tmp_path):
    package, cache = _fake_triton(tmp_path / "site", "ab" * 32), tmp_path / "cache"
    first = _key(tmp_path / "site", cache)
    assert first == {"key": "9.9.9-" + "ab" * 32, "imported": True}
    assert _key(tmp_path / "site", cache) == {"key": first["key"], "imported": False}, "read, not hashed"
    assert (package / "hashed.log").read_text() == "hashed\n"
    # An upgrade: the library changes size, and Triton's digest with it.
    (package / "_C" / "libtriton.so").write_bytes(b"\0" * 2000)
    (package / "digest.txt").write_text("cd" * 32)
    assert _key(tmp_path / "site", cache) == {"key": "9.9.9-" + "cd" * 32, "imported": True}
    assert len(list((cache / "kernel-grader" / "triton-key").glob("triton-*.txt"))) == 1, "the older file stays"
    # An edit of one of its language's modules, the same size, later.
    core = package / "language" / "core.py"
    core.write_text("# the LANGUAGE\n")
    os.utime(core, ns=(core.stat().st_atime_ns, core.stat().st_mtime_ns + 10**9))
    (package / "digest.txt").write_text("ef" * 32)
    assert _key(tmp_path / "site", cache)["key"] == "9.9.9-" + "ef" * 32


def test_a_file_that_is_not_the_graders_is_worked_out_again(tmp_path):
    _fake_triton(tmp_path / "site", "ab" * 32)
    cache = tmp_path / "cache"
    _key(tmp_path / "site", cache)
    [kept] = (cache / "kernel-grader" / "triton-key").glob("triton-*.txt")
    for forged in ("", "not a key; rm -rf ~\n", "x" * 3):
        kept.write_text(forged)
        assert _key(tmp_path / "site", cache) == {"key": "9.9.9-" + "ab" * 32, "imported": True}
        assert kept.read_text() == "9.9.9-" + "ab" * 32


def test_a_child_uses_the_key_it_is_handed_before_any_compile():
    probe = ("from grader.child import main\n"
             "main._use_triton_key('3.6.0-handed')\n"
             "from triton.runtime import autotuner, cache\n"
             "print(cache.triton_key(), autotuner.triton_key())")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["3.6.0-handed", "3.6.0-handed"]


def test_a_graded_child_is_handed_the_parents_key(tmp_path, monkeypatch):
    """End to end: a submission whose call reads Triton's key sees the one the grading handed over."""
    from conftest import grade

    from grader.running import triton_key

    monkeypatch.setattr(triton_key, "triton_key", lambda: "3.6.0-handed-by-the-parent")
    folder = tmp_path / "student" / "vector_add"
    folder.mkdir(parents=True)
    (folder / "vector_add.py").write_text(
        "import triton.runtime.cache\n\n\n"
        "def add(x, y):\n"
        "    raise RuntimeError('key: ' + triton.runtime.cache.triton_key())\n"
    )
    graded = grade(tmp_path / "student", ["vector_add"])
    outputs = [t.output for t in graded.tests if t.kind == "correctness"]
    assert outputs and all("key: 3.6.0-handed-by-the-parent" in output for output in outputs), outputs[:1]
