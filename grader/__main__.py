"""`python -m grader`: the command line (grader/cli.py), run by the Python of `.venv/`."""

import os
import signal
import sys
from pathlib import Path

from grader.running import ctrl_c, early_workers, workdirs


def _end_by_ctrl_c() -> None:
    """A Ctrl-C said in one line, not a traceback, and the process then ended by the signal itself,
    as Python ends on one it does not catch: a shell's loop or `make` stops on it as on any Ctrl-C."""
    sys.stdout.flush()
    sys.stderr.write("interrupted (Ctrl-C)\n")
    sys.stderr.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    os._exit(130)  # where the signal is blocked


try:
    with ctrl_c.held():  # a Ctrl-C while the packages load is taken once they have (running/ctrl_c.py)
        early_workers.start(sys.argv[1:])  # a GPU grade's side-by-side workers import meanwhile
        from grader.cli import main
except KeyboardInterrupt:
    _end_by_ctrl_c()
except ModuleNotFoundError as missing:
    # Another Python than .venv/'s (the system's, say) lacks the grader's packages: say how to reach
    # the grader instead of a traceback. A module of the grader's own that is missing is a fault.
    if (missing.name or "grader").partition(".")[0] == "grader":
        raise
    root = Path(__file__).resolve().parent.parent
    venv = root / ".venv" / "bin" / "python"
    shown = os.path.relpath(venv) if Path.cwd() == root else str(venv)
    ready = "" if venv.exists() else f" (`make grade`, or `make .venv/.ready`, in {root} sets it up first)"
    sys.stderr.write(f"python -m grader: this Python ({sys.executable}) has no module '{missing.name}', which the "
                     f"grader needs. The grader runs with the Python of its own environment, .venv/{ready}:\n"
                     f"    {shown} -m grader {' '.join(sys.argv[1:])}\n")
    sys.exit(2)

try:
    status = main()
except KeyboardInterrupt:
    _end_by_ctrl_c()
early_workers.close()  # those no grading took
workdirs.wait_for_removals()  # the graded assignments' folders, removed while the results were written
# Without the interpreter's teardown, which takes a second or two with torch and Triton loaded
# (every file is written and closed, every child reaped and every cluster closed by now).
sys.stdout.flush()
sys.stderr.flush()
os._exit(status)
