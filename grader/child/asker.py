"""Who asked for an event the guard's hook judges (guard.py): the walk outward from the frame that
raised it, over the hook's own state.

The first frame that is a sanctioned entry (a library function that does such things on its own
behalf), a frame of the guard's boundary (a callable of the student's, called for Triton) or
student code decides; reaching the bottom of the main thread with none of them on the way is the
harness. Library code is a real file of the Python installation or of the grader (`_trusted_roots`),
or code such a file compiled and ran (`_adopt`); everything else is the student's.

These functions run inside the hook, sealed with guard.py's (guard.sealed over both namespaces):
rebinding a global of this module after install changes nothing they run. So they read what events
hand them through the methods of str and bytes themselves (`_text`), and `threading.get_ident` through
a reference taken at import.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
from pathlib import Path
from types import CodeType, MappingProxyType, SimpleNamespace

# Who asked for an event: student code, a sanctioned library entry acting on its own behalf, or
# the harness (the bottom of the main thread reached with neither on the way).
STUDENT, LIBRARY, HARNESS = "student", "library", "harness"
# A library module's own top-level code, run by an import that student code set off: what it does
# is the library's (torch registers kernels for its own namespaces as it imports a module lazily).
IMPORT = "import"
# Library functions that hand frame objects to their caller; any other library use of frames
# (typing, namedtuple, enum, logging, traceback's formatting) keeps them to itself.
_FRAME_LEAKERS = frozenset(
    {("inspect", n) for n in ("currentframe", "stack", "trace", "getouterframes", "getinnerframes")}
    | {("traceback", n) for n in ("walk_stack", "walk_tb")}
)

# The names through which code raises each of these events (a call of `sys._getframe`, `os.kill`,
# `exec`...): a library or harness frame whose own code names none of them did not raise the event
# itself, but called something that did, a C function of the student's among the possibilities.
_RAISED_BY = MappingProxyType({
    "exec": ("exec", "eval"), "sys._getframe": ("_getframe",),
    "gc.get_objects": ("get_objects",), "gc.get_referrers": ("get_referrers",), "gc.get_referents": ("get_referents",),
    "sys._current_frames": ("_current_frames",), "sys._current_exceptions": ("_current_exceptions",),
    "sys.settrace": ("settrace",), "sys.setprofile": ("setprofile",),
    "sys._settraceallthreads": ("_settraceallthreads",), "sys._setprofileallthreads": ("_setprofileallthreads",),
    "sys.monitoring.register_callback": ("register_callback",), "sys.addaudithook": ("addaudithook",),
    "os.kill": ("kill",), "os.killpg": ("killpg",), "signal.pthread_kill": ("pthread_kill",),
})  # fmt: skip
# Taken now: `threading` is a module student code can write to.
_get_ident = threading.get_ident


def _new_state(student_root: Path, sanctioned: set, boundary: set, kept: dict | None) -> SimpleNamespace:
    """The hook's own state; only the hook and the harness hold a reference to it.

    Code objects are told apart by identity, never by equality: hashing one hashes its whole
    bytecode and constants (a millisecond per stack walk, over deep imports), and a code object
    the student builds equal to a sanctioned one must not pass for it. Each dict holds its
    objects, so no id is reused while it is in one."""
    return SimpleNamespace(
        student_root=str(student_root) + os.sep,
        trusted=_trusted_roots(student_root),
        sanctioned={id(c): c for c in sanctioned},
        boundary={id(c): c for c in boundary},
        refusals=[],  # (kind, what, where), as Refusal once the harness takes them
        walking=threading.local(),  # .on: this thread's hook is walking its stack
        main=threading.main_thread().ident,
        library_codes={},  # code that library code compiled and ran (a Triton binder)
        student_names=set(),  # file names student code compiled under: what runs under them is the student's
        imported={},  # library modules' top-level code, as the import system ran it (IMPORT)
        kept=kept,  # what switches.take_away took from student code, and its rule
    )


def _trusted_roots(student_root: Path) -> tuple[str, ...]:
    """Real files here are library code: the Python installation and the grader itself. Of the
    import path as it is before student code runs, every folder but the grading's own (its work
    folder, which holds the student's copy and the libraries built from it, and the child's scratch
    and home): a folder whose files student code could have written is never the library's. (A
    repository, and the virtual environment beside it, may lie under /tmp.)"""
    paths = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    grading = os.path.realpath(student_root.parent) + os.sep
    scratch = tuple(os.path.realpath(os.environ[v]) + os.sep for v in ("TMPDIR", "HOME", "TRITON_CACHE_DIR")
                    if os.environ.get(v))  # fmt: skip

    def theirs(folder: str) -> bool:
        # In the sandbox, /tmp is the child's own; what is bound under it read-only is not.
        real = os.path.realpath(folder) + os.sep
        return real.startswith(grading) or (real.startswith(scratch) and os.access(folder, os.W_OK))

    paths.update(p for p in sys.path if p and os.path.isdir(p) and not p.startswith("/dev") and not theirs(p))
    paths.add(str(Path(__file__).resolve().parent.parent))
    roots = {os.path.realpath(p) + os.sep for p in paths}
    # The grader as Python loaded it too: its code objects carry that name, which may pass through a
    # link (.venv/grader-path/grader) that no trusted folder of the import path covers.
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)
    return tuple(sorted(roots))


def _text(value) -> str | None:
    """An event's path or name as a plain str, read without running any method of its own type (a
    str subclass could answer `startswith` as it likes); None for anything else (a file descriptor,
    a path-like object)."""
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bytes):
        return bytes.decode(value, "utf-8", "surrogateescape")
    return None


def _basename(filename: str) -> str:
    return str.rpartition(filename, os.sep)[2]


def _library_frame(state: SimpleNamespace, code) -> bool:
    return id(code) in state.library_codes or _is_library(state, code.co_filename)


def _adopt(state: SimpleNamespace, code) -> None:
    """Code that library code built at run time (exec of a string: a Triton binder, a dataclass
    of the library's) counts as the library's, with every function nested in it."""
    stack = [code]
    while stack:
        current = stack.pop()
        state.library_codes[id(current)] = current
        stack.extend(c for c in current.co_consts if type(c) is CodeType)


def _is_library(state: SimpleNamespace, filename) -> bool:
    filename = _text(filename) or ""
    if str.startswith(filename, "<frozen "):
        return True
    return str.startswith(filename, state.trusted) and not str.startswith(filename, state.student_root)


def _names_it(frame, names: tuple) -> bool:
    """Whether the code of `frame` names one of `names` (a global, an attribute or a method it
    calls): a frame that calls `sys._getframe` itself holds "_getframe" among its names."""
    held = frame.f_code.co_names
    return any(name in held for name in names)


def _student_line(state: SimpleNamespace, frame) -> str:
    """The innermost line of the student's own code outward from `frame`, or ""."""
    while frame is not None:
        if not _library_frame(state, frame.f_code):
            return _line(frame)
        frame = frame.f_back
    return ""


def _asker(state: SimpleNamespace, frame, imports: bool = False) -> tuple[str, str]:
    """Who asked for the event at `frame` (STUDENT, LIBRARY or HARNESS; with `imports`, IMPORT
    where a library module's top level comes first), and the student's innermost line where
    student code asked."""
    while frame is not None:
        code = frame.f_code
        if id(code) in state.sanctioned:
            return LIBRARY, ""
        if id(code) in state.boundary:
            return STUDENT, _student_line(state, frame.f_back)
        if frame.f_back is None and _get_ident() == state.main:
            return HARNESS, ""  # the bottom of the main thread: the harness's boot code
        if not _library_frame(state, code):
            return STUDENT, _line(frame)
        if imports and id(code) in state.imported:
            return IMPORT, ""
        frame = frame.f_back
    # The bottom of the stack without meeting student code: the harness's own work, unless the
    # thread is one the student started (its bottom is threading's bootstrap, library code).
    return (STUDENT if _get_ident() != state.main else HARNESS), ""


def _run_by_the_import_system(runner) -> bool:
    """Whether the exec that `runner` called is an import's: a loader's `exec_module` running a
    module's top-level code, and not student code running a library file's text under its name.
    (Student code that drives a loader by hand, over a module of its own, passes for an import.)"""
    loader = runner.f_back if runner is not None else None
    return (loader is not None and _text(runner.f_code.co_name) == "_call_with_frames_removed"
            and _text(runner.f_code.co_filename) == "<frozen importlib._bootstrap>"
            and _text(loader.f_code.co_name) == "exec_module"
            and _text(loader.f_code.co_filename) == "<frozen importlib._bootstrap_external>")  # fmt: skip


def _hands_out_a_frame(state: SimpleNamespace, accessor, names: tuple) -> bool:
    """Whether the frame just taken reaches student code: taken by it, by a callable of the
    student's that the boundary called or that library code called without naming what takes
    frames (a C function has no frame of its own), or by a library function that returns frames
    (inspect.stack, traceback.walk_tb) to it."""
    filename = accessor.f_code.co_filename
    if not _is_library(state, filename) or id(accessor.f_code) in state.boundary or not _names_it(accessor, names):
        return True
    module = str.rpartition(_basename(_text(filename) or ""), ".")[0]
    if (module, _text(accessor.f_code.co_name)) not in _FRAME_LEAKERS:
        return False
    consumer = accessor.f_back
    return consumer is not None and not _is_library(state, consumer.f_code.co_filename)


def _frame_receiver(state: SimpleNamespace, accessor, event: str, args: tuple) -> tuple[str, str]:
    names = _RAISED_BY["sys._getframe"] if event == "sys._getframe" else (_text(args[1]),)
    if not _hands_out_a_frame(state, accessor, names):
        return LIBRARY, ""
    return STUDENT, (_line(accessor) if not _is_library(state, accessor.f_code.co_filename)
                     else _student_line(state, accessor))  # fmt: skip


def _line(frame) -> str:
    return f"{_basename(_text(frame.f_code.co_filename) or '?')}, line {int(frame.f_lineno or 0)}"
