"""Fresh processes for test scripts that all begin by importing torch and Triton, without paying for
those imports each time: a server process imports them once, then forks one child per script.

Each script still runs in a process of its own, forked from one that has done nothing but import
numpy, torch and Triton (no kernel run, no driver queried, no interpreter installed), so no script
sees what another one changed. A fresh Python spends about 1.5 s of a two-core machine on those
imports; test_interpreter.py and test_gpu_target.py start two dozen of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_S = 600  # a script's limit, as `subprocess.run(..., timeout=600)` gave each fresh Python

# Reads one request a line ({"script", "stdout", "stderr"}), forks, runs the script in the child with
# its output in those files and stdin closed, and answers with the child's exit status.
SERVER = f"""
import json, os, signal, sys, traceback
import numpy, torch, triton

answers = os.fdopen(os.dup(1), "w")
for line in sys.stdin:
    request = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        answers.close()
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        signal.alarm({TIMEOUT_S})
        code = 0
        try:
            exec(compile(request["script"], "<string>", "exec"), {{"__name__": "__main__"}})
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    answers.write(json.dumps(os.waitstatus_to_exitcode(status)) + "\\n")
    answers.flush()
os._exit(0)  # stdin closed: nothing left to run, and tearing torch and Triton down took 1.5 s
"""


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


class ForkServer:
    """`run(script)` runs `script` as `python -c script` would, in `cwd` with `env`, in a forked child."""

    def __init__(self, env: dict[str, str], cwd: Path, scratch: Path):
        self.scratch, self.count = scratch, 0
        self.process = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, cwd=cwd, env=env, text=True)  # fmt: skip

    def run(self, script: str) -> Done:
        self.count += 1
        out, err = (self.scratch / f"{self.count}.{name}" for name in ("stdout", "stderr"))
        self.process.stdin.write(json.dumps({"script": script, "stdout": str(out), "stderr": str(err)}) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, f"the fork server died (exit status {self.process.wait()})"
        return Done(json.loads(answer), out.read_text(errors="replace"), err.read_text(errors="replace"))

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def interpreted(tmp_path_factory) -> Iterator[ForkServer]:
    """A server for scripts run as the CPU tier's child runs kernels: TRITON_INTERPRET=1 (which Triton
    reads at import), the repository on the path, and a Triton cache of their own, shared by them."""
    cache = tmp_path_factory.mktemp("triton-cache")
    env = {**os.environ, "TRITON_INTERPRET": "1", "TRITON_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    server = ForkServer(env, REPO, tmp_path_factory.mktemp("scripts"))
    try:
        yield server
    finally:
        server.close()
