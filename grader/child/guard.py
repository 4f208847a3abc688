"""The child's audit hook (PEP 578): what student code may not do inside the grader's process.

Student code shares this process with the harness, whose frames hold the key that signs the
child's report. CPython raises an audit event for each way into another object's state or out
of Python (ctypes, gc's object walks, frame objects, tracing, subprocesses, loading native code,
writing files) and an audit hook, once added, cannot be removed. The hook below refuses those
events when student code asked for them, raising PermissionError and recording the attempt.

Who asked: walking outward from the event, the first frame that is either a *sanctioned entry*
(a library function the student may call and that does such things on its own behalf: a Triton
launch, which compiles with ptxas and loads its launcher; the grader's CUDA launcher) or *student
code* decides. Student code is whatever is not a real file of the Python installation or of the
grader, including code the student compiles at run time under a borrowed name (compiling under
the name of a trusted file is itself refused). Code below `call` (the one place the harness
hands control to student code), or on a thread the student started, with no sanctioned entry
in between, is the student's. Sanctioned entries are code objects, compared by identity, so
no name can impersonate one. For what the keeper hands out (below), a library module's top-level
code run by an import (one the student's code set off, say) speaks for the library.

No frame is trusted for who called it. A C function has no frame: `functools.partial(exec, SRC)`
handed to Triton as a heuristic, a grid or a hook runs inside Triton's launch, and the event it
raises seems to come from the library frame that called it. So a library or harness frame speaks
for an event only where its own code names a function that raises it (`_RAISED_BY`); code run by
exec is the library's only where library code that names exec ran it, and never where its text is
the student's (a file of the submission, or a name the student compiled under: Triton's
interpreter execs the student's kernel); tampering no launch needs (gc's walks, other threads'
frames, tracing, audit hooks, signals to other processes) is refused under a sanctioned entry
whoever asked; and every callable a submission hands Triton is called through a frame of the
guard's boundary (boundary.py), so that it is the student's wherever Triton calls it.

What is refused splits in two. `tampering`: ctypes, gc's object walks, tracing and monitoring
(an audit hook of the student's own among them: it would see every other event's arguments),
other threads' frames, subprocesses, signals, native code loaded from outside the installation,
files under /proc: no kernel needs them. `refused` (no verdict by itself): frame objects handed
to student code and files written; the student's code gets PermissionError with a message
saying why.

The hook also keeps what the harness took away from student code (switches.py: the profiler's
switches): a gate that stands in for such a function raises KEPT_EVENT, and the hook, which alone
holds the original, hands it over only where the keeper's rule allows it for whoever asked.

What the hook runs is sealed at install: its functions, and those of asker.py (who asked), look up
their globals in a private copy of the two modules' namespaces, with a private copy of the builtins,
and reach `sys._getframe`,
`threading.get_ident` and `os.path.realpath` (over snapshots of `os` and `stat`) through
references taken at import. Student code may rebind a global of either module, a builtin or an
attribute of `sys`: none of that runs inside the hook or changes what it decides. Its state is a
SimpleNamespace (a type no one can add a property to), its sets are frozen, and what an event
hands it (a path, a file name) is read through the methods of str and bytes themselves.
"""

from __future__ import annotations

import builtins
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FunctionType, SimpleNamespace
from typing import Callable

from grader.child.asker import (HARNESS, IMPORT, LIBRARY, STUDENT, _RAISED_BY, _adopt, _asker, _basename,
                                _frame_receiver, _is_library, _names_it, _new_state, _run_by_the_import_system,
                                _student_line, _text)
from grader.child import asker

