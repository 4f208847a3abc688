"""`make profile`: each timed case of a graded submission, once, under Nsight Compute (advice).

After a grading on a GPU, every part whose correctness passed is profiled benchmark by benchmark:
`ncu` wraps a small process of its own (grader/child/profiled.py) that calls the student's entry
point on the benchmark's inputs, with only the last call between cudaProfilerStart and Stop
(`--profile-from-start off`), and keeps the SpeedOfLight section of each kernel that call ran
(ncu.py reads it). That process is not the sandboxed child of a grading: Nsight Compute around a
whole grading inside bubblewrap profiled nothing and hung until its time limit, and the profile
is advice that a student asks for on their own code. Each run has a time limit, after which its
whole process group is ended. Nothing here changes a score; without Nsight Compute (or a GPU)
the report says so and the grade is the same.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from grader.kernels import cuda_build, ncu
from grader.reporting.results import Grade
from grader.assignment.spec import REPO_ROOT, Assignment

TIMEOUT_S = 300  # one benchmark: the warm-up's compiling and autotuning, then ncu's replays of one call
NCU_OPTIONS = ("--target-processes", "all", "--profile-from-start", "off", "--section", "SpeedOfLight",
               "--clock-control", "none")  # fmt: skip


@dataclass
class ProfiledCase:
    assignment: str
    part: str
    case: str
    kernels: list[dict] = field(default_factory=list)  # ncu.KernelProfile.as_dict(), in launch order
    error: str = ""


@dataclass
class Profile:
    """What `profile` found: the cases it profiled, or why it profiled none."""

    note: str = ""  # why nothing was profiled (no GPU, no Nsight Compute), or "" when it ran
    cases: list[ProfiledCase] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"note": self.note, "cases": [vars(case) for case in self.cases]}


def find_ncu() -> str | None:
    """Nsight Compute's command line: on the PATH, in CUDA's folder, or where its installer puts it."""
    found = shutil.which("ncu")
    if found:
        return found
    home = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "ncu"
    candidates = [str(home)] + sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)
    return next((c for c in candidates if Path(c).is_file()), None)


def profile(grade: Grade, submission: Path, assignments: list[Assignment], device: str,
            progress=lambda text: None, timeout_s: float = TIMEOUT_S) -> Profile:  # fmt: skip
    """Profile each benchmark of each part of `grade` that was timed (its correctness passed)."""
    if device != "cuda":
        return Profile("no GPU here: Nsight Compute profiles kernels on a GPU; the grade does not need it")
    tool = find_ncu()
    if tool is None:
        return Profile("Nsight Compute (ncu) is not installed here, so nothing was profiled: it is advice, and the "
                       "grade does not use it (install Nsight Compute, or CUDA's toolkit with it, to see where your "
                       "kernels spend their time)")  # fmt: skip
    timed = {(t.assignment, t.part) for t in grade.tests if t.kind == "performance" and t.reason in ("ok", "too_slow")}
    found = Profile()
    for assignment in assignments:
        for part in assignment.parts:
            if (assignment.name, part.name) not in timed:
                continue
            library = cuda_build.build(submission / assignment.name / part.file).library if part.is_cuda else None
            for index, case in enumerate(part.benchmarks):
                progress(f"profiling {assignment.name}/{part.name} {case.label} with Nsight Compute")
                job = {"assignment": str(assignment.directory), "submission": str(submission), "part": part.name,
                       "index": index, "library": str(library or "")}  # fmt: skip
                found.cases.append(_profile_case(tool, job, ProfiledCase(assignment.name, part.name, case.label),
                                                 timeout_s))  # fmt: skip
    if not found.cases:
        found.note = ("nothing was profiled: Nsight Compute profiles only a part whose kernels were timed, and no part "
                      "was (each failed its correctness or its timing: the grade says why)")  # fmt: skip
    return found


def _profile_case(tool: str, job: dict, case: ProfiledCase, timeout_s: float) -> ProfiledCase:
    with tempfile.TemporaryDirectory(prefix="profile-") as scratch:
        report = Path(scratch) / "case"
        command = [tool, *NCU_OPTIONS, "--metrics", ",".join(ncu.METRICS), "--export", str(report), "--force-overwrite",
                   sys.executable, "-m", "grader.child.profiled", json.dumps(job)]  # fmt: skip
        done, said = _run(command, timeout_s)
        if done is None:
            case.error = f"Nsight Compute did not finish within {timeout_s:.0f} s, and was stopped"
            return case
        answer = _answer(done.stdout)
        if not answer.get("ok"):
            case.error = answer.get("error") or f"ncu exited with {done.returncode}: {said[-600:]}"
            return case
        imported, _ = _run([tool, "--import", f"{report}.ncu-rep", "--csv", "--page", "raw", "--print-units", "base"], 120)
        kernels = ncu.parse(imported.stdout if imported is not None else "")
        case.kernels = [kernel.as_dict() for kernel in kernels]
        if not kernels:
            case.error = f"Nsight Compute recorded no kernel of the call: {said[-600:]}".strip()
    return case


def _run(command: list[str], timeout_s: float) -> tuple[subprocess.CompletedProcess | None, str]:
    """Run `command` in a process group of its own, from the repository root (the profiled process
    imports the grader); past the time limit the whole group is ended. Returns its result (None
    after a time-out) and what it wrote on stderr."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                               start_new_session=True)  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return None, ""
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr), stderr


def _answer(stdout: str) -> dict:
    """The profiled process's last JSON line (the student's code may print before it)."""
    for line in reversed(stdout.splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict) and "ok" in found:
            return found
    return {}


def write_json(found: Profile, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(found.as_dict(), indent=2) + "\n")
