"""Loading a student's file by path, and naming what went wrong in words a student can act on.

Student code is never installed: each part's file is compiled (a syntax error is reported
without running anything), then executed as a fresh module whose folder is on sys.path, so a
student may split their work into helper modules beside it.
"""

from __future__ import annotations

import difflib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType


class SubmissionError(Exception):
    """A part cannot be graded; `reason` is one of the reason codes of results.REASONS."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


def student_frames(error: BaseException, root: Path, limit: int = 6) -> str:
    """The traceback lines that point into the student's own files: where to look."""
    chain = []  # the error and what caused it: the interpreter re-raises a kernel's error
    while error is not None and error not in chain:
        chain.append(error)
        error = error.__cause__ or error.__context__
    frames = [
        f for e in reversed(chain) for f in traceback.extract_tb(e.__traceback__) if _inside(f.filename, root)
    ]
    lines = [f"  {Path(f.filename).name}, line {f.lineno}, in {f.name}: {(f.line or '').strip()}" for f in frames]
    return "\n".join(lines[-limit:])


def _inside(filename: str, root: Path) -> bool:
    try:
        return Path(filename).resolve().is_relative_to(root.resolve())
    except (OSError, ValueError):
        return False


def _compile(path: Path):
    try:
        # dont_inherit: the file is compiled as Python imports it, without this module's
        # `from __future__ import annotations` (which would hide a NameError in an annotation).
        return compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    except SyntaxError as error:
        where = f"{path.name}, line {error.lineno}" + (f", column {error.offset}" if error.offset else "")
        text = f"\n    {error.text.rstrip()}" if error.text else ""
        raise SubmissionError("syntax_error", f"{where}: {error.msg}{text}") from None
    except (OSError, ValueError) as error:
        raise SubmissionError("syntax_error", f"{path.name} cannot be read as Python source: {error}") from None


def missing_file_message(path: Path) -> str:
    """What a student reads when a part's file is not there (the parent says it too, for a part
    whose file it finds missing without starting a child)."""
    folder = path.parent
    present = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    hint = f" The folder holds: {', '.join(present)}." if present else f" There is no folder {folder.name}/."
    return f"{folder.name}/{path.name} was not found in the submission.{hint}"


def load_module(path: Path, module_name: str) -> ModuleType:
    if not path.is_file():
        raise SubmissionError("missing_file", missing_file_message(path))
    code = _compile(path)
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        run_module(code, module)
    except ImportError as error:
        where = student_frames(error, path.parent)
        raise SubmissionError("import_error", f"importing {path.name} failed: {error}\n{where}".rstrip()) from None
    except (Exception, SystemExit) as error:
        where = student_frames(error, path.parent)
        message = f"{path.name} raised {type(error).__name__} while being imported: {error}\n{where}"
        raise SubmissionError("import_error", message.rstrip()) from None
    return module


def run_module(code, module: ModuleType) -> None:
    """Student code's top level runs here: the guard (guard.py) counts this frame as the edge
    between the harness and the student, like worker.call for each graded call."""
    exec(code, module.__dict__)


def entry_point(module: ModuleType, path: Path, name: str):
    function = getattr(module, name, None)
    if callable(function):
        return function
    defined = [k for k, v in vars(module).items() if callable(v) and getattr(v, "__module__", None) == module.__name__]
    close = difflib.get_close_matches(name, defined, n=3, cutoff=0.5)
    hint = f" Did you mean to name {', '.join(close)} '{name}'?" if close else ""
    listed = f" It defines: {', '.join(sorted(defined))}." if defined else ""
    raise SubmissionError("missing_entry_point", f"{path.name} must define a function '{name}'.{listed}{hint}")
