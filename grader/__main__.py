"""`python -m grader`: the command line (grader/cli.py), run by the Python of `.venv/`."""

import os
import sys
from pathlib import Path

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

status = main()
# Without the interpreter's teardown, which takes a second or two with torch and Triton loaded
# (every file is written and closed, every child reaped and every cluster closed by now).
sys.stdout.flush()
sys.stderr.flush()
os._exit(status)
