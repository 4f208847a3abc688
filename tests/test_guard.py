"""The guard (grader/child/guard.py) tells code objects apart by identity.

A sanctioned library entry (a Triton launch, which compiles and writes files) lets the code under
it do what the guard refuses to student code. Student code can make a code object EQUAL to a
sanctioned one without touching the guard: compile the library file's own text under its own
name (allowed: an import does just that) and exec it into a namespace the student fills. Were
code objects compared by equality, that copy's frames would pass for the sanctioned entry, and
whatever its namespace calls would run unrefused. Each case runs in a process of its own (an
audit hook cannot be removed).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from grader.spec import REPO_ROOT

STUDENT = '''
import shutil


def direct(path):
    open(path, "w").close()


def through_the_entry(path):
    shutil.copyfile(__file__, path)


def through_an_equal_copy(path):
    namespace = {"__name__": "not_shutil"}
    exec(compile(open(shutil.__file__).read(), shutil.__file__, "exec"), namespace)
    assert namespace["copyfile"].__code__ == shutil.copyfile.__code__, "the copy is equal to the entry"
    assert namespace["copyfile"].__code__ is not shutil.copyfile.__code__
    namespace["copyfile"](__file__, path)
'''

HARNESS = '''
import json, shutil, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from grader.child import guard

root = Path(sys.argv[2])


def load():  # the boundary: student code runs below it (as submission.run_module in the child)
    import student

    return student


guard.install(root, {shutil.copyfile.__code__}, {load.__code__})
sys.path.insert(0, str(root))
student = load()

found = {}
for name in ("direct", "through_the_entry", "through_an_equal_copy"):
    try:
        getattr(student, name)(str(root / (name + ".out")))
        found[name] = "allowed"
    except PermissionError as error:
        found[name] = "refused: " + str(error)
print(json.dumps(found))
'''


def test_an_equal_copy_of_a_sanctioned_entry_is_not_sanctioned(tmp_path: Path) -> None:
    (tmp_path / "student.py").write_text(STUDENT)
    done = subprocess.run([sys.executable, "-I", "-c", HARNESS, str(REPO_ROOT), str(tmp_path)], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["direct"].startswith("refused"), found
    assert found["through_the_entry"] == "allowed", found
    assert found["through_an_equal_copy"].startswith("refused"), found
    assert "student.py, line" in found["through_an_equal_copy"], "the refusal names the student's line"
    assert not (tmp_path / "through_an_equal_copy.out").exists()
