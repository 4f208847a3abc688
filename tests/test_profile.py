"""`make profile` (grader/kernels/profiling.py): Nsight Compute's speed-of-light summary of each timed case.

THE CSV SAMPLE BELOW IS CONSTRUCTED, not recorded: it follows the layout of `ncu --import REPORT
--csv --page raw --print-units base` (a header of metric names, a row of units, a row per kernel)
with Nsight Compute's documented metric names, and made-up values. Replace it with one recorded
on an H100 (`make profile SUBMISSION=solutions ASSIGNMENT="matmul softmax"` keeps nothing; run the
import command on a report exported by hand) when one is at hand.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import subprocess
import sys
import textwrap

import pytest

from conftest import requires_gpu
from grader.kernels import ncu, profiling
from grader.reporting.results import Grade, TestResult
from grader.assignment.loading import load_assignments
from grader.assignment.spec import REPO_ROOT

CONSTRUCTED_CSV = textwrap.dedent('''\
    ==PROF== Note: this line and the next stand for the notes ncu may print before its table
    ==PROF== Disconnected from process 4242
    "ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__throughput.avg.pct_of_peak_sustained_elapsed","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum","l1tex__throughput.avg.pct_of_peak_sustained_active","lts__throughput.avg.pct_of_peak_sustained_elapsed","sm__throughput.avg.pct_of_peak_sustained_elapsed"
    "","","","","","","","","","","","%","%","nsecond","%","%","%"
    "0","4242","python3","gpu-host","softmax_kernel","1","7","(512, 1, 1)","(4096, 1, 1)","0","9.0","91.53","91.53","84,512","40.10","55.25","22.07"
    "1","4242","python3","gpu-host","matmul_tma_kernel","1","7","(256, 1, 1)","(512, 1, 1)","0","9.0","18.20","35.40","186,301","35.40","30.02","83.61"
    "2","4242","python3","gpu-host","tiny_kernel","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","0.31","1.20","2,210","1.20","0.50","0.90"
    ''')


def test_the_speed_of_light_rows_are_read_with_their_units():
    softmax, matmul, tiny = ncu.parse(CONSTRUCTED_CSV)
    assert softmax.kernel == "softmax_kernel" and softmax.block == "(512, 1, 1)" and softmax.grid == "(4096, 1, 1)"
    assert softmax.duration_ns == pytest.approx(84512)  # thousands separators are read as such
    assert (softmax.compute_pct, softmax.memory_pct) == (22.07, 91.53)
    assert softmax.levels == {"DRAM": 91.53, "L2": 55.25, "L1": 40.1}
    assert softmax.limit == "DRAM" and "near the roofline" in softmax.reading
    assert matmul.limit == "compute" and matmul.reading.startswith("bound by the SMs, at 84%")
    assert tiny.limit == "L1" and "latency-bound" in tiny.reading


def test_a_memory_level_busier_than_the_memory_throughput_names_the_bound():
    """Figures an H200 gave the solution's float32 8192x1024 softmax (2026-11-28): memory throughput
    54%, its L2 86%. The kernel is bound by the L2, not latency-bound at 54%."""
    softmax = ncu.KernelProfile("softmax_kernel", 15968.0, 28.95, 54.44, {"DRAM": 54.44, "L2": 86.14, "L1": 33.49})
    assert softmax.limit == "L2" and softmax.reading.startswith("bound by L2 bandwidth, at 86% of its peak")


def test_durations_in_other_units_and_older_metric_names():
    older = CONSTRUCTED_CSV.replace("nsecond", "usecond").replace("dram__throughput", "gpu__dram_throughput")
    softmax = ncu.parse(older)[0]
    assert softmax.duration_ns == pytest.approx(84512e3)
    assert softmax.levels["DRAM"] == 91.53


def test_no_table_means_no_kernel():
    assert ncu.parse("==ERROR== The application returned an error code (1).\n") == []
    assert ncu.parse("") == []


def _timed_grade(assignment: str, part: str) -> Grade:
    test = TestResult(assignment, part, "performance", f"{assignment}/{part}: speed", "ok", 1.0, 1.0, "fast")
    return Grade("solutions", [test], {}, 1.0)


def test_without_a_gpu_or_nsight_compute_it_says_so_and_profiles_nothing(monkeypatch):
    assignments = load_assignments(["softmax"])
    found = profiling.profile(_timed_grade("softmax", "softmax"), REPO_ROOT / "solutions", assignments, "cpu")
    assert found.cases == [] and "no GPU here" in found.note
    monkeypatch.setattr(profiling, "find_ncu", lambda: None)
    found = profiling.profile(_timed_grade("softmax", "softmax"), REPO_ROOT / "solutions", assignments, "cuda")
    assert found.cases == [] and "Nsight Compute (ncu) is not installed here" in found.note
    assert "grade does not use it" in found.note


def test_a_grade_with_no_timed_part_says_why_nothing_was_profiled(monkeypatch):
    monkeypatch.setattr(profiling, "find_ncu", lambda: "/nonexistent/ncu")  # never run: nothing to profile
    wrong = TestResult("softmax", "softmax", "performance", "softmax/softmax: speed", "wrong_result", 0.0, 1.0, "wrong")
    found = profiling.profile(Grade("solutions", [wrong], {}, 1.0), REPO_ROOT / "solutions",
                              load_assignments(["softmax"]), "cuda")  # fmt: skip
    assert found.cases == [] and "no part was (each failed" in found.note


def _fake_ncu(folder, behaviour: str) -> str:
    """A stand-in for ncu: a profiling run answers as the profiled process does (or hangs), and
    `--import` prints the constructed CSV."""
    script = folder / "ncu"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f'''\
        import sys, time
        if "--import" in sys.argv:
            print({CONSTRUCTED_CSV!r})
        elif {behaviour!r} == "hang":
            time.sleep(600)
        else:
            print("the student's own output")
            print('{{"ok": true}}' if {behaviour!r} == "ok" else '{{"ok": false, "error": "RuntimeError: boom"}}')
        '''))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_each_timed_case_is_profiled_in_a_process_of_its_own(tmp_path, monkeypatch):
    assignments = load_assignments(["softmax"])
    [part] = [p for p in assignments[0].parts if p.name == "softmax"]
    monkeypatch.setattr(profiling, "find_ncu", lambda: _fake_ncu(tmp_path, "ok"))
    found = profiling.profile(_timed_grade("softmax", "softmax"), REPO_ROOT / "solutions", assignments, "cuda")
    assert [case.case for case in found.cases] == [case.label for case in part.benchmarks]
    for case in found.cases:
        assert case.error == "" and [k["kernel"] for k in case.kernels] == ["softmax_kernel", "matmul_tma_kernel", "tiny_kernel"]
    profiling.write_json(found, tmp_path / "profile.json")
    assert json.loads((tmp_path / "profile.json").read_text())["cases"][0]["kernels"][0]["limit"] == "DRAM"
    # A part that was not timed (its correctness failed) is not profiled.
    untimed = Grade("x", [TestResult("softmax", "softmax", "performance", "speed", "wrong_result", 0, 1, "")], {}, 1.0)
    assert profiling.profile(untimed, REPO_ROOT / "solutions", assignments, "cuda").cases == []


def test_a_failing_or_hanging_case_is_reported_and_the_next_goes_on(tmp_path, monkeypatch):
    assignments = load_assignments(["softmax"])
    grade = _timed_grade("softmax", "softmax")
    monkeypatch.setattr(profiling, "find_ncu", lambda: _fake_ncu(tmp_path, "error"))
    found = profiling.profile(grade, REPO_ROOT / "solutions", assignments, "cuda")
    assert found.cases and all(case.error == "RuntimeError: boom" for case in found.cases)
    monkeypatch.setattr(profiling, "find_ncu", lambda: _fake_ncu(tmp_path, "hang"))
    found = profiling.profile(grade, REPO_ROOT / "solutions", assignments, "cuda", timeout_s=1)
    assert found.cases and all("did not finish within 1 s" in case.error for case in found.cases)


def test_make_profile_without_a_gpu_grades_and_says_why_there_is_no_profile(tmp_path):
    done = subprocess.run([sys.executable, "-m", "grader", "profile", "--submission", str(REPO_ROOT / "starter"),
                           "--assignment", "vector_add", "--device", "cpu", "--json", str(tmp_path / "results.json"),
                           "--html", str(tmp_path / "report.html")], capture_output=True, text=True, cwd=REPO_ROOT,
                          env={**os.environ, "COLUMNS": "200"}, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Profile: no GPU here" in done.stdout
    assert json.loads((tmp_path / "profile.json").read_text())["note"].startswith("no GPU here")
    html = (tmp_path / "report.html").read_text()
    assert 'id="profile"' in html and "no GPU here" in html
    assert json.loads((tmp_path / "results.json").read_text())["score"] == 0  # the grade itself, unchanged


@pytest.mark.gpu
@requires_gpu
def test_the_solution_softmax_profiled_on_the_gpu(tmp_path):
    if profiling.find_ncu() is None:
        pytest.skip("needs Nsight Compute (ncu)")
    done = subprocess.run([sys.executable, "-m", "grader", "profile", "--submission", str(REPO_ROOT / "solutions"),
                           "--assignment", "softmax", "--json", str(tmp_path / "results.json"),
                           "--html", str(tmp_path / "report.html")], capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=1800)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads((tmp_path / "profile.json").read_text())
    assert found["note"] == "" and found["cases"]
    for case in found["cases"]:
        assert case["error"] == "" and case["kernels"], case
        assert all(k["memory_pct"] is not None and k["duration_ns"] for k in case["kernels"]), case


def _recorded_profile() -> profiling.Profile:
    """`make profile` of the solutions on an H200 (docs/measurements/profile.json, recorded
    2026-11-28): each kernel's figures as ncu gave them, a CUDA kernel under its full name."""
    record = json.loads((REPO_ROOT / "docs" / "measurements" / "profile.json").read_text())
    cases = []
    for label, kernel, time, compute, memory, dram, l2, *_ in record["rows"]:
        part, case = label.split(" ", 1)
        if "naive" in kernel:  # ncu names a CUDA kernel with its signature
            kernel += "(const float *, const float *, float *, int, int, int)"
        found = ncu.KernelProfile(kernel, float(time.split()[0]) * 1e3, float(compute[:-1]), float(memory[:-1]),
                                  {"DRAM": float(dram[:-1]), "L2": float(l2[:-1])})  # fmt: skip
        cases.append(profiling.ProfiledCase(part.split("_")[0], part, case, [found.as_dict()]))
    return profiling.Profile(cases=cases)


