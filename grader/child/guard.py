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
no name can impersonate one.

What is refused splits in two. `tampering`: ctypes, gc's object walks, tracing, other threads'
frames, subprocesses, signals, native code loaded from outside the installation, files under
/proc: no kernel needs them. `refused` (no verdict by itself): frame objects handed to student
code and files written; the student's code gets PermissionError with a message saying why.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

TAMPERING = "tampering"
REFUSED = "refused"
FRAME = "a frame object (the grader's own frames are one step away from it)"
# Library functions that hand frame objects to their caller; any other library use of frames
# (typing, namedtuple, enum, logging, traceback's formatting) keeps them to itself.
_FRAME_LEAKERS = {("inspect", n) for n in ("currentframe", "stack", "trace", "getouterframes", "getinnerframes")}
_FRAME_LEAKERS |= {("traceback", n) for n in ("walk_stack", "walk_tb")}

_TAMPER_EVENTS = {
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames", "sys._current_exceptions",
    "sys.settrace", "sys.setprofile", "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
    "os.kill", "os.killpg", "signal.pthread_kill", "code.__new__", "function.__new__",
}  # fmt: skip
_FRAME_ATTRIBUTES = {"tb_frame", "gi_frame", "cr_frame", "ag_frame"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Native code written in Python: foreign functions (cffi) and JIT compilers to machine code (numba,
# llvmlite), and a CUDA driver binding taking host pointers (pycuda). CuPy and cuda-python stay
# importable: what they run on the GPU, the GPU tier's profiler sees and judges.
_NATIVE_MODULES = {"cffi", "_cffi_backend", "numba", "llvmlite", "pycuda"}


@dataclass
class Refusal:
    kind: str  # TAMPERING or REFUSED
    what: str  # the event, in words
    where: str  # the student's file and line, where known


class _State:
    """The hook's own state; only the hook and the harness hold a reference to it."""

    def __init__(self, student_root: Path, sanctioned: set, boundary: set):
        self.student_root = str(student_root) + os.sep
        self.trusted = _trusted_roots()
        # Code objects are told apart by identity, never by equality: hashing one hashes its whole
        # bytecode and constants (a millisecond per stack walk, over deep imports), and a code
        # object the student builds equal to a sanctioned one must not pass for it. Each set holds
        # its objects, so no id is reused while it is in a set.
        self.sanctioned, self.boundary = {id(c): c for c in sanctioned}, {id(c): c for c in boundary}
        self.refusals: list[Refusal] = []
        self.busy = threading.local()
        self.main = threading.main_thread().ident
        self.library_codes: dict[int, object] = {}  # code that library code compiled and ran (a Triton binder)


def _trusted_roots() -> tuple[str, ...]:
    """Real files here are library code: the Python installation and the grader itself."""
    paths = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    paths.update(p for p in sys.path if p and os.path.isdir(p) and not p.startswith(("/tmp", "/dev")))
    paths.add(str(Path(__file__).resolve().parent.parent))
    return tuple(sorted({os.path.realpath(p) + os.sep for p in paths}))


def _library_frame(state: _State, code) -> bool:
    return id(code) in state.library_codes or _is_library(state, code.co_filename)


def _adopt(state: _State, code) -> None:
    """Code that library code built at run time (exec of a string: a Triton binder, a dataclass
    of the library's) counts as the library's, with every function nested in it."""
    stack = [code]
    while stack:
        current = stack.pop()
        state.library_codes[id(current)] = current
        stack.extend(c for c in current.co_consts if hasattr(c, "co_code"))


def _is_library(state: _State, filename: str) -> bool:
    if filename.startswith("<frozen "):
        return True
    return filename.startswith(state.trusted) and not filename.startswith(state.student_root)


def _student_origin(state: _State, frame) -> tuple[bool, str]:
    """(whether student code asked for the event at `frame`, the student's innermost line)."""
    while frame is not None:
        code = frame.f_code
        if id(code) in state.sanctioned:
            return False, ""
        if id(code) in state.boundary:
            return True, ""
        if frame.f_back is None and threading.get_ident() == state.main:
            return False, ""  # the bottom of the main thread: the harness's boot code
        if not _library_frame(state, code):
            return True, _line(frame)
        frame = frame.f_back
    # The bottom of the stack without meeting student code: the harness's own work, unless the
    # thread is one the student started (its bottom is threading's bootstrap, library code).
    return threading.get_ident() != state.main, ""


def _hands_out_a_frame(state: _State, accessor) -> bool:
    """Whether the frame just taken reaches student code: taken by it, or by a library function
    that returns frames (inspect.stack, traceback.walk_tb) to it."""
    if not _is_library(state, accessor.f_code.co_filename):
        return True
    module = Path(accessor.f_code.co_filename).stem
    if (module, accessor.f_code.co_name) not in _FRAME_LEAKERS:
        return False
    consumer = accessor.f_back
    return consumer is not None and not _is_library(state, consumer.f_code.co_filename)


def _line(frame) -> str:
    return f"{Path(frame.f_code.co_filename).name}, line {frame.f_lineno}"


def _verdict(event: str, args: tuple) -> tuple[str, str] | None:
    """(kind, words) of a refusal, if the event is one that student code may not raise."""
    if event.startswith("ctypes."):
        return TAMPERING, f"ctypes ({event})"
    if event in _TAMPER_EVENTS:
        return TAMPERING, event
    if event == "sys._getframe" or (event == "object.__getattr__" and len(args) > 1 and args[1] in _FRAME_ATTRIBUTES):
        return REFUSED, FRAME
    if event == "open" and len(args) > 2:
        path, mode, flags = args[0], args[1], args[2]
        if isinstance(path, str) and (path.startswith("/proc/") or path == "/proc"):
            return TAMPERING, f"reading {path}"
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (isinstance(flags, int) and flags & _WRITE_FLAGS)
        if writes:
            return REFUSED, f"writing the file {path}"
    if event in ("os.rename", "os.link", "os.symlink", "os.remove", "os.rmdir", "os.mkdir", "os.truncate", "shutil.rmtree"):
        return REFUSED, f"changing files ({event})"
    if event == "import" and args and str(args[0]).split(".")[0] in _NATIVE_MODULES:
        return TAMPERING, f"importing {args[0]} (native code from Python)"
    return None


def _native_outside(state: _State, event: str, args: tuple) -> bool:
    """An extension module loaded from outside the installation (a .so the student wrote or brought)."""
    if event != "import" or len(args) < 2 or not isinstance(args[1], str):
        return False
    filename = args[1]
    return filename.endswith((".so", ".pyd")) and not _is_library(state, os.path.realpath(filename))


def _compiles_under_a_trusted_name(state: _State, event: str, args: tuple) -> bool:
    """Code compiled under the name of a library file that is not that file's text: an import
    compiles the file's own bytes (where no cached bytecode exists); anything else borrows a name."""
    if event != "compile" or len(args) < 2 or not isinstance(args[1], str) or not _is_library(state, args[1]):
        return False
    source = args[0]
    try:
        text = Path(args[1]).read_bytes()
    except OSError:
        return True
    return (source.encode() if isinstance(source, str) else source) != text


def install(student_root: Path, sanctioned: set, boundary: set) -> tuple[Callable[[], list[Refusal]], Callable[[str], bool]]:
    """Add the hook; returns a function that hands the harness the refusals so far (and clears
    them), and the test of library code (a file name) that the hook uses."""
    state = _State(Path(os.path.realpath(student_root)), sanctioned, boundary)

    def judge(event: str, args: tuple) -> tuple[str, str] | None:
        verdict = _verdict(event, args)
        if verdict is None and _native_outside(state, event, args):
            verdict = (TAMPERING, f"loading native code from {Path(args[1]).name}")
        if verdict is None and _compiles_under_a_trusted_name(state, event, args):
            verdict = (TAMPERING, f"compiling code under the name of {args[1]}")
        return verdict

    def hook(event: str, args: tuple) -> None:
        if getattr(state.busy, "on", False):
            return  # the hook's own frame walk raises events too
        if event == "exec" and args and hasattr(args[0], "co_code"):
            if _is_library(state, args[0].co_filename):
                return  # a library module's own code (an import): library code by its file name already
            state.busy.on = True
            try:
                if not _student_origin(state, sys._getframe(1))[0]:
                    _adopt(state, args[0])
            finally:
                state.busy.on = False
            return
        verdict = judge(event, args)
        if verdict is None:
            return
        state.busy.on = True
        try:
            frame = sys._getframe(1)
            if verdict[1] == FRAME:
                student, where = _hands_out_a_frame(state, frame), _line(frame)
            else:
                student, where = _student_origin(state, frame)
        finally:
            state.busy.on = False
        if not student:
            return
        kind, what = verdict
        state.refusals.append(Refusal(kind, what, where))
        raise PermissionError(f"the grader refuses {what} in graded code" + (f" ({where})" if where else ""))

    sys.addaudithook(hook)

    def taken() -> list[Refusal]:
        found, state.refusals[:] = list(state.refusals), []
        return found

    return taken, lambda filename: _is_library(state, filename)


def sanctioned_entries() -> set:
    """The library functions student code may call even though they do what the hook refuses:
    launching a Triton kernel (compiling it, loading its launcher, calling the driver)."""
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime import autotuner, jit

    # CompiledKernel._init_handles loads a kernel compiled by `kernel.warmup(...)` (building its
    # launcher in Triton's cache), which Triton's second tutorial calls itself.
    entries = {jit.JITFunction.run, jit.KernelInterface.__getitem__, autotuner.Autotuner.run, autotuner.Heuristics.run,
               CompiledKernel._init_handles}  # fmt: skip
    codes = {getattr(f, "__code__", None) for f in entries}
    for code in list(codes):  # the lambda that `kernel[grid]` returns lives among its function's constants
        codes.update(c for c in getattr(code, "co_consts", ()) if hasattr(c, "co_filename"))
    try:
        from triton.runtime.interpreter import InterpretedFunction

        codes.update({InterpretedFunction.run.__code__, InterpretedFunction.__call__.__code__})
    except ImportError:
        pass
    codes.discard(None)
    return codes
