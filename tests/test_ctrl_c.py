"""A Ctrl-C while the grader starts stops it, wherever in its start the signal lands.

Python raises KeyboardInterrupt where a SIGINT lands. Before grader/__main__.py held the signal
until its packages had loaded, one that landed inside numpy's start was dropped (7 of 100 `--help`
runs interrupted 0.15-1.1 s in went on to exit 0), left numpy half loaded (exit 1), or aborted
torch (exit -6). A batch that grades on past the Ctrl-C that tools/class_grade.py sends at its time
limit overruns the device command it runs in.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from grader.assignment.spec import REPO_ROOT

COMMAND = [sys.executable, "-m", "grader", "--help"]


def _start_takes() -> float:
    """The least of two whole `--help` runs: later runs, as long or longer on a busy machine, are
    interrupted at fractions of it before their start is over."""
    took = []
    for _ in range(2):
        began = time.monotonic()
        subprocess.run(COMMAND, cwd=REPO_ROOT, capture_output=True, check=True, timeout=300)
        took.append(time.monotonic() - began)
    return min(took)


def test_a_ctrl_c_anywhere_in_the_start_stops_the_grader():
    whole = _start_takes()
    for step in range(1, 13):  # each run loads the packages whole before it stops
        at = whole * 0.6 * step / 12
        process = subprocess.Popen(COMMAND, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(at)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=max(60.0, 5 * whole))
        assert process.returncode == -signal.SIGINT, (
            f"interrupted {at:.2f} s into a {whole:.2f} s start: exit {process.returncode}\n"
            f"{out.decode(errors='replace')[-300:]}{err.decode(errors='replace')[-1500:]}")
        assert b"usage:" not in out, "the command went on after the Ctrl-C"