@pytest.mark.parametrize("width", [80, 120])
def test_the_profile_table_fits_the_terminal_and_leaves_the_rest_to_the_html(width):
    """Issue 54: on an 80-column terminal every word broke ("softmax/so / ftmax", "latency-b /
    ound") and a row took 15 lines. Now no word breaks, a row takes at most three lines, and the
    columns left out are named, with where they are."""
    from rich.console import Console

    from grader.reporting import profile_table

    found = _recorded_profile()
    console = Console(file=io.StringIO(), width=width, record=True)
    profile_table.print_profile(found, console, "results/report.html")
    text = console.export_text()
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines), f"wider than {width} columns:\n{text}"
    shown = set(text.split())
    kept = [i for i, column in enumerate(profile_table.COLUMNS) if not column.optional]
    for row in profile_table.rows(found):
        words = {word for i in kept for word in str(row[i]).split()}
        assert words <= shown, f"broken at {width} columns: {sorted(words - shown)}\n{text}"
    rows = [i for i, line in enumerate(lines) if re.match(r"\w+/\w+ ", line)]
    assert len(rows) == len(found.cases), text
    assert max(b - a for a, b in zip(rows, rows[1:])) <= 3, f"a row takes more than three lines:\n{text}"
    after = " ".join(text[text.rindex("─"):].split()[1:])  # what follows the table's last row
    assert "results/report.html" in after
    assert ("compute and memory shares" in after) == (width == 80), "the columns left out are named"
