"""`python -m grader`: the command line (grader/cli.py), run by the Python of `.venv/`."""

import os
import signal
import sys
from pathlib import Path

# A Ctrl-C while the grader's packages load is held until they have loaded. Python raises
# KeyboardInterrupt where the signal lands, and one that lands inside numpy's or torch's start is
# dropped (the command then grades on), leaves numpy half loaded, or aborts torch. So the first
# Ctrl-C is noted and taken once the packages are in; a second is taken at once. A Ctrl-C ignored
# at the start (a background job's) stays ignored.
_interrupted: list[int] = []


def _hold_ctrl_c(signum, frame):
    _interrupted.append(signum)
    if len(_interrupted) > 1:
        raise KeyboardInterrupt


if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _hold_ctrl_c)
try:
    from grader.cli import main
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
if signal.getsignal(signal.SIGINT) is _hold_ctrl_c:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if _interrupted:
    raise KeyboardInterrupt  # the Ctrl-C held while the packages loaded, taken as Python takes one

status = main()
# Without the interpreter's teardown, which takes a second or two with torch and Triton loaded
# (every file is written and closed, every child reaped and every cluster closed by now).
sys.stdout.flush()
sys.stderr.flush()
os._exit(status)