TAMPERING = "tampering"
REFUSED = "refused"
NOTED = "noted"  # a gateway's use by student code, with what it moved (host_reads.py): no refusal
FRAME = "a frame object (the grader's own frames are one step away from it)"
KEPT_EVENT = "grader.kept"  # a gate asks the hook for the function it stands in for (switches.py)
_TAMPER_EVENTS = frozenset({
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames", "sys._current_exceptions",
    "sys.settrace", "sys.setprofile", "sys._settraceallthreads", "sys._setprofileallthreads",
    "sys.monitoring.register_callback", "sys.addaudithook", "subprocess.Popen", "os.system", "os.exec",
    "os.posix_spawn", "os.spawn", "os.kill", "os.killpg", "signal.pthread_kill", "code.__new__", "function.__new__",
})  # fmt: skip
# Refused under a sanctioned entry whoever asked: no Triton launch needs them, and a callable the
# student handed Triton may raise them there with no frame of its own.
_NEVER_SANCTIONED = frozenset({
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames", "sys._current_exceptions",
    "sys.settrace", "sys.setprofile", "sys._settraceallthreads", "sys._setprofileallthreads",
    "sys.monitoring.register_callback", "sys.addaudithook", "os.kill", "os.killpg", "signal.pthread_kill",
})  # fmt: skip
_FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
# The events the hook's own walk raises (taking the caller's frame, reading each frame's code):
# while it walks, these alone pass unjudged.
_WALK_EVENTS = frozenset({"sys._getframe", "object.__getattr__"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Native code written in Python: foreign functions (cffi) and JIT compilers to machine code (numba,
# llvmlite), and a CUDA driver binding taking host pointers (pycuda). CuPy and cuda-python stay
# importable: what they run on the GPU, the GPU tier's profiler sees and judges.
_NATIVE_MODULES = frozenset({"cffi", "_cffi_backend", "numba", "llvmlite", "pycuda"})
# Taken now: `sys` is a module student code can write to.
_getframe = sys._getframe


@dataclass
class Refusal:
    kind: str  # TAMPERING, REFUSED or NOTED
    what: str  # the event, in words (NOTED: the gateway's name)
    where: str  # the student's file and line, where known
    count: int = 0  # NOTED: the values the gateway moved


def sealed(namespace: dict, *also: dict, **replacing) -> dict:
    """A private copy of a module's namespace (over those of the modules in `also`, whose functions
    it runs, and with `replacing` put in), and of the builtins, in which those modules' functions are
    remade to look up their globals: rebinding a global of any of them or a builtin later changes
    nothing they run. Data they read must be immutable."""
    copy = {name: value for module in (*also, namespace) for name, value in module.items()}
    copy.update(replacing)
    copy["__builtins__"] = dict(vars(builtins))
    owners = [namespace, *also]
    for name, value in list(copy.items()):
        if type(value) is FunctionType and any(value.__globals__ is owner for owner in owners):
            copy[name] = FunctionType(value.__code__, copy, value.__name__, value.__defaults__, value.__closure__)
            copy[name].__kwdefaults__ = value.__kwdefaults__
    return copy


# os.path.realpath over snapshots of `os` and `stat` taken now: it follows links with os.lstat and
# os.readlink, which student code could rebind to make its own .so look like the installation's.
realpath = sealed(vars(os.path), os=SimpleNamespace(**vars(os)), stat=SimpleNamespace(**vars(stat)))["realpath"]


def _verdict(event: str, args: tuple) -> tuple[str, str] | None:
    """(kind, words) of a refusal, if the event is one that student code may not raise."""
    if str.startswith(event, "ctypes."):
        return TAMPERING, f"ctypes ({event})"
    if event in _TAMPER_EVENTS:
        return TAMPERING, event
    attribute = _text(args[1]) if event == "object.__getattr__" and len(args) > 1 else None
    if event == "sys._getframe" or attribute in _FRAME_ATTRIBUTES:
        return REFUSED, FRAME
    if event == "open" and len(args) > 2:
        path, mode, flags = _text(args[0]), _text(args[1]), args[2]
        if path is not None and (str.startswith(path, "/proc/") or path == "/proc"):
            return TAMPERING, f"reading {path}"
        writes = (mode is not None and any(c in mode for c in "wax+")) or (type(flags) is int and flags & _WRITE_FLAGS)
        if writes:
            return REFUSED, f"writing the file {path}" if path is not None else "writing a file"
    if event in ("os.rename", "os.link", "os.symlink", "os.remove", "os.rmdir", "os.mkdir", "os.truncate", "shutil.rmtree"):
        return REFUSED, f"changing files ({event})"
    if event == "import" and args and str.partition(_text(args[0]) or "", ".")[0] in _NATIVE_MODULES:
        return TAMPERING, f"importing {_text(args[0])} (native code from Python)"
    return None


def _native_outside(state: SimpleNamespace, event: str, args: tuple) -> bool:
    """An extension module loaded from outside the installation (a .so the student wrote or brought)."""
    filename = _text(args[1]) if event == "import" and len(args) > 1 else None
    if filename is None:
        return False
    return str.endswith(filename, (".so", ".pyd")) and not _is_library(state, realpath(filename))


def _compiles_under_a_trusted_name(state: SimpleNamespace, event: str, args: tuple) -> bool:
    """Code compiled under the name of a library file that is not that file's text: an import
    compiles the file's own bytes (where no cached bytecode exists); anything else (another text,
    or a syntax tree) borrows a name."""
    filename = _text(args[1]) if event == "compile" and len(args) > 1 else None
    if filename is None or not _is_library(state, filename):
        return False
    source = args[0]  # read through the base types' own methods, as _text does
    if isinstance(source, str):
        source = str.encode(source)
    elif isinstance(source, bytes):
        source = bytes(memoryview(source))
    else:
        return True  # a syntax tree: no file's text
    try:
        with open(filename, "rb") as file:
            return source != file.read()
    except OSError:
        return True


def _judge(state: SimpleNamespace, event: str, args: tuple) -> tuple[str, str] | None:
    verdict = _verdict(event, args)
    if verdict is None and _native_outside(state, event, args):
        verdict = (TAMPERING, f"loading native code from {_basename(_text(args[1]))}")
    if verdict is None and _compiles_under_a_trusted_name(state, event, args):
        verdict = (TAMPERING, f"compiling code under the name of {_text(args[1])}")
    return verdict


def _refuse(state: SimpleNamespace, kind: str, what: str, where: str) -> None:
    state.refusals.append((kind, what, where))
    raise PermissionError(f"the grader refuses {what} in graded code" + (f" ({where})" if where else ""))


def _walked(state: SimpleNamespace, look: Callable, *args):
    """`look(*args)` with the events of the hook's own walk (taking a frame, reading its code)
    passing unjudged on this thread meanwhile."""
    walking = state.walking
    was, walking.on = getattr(walking, "on", False), True
    try:
        return look(*args)
    finally:
        walking.on = was


def _genuine(state: SimpleNamespace, args: tuple, raiser) -> bool:
    """Whether KEPT_EVENT comes from a gate's own code, with what the gate stands for, the call's
    arguments and an empty list for the answer."""
    kept = state.kept
    return kept is not None and id(raiser.f_code) in kept["gates"] and len(args) == 3 and type(args[2]) is list


def _hand_out(state: SimpleNamespace, args: tuple) -> None:
    """A gate asks for the function it stands in for: what the keeper's rule allows goes into the
    list. What the rule allows anyone (a redispatch of a custom op, on every call of it) needs no
    walk; otherwise the walk says who asked: the harness (or a library module's own top level,
    imported on student code's behalf) may get more, student code that raises
    the event itself or asks where the rule refuses is refused as tampering, and a library asking
    where it may not gets nothing (the gate raises)."""
    raiser = _walked(state, _getframe, 3)  # _walked, _hand_out, the hook, then the gate
    genuine = _walked(state, _genuine, state, args, raiser)
    kept, found, what = state.kept, None, f"raising the grader's own audit event {KEPT_EVENT}"
    if genuine:
        found, what = kept["hand_out"](kept, args[0], args[1], False)
        if args[0] in kept["noted"]:
            _walked(state, _note, state, args, raiser.f_back)
    if found is None:
        who, where = _walked(state, _asker, state, raiser.f_back if genuine else raiser, genuine)
        if genuine and who in (HARNESS, IMPORT):
            found, what = kept["hand_out"](kept, args[0], args[1], True)
        if found is None and who == STUDENT:
            _refuse(state, TAMPERING, what, where)
    if found is not None:
        list.append(args[2], found)


def _adopts(state: SimpleNamespace, code, raiser) -> bool:
    """Whether code run by exec at `raiser` is the library's: library code that names exec ran it,
    on no student's behalf, and its text is not the student's (a file of the submission, or a name
    student code compiled under: Triton's interpreter execs a kernel compiled from the student's
    file). Whatever else runs by exec is judged by its file name: the student's."""
    filename = _text(code.co_filename) or ""
    if str.startswith(filename, state.student_root) or filename in state.student_names:
        return False
    if id(raiser.f_code) in state.boundary or not _names_it(raiser, _RAISED_BY["exec"]):
        return False
    return _asker(state, raiser)[0] != STUDENT


def _note_compile(state: SimpleNamespace, args: tuple, raiser) -> None:
    """Remember the file name student code compiles under (a pseudo-name such as "<string>" too)."""
    filename = _text(args[1]) if len(args) > 1 else None
    if filename is not None and _asker(state, raiser)[0] == STUDENT:
        set.add(state.student_names, filename)


def _unvouched(state: SimpleNamespace, event: str, who: str, raiser) -> bool:
    """Whether an event that library or harness code seems to have asked for is not its own: one
    no launch needs, under a sanctioned entry, or one that the raising frame's code never names."""
    if event in _NEVER_SANCTIONED and who == LIBRARY:
        return True
    names = _RAISED_BY.get(event)
    return names is not None and (id(raiser.f_code) in state.boundary or not _names_it(raiser, names))


def _note(state: SimpleNamespace, args: tuple, caller) -> None:
    """A gateway's use (host_reads.py), noted with what it moves where student code asked; one that
    alone moves more than a call may is refused before it moves anything."""
    who, where = _asker(state, caller)
    moved = state.kept["measure"](args[0], args[1]) if who == STUDENT else 0
    if moved:
        state.refusals.append((NOTED, args[0], where, moved))
    refusal = state.kept["refusal"](args[0], moved, where)
    if refusal:
        raise PermissionError(refusal)


def _hook_for(state: SimpleNamespace) -> Callable[[str, tuple], None]:
    def hook(event: str, args: tuple) -> None:
        if event in _WALK_EVENTS and getattr(state.walking, "on", False):
            return  # the hook's own walk
        if event == KEPT_EVENT:
            _hand_out(state, args)
            return
        if event == "exec":
            if args and type(args[0]) is CodeType and not _is_library(state, args[0].co_filename):
                raiser = _walked(state, _getframe, 2)  # _walked, the hook, then the exec
                if _walked(state, _adopts, state, args[0], raiser):
                    _adopt(state, args[0])
            elif args and type(args[0]) is CodeType:
                if _walked(state, _run_by_the_import_system, _walked(state, _getframe, 2)):
                    state.imported[id(args[0])] = args[0]
            return  # a library module's own code (an import) is library code by its file name already
        verdict = _judge(state, event, args)
        if event == "compile" and verdict is None:
            _walked(state, _note_compile, state, args, _walked(state, _getframe, 2))
        if verdict is None:
            return
        raiser = _walked(state, _getframe, 2)  # the frame that raised the event
        if verdict[1] == FRAME:
            who, where = _walked(state, _frame_receiver, state, raiser, event, args)
        else:
            who, where = _walked(state, _asker, state, raiser)
            if who != STUDENT and _walked(state, _unvouched, state, event, who, raiser):
                who, where = STUDENT, _walked(state, _student_line, state, raiser)
        if who == STUDENT:
            _refuse(state, verdict[0], verdict[1], where)

    return hook


def install(student_root: Path, sanctioned: set, boundary: set,
            kept: dict | None = None) -> tuple[Callable[[], list[Refusal]], Callable[[str], bool]]:  # fmt: skip
    """Add the hook; returns a function that hands the harness the refusals so far (and clears
    them), and the test of library code (a file name) that the hook uses. `kept` is what
    switches.take_away took from student code, and the rule by which the hook hands it out."""
    private = sealed(globals(), vars(asker))
    state = private["_new_state"](Path(os.path.realpath(student_root)), sanctioned, boundary, kept)
    sys.addaudithook(private["_hook_for"](state))
    is_library = private["_is_library"]

    def taken() -> list[Refusal]:
        found, state.refusals[:] = list(state.refusals), []
        return [Refusal(*refusal) for refusal in found]

    return taken, lambda filename: is_library(state, filename)


def library_test(student_root: Path) -> Callable[[str], bool]:
    """The hook's test of library code (a file name), without the hook: for a child graded with
    its guard switched off (job.Job.unguarded, tests only)."""
    state = _new_state(Path(os.path.realpath(student_root)), set(), set(), None)
    return lambda filename: _is_library(state, filename)
