"""The guard (grader/child/guard.py): what student code may not do in the child, and who may not.

It tells code objects apart by identity. A sanctioned library entry (a Triton launch, which
compiles and writes files) lets the code under it do what the guard refuses to student code.
Student code can make a code object EQUAL to a sanctioned one without touching the guard: compile
the library file's own text under its own name (allowed: an import does just that) and exec it
into a namespace the student fills. Were code objects compared by equality, that copy's frames
would pass for the sanctioned entry, and whatever its namespace calls would run unrefused.

Its hook runs nothing student code can rebind: the guard's globals, a builtin, `sys._getframe`,
`threading.get_ident`, a str subclass for a path; and student code may add no audit hook of its own.
Each case runs in a process of its own (an audit hook cannot be removed).
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


REBINDS = '''
import builtins, gc, sys, threading


def _gc_objects():
    return len(gc.get_objects())


def a_guard_global():
    import grader.child.guard as guard

    guard._asker = lambda state, frame: ("harness", "")
    guard._TAMPER_EVENTS = frozenset()
    return _gc_objects()


def _runs_inside_the_hook(owner, name, make):
    """Rebind owner.name with a function that asks for gc's objects if the hook ever runs it."""
    real, ran = getattr(owner, name), []

    def spy(*args, **kwargs):
        if not ran:
            ran.append(True)
            _gc_objects()
        return make(real)(*args, **kwargs)

    setattr(owner, name, spy)
    try:
        open("written.out", "w")  # refused: the hook walks the stack
    except PermissionError:
        pass
    finally:
        setattr(owner, name, real)
    return "ran inside the hook" if ran else "never ran"


def a_builtin():
    return _runs_inside_the_hook(builtins, "id", lambda real: real)


def sys_getframe():
    return _runs_inside_the_hook(sys, "_getframe", lambda real: lambda depth=0: real(depth + 1))


def threading_get_ident():
    return _runs_inside_the_hook(threading, "get_ident", lambda real: real)


def a_str_that_lies():
    class Harmless(str):
        def startswith(self, *args):
            return False

    return open(Harmless("/proc/self/status")).read()[:10]


def a_bytes_path():
    return open(b"/proc/self/status").read()[:10]


def an_audit_hook_of_its_own():
    seen = []
    sys.addaudithook(lambda event, args: seen.append(event))
    sys.audit("student.probe")
    return "the hook was added" if seen else "no hook was added"


def the_kept_event():
    sys.audit("grader.kept", "torch._C._autograd._disable_profiler", (), [])
'''

REBINDS_HARNESS = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from grader.child import guard

root = Path(sys.argv[2])


def load():
    import student

    return student


taken, _ = guard.install(root, set(), {load.__code__})
sys.path.insert(0, str(root))
student = load()
found = {}
for name in ("a_guard_global", "a_builtin", "sys_getframe", "threading_get_ident", "a_str_that_lies", "a_bytes_path",
             "an_audit_hook_of_its_own", "the_kept_event"):
    try:
        found[name] = "allowed: " + str(getattr(student, name)())
    except PermissionError as error:
        found[name] = "refused: " + str(error)
print(json.dumps({"found": found, "tampering": [r.what for r in taken() if r.kind == guard.TAMPERING]}))
"""


def _run(harness: str, student: str, root: Path, timeout: float = 60) -> dict:
    (root / "student.py").write_text(student)
    done = subprocess.run([sys.executable, "-I", "-c", harness, str(REPO_ROOT), str(root)], capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_hook_runs_nothing_student_code_can_rebind(tmp_path: Path) -> None:
    result = _run(REBINDS_HARNESS, REBINDS, tmp_path)
    found = result["found"]
    assert found["a_guard_global"].startswith("refused: the grader refuses gc.get_objects"), found
    for name in ("a_builtin", "sys_getframe", "threading_get_ident"):
        assert found[name] == "allowed: never ran", f"{name}: student code ran inside the hook ({found[name]})"
    for name in ("a_str_that_lies", "a_bytes_path"):
        assert found[name].startswith("refused: the grader refuses reading /proc/self/status"), found[name]
    assert found["an_audit_hook_of_its_own"] == "allowed: no hook was added", found
    assert "sys.addaudithook" in result["tampering"], result["tampering"]
    assert found["the_kept_event"].startswith("refused: the grader refuses raising the grader's own audit event"), found

