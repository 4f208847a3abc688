"""A student's exception as a reason code and a message that says where in their files it came
from; a dead CUDA context marks the failure fatal, so the next task runs in a fresh process. And
Triton's compiler's words on a kernel it rejects, with the line of the kernel they point at."""

from __future__ import annotations

from pathlib import Path

import torch

from grader.child import dispatch_state, host_reads, imported
from grader.child.launcher import StubNotImplemented
from grader.judging.ops import HOST
from grader.child.submission import SubmissionError, student_frames
from grader.messages.reports import Failure

FATAL_MARKERS = ("CUDA error", "CUDA driver error", "illegal memory access", "unspecified launch failure")
# Triton's errors for a kernel it cannot build or run, their subclasses included (an unsupported
# construct such as `break` is a CompilationError's UnsupportedLanguageConstruct on the GPU).
TRITON_COMPILE_ERRORS = {"CompilationError", "InterpreterError", "OutOfResources", "PTXASError"}


def classify(error: BaseException, root: Path) -> Failure:
    """A student's exception as a reason code and a message that says where it came from."""
    if isinstance(error, SubmissionError):
        return Failure(error.reason, error.message)
    if isinstance(error, imported.LeftRunning):
        return Failure("tampering", str(error))
    if isinstance(error, dispatch_state.LeftBehind):
        # Put back, the harness goes on; where it could not be, a fresh process takes the next task.
        return Failure("tampering", f"your call left torch's state changed, which the grader's own torch calls after "
                       f"it would have run through: {error}", fatal=not error.restored)
    text = f"{type(error).__name__}: {error}".strip()
    where = student_frames(error, root)
    lowered = text.lower()
    if isinstance(error, StubNotImplemented):
        reason, text = "not_implemented", str(error)
    elif isinstance(error, PermissionError) and str(error).startswith(host_reads.REFUSED_PREFIX + HOST):
        reason, text = "forbidden_op", str(error)  # a gateway the guard refused before it moved the call's data
    elif isinstance(error, NotImplementedError):
        reason, text = "not_implemented", "the entry point still raises NotImplementedError: fill in the stub"
    elif isinstance(error, (MemoryError, torch.OutOfMemoryError)) or "out of memory" in lowered or (
        "can't allocate memory" in lowered
    ):
        reason = "out_of_memory"
    elif {kind.__name__ for kind in type(error).__mro__} & TRITON_COMPILE_ERRORS or (
        text.startswith("RuntimeError: Unsupported function referenced")  # Triton's JIT, finding a plain Python call
    ):
        # Under TRITON_INTERPRET=1 a kernel body runs as Python, so what the compiler would
        # reject on a GPU surfaces as an InterpreterError when the kernel runs.
        reason = "compile_error"
    else:
        reason = "crash"
    notes = "".join(f"\n{note}" for note in getattr(error, "__notes__", ()) if isinstance(note, str))
    text += notes  # an autotuner's note names the config that failed
    fatal = any(marker in text for marker in FATAL_MARKERS)  # a dead CUDA context: go on in a fresh process
    return Failure(reason, f"{text[:2000]}\n{where}".rstrip(), fatal)


def compiler_message(error: BaseException, def_line: int) -> tuple[str, int | None]:
    """The compiler's words, the callee's too when the error is in a function the kernel calls,
    and the line of the kernel it points at (Triton counts from the `def`, as line 1)."""
    from triton.compiler.errors import CompilationError

    texts, cause = [], error
    while cause is not None and len(texts) < 4:
        texts.append(f"{type(cause).__name__}: {cause}")
        cause = cause.__cause__
    node = getattr(error, "node", None)
    line = def_line + node.lineno - 1 if isinstance(error, CompilationError) and hasattr(node, "lineno") else None
    return "\n".join(texts), line
