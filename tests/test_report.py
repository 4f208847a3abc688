"""The HTML report and the terminal table, rendered from results made up here (a GPU run's
speed results included, so their part of the template is exercised without a GPU); then the same
outputs, grades.csv and the real CLI fed what a hostile submission prints or raises."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import subprocess
from html import unescape
import sys
from types import SimpleNamespace

import pytest
import torch
from rich.console import Console

from grader.running import stack
from grader.judging import verdicts as judging
from grader.reporting import class_table, glance, report, summary, terminal
from grader.course.gradebook import Entry, Key
from grader.messages.reports import Activity, BenchReport, Timings
from grader.judging.numerics import judge
from grader.reporting import results_json
from grader.reporting.results import Grade, TestResult
from grader.reporting.results_json import write_json
from grader.assignment.loading import load_assignments
from grader.assignment.spec import REPO_ROOT, Tolerance

pytestmark = pytest.mark.student


def _speed(name: str, traffic: dict, student_ms: float, baseline_ms: float) -> TestResult:
    bench = BenchReport(Timings([student_ms] * 20, [0.02] * 20), Timings([baseline_ms] * 20, [0.02] * 20),
                        Activity(), copy_gbps=4100.0)  # fmt: skip
    metrics = judging.speed_metrics(bench, traffic)
    metrics["tiers"] = [[1.0, 1.0], [0.5, 0.5]]
    credit = 1.0 if metrics["ratio"] >= 1.0 else 0.5 if metrics["ratio"] >= 0.5 else 0.0
    return TestResult("demo", name, "performance", f"demo/{name}: speed", "ok" if credit == 1.0 else "too_slow",
                      credit, 1.0, "timed", metrics)  # fmt: skip


def _grade() -> Grade:
    ref = torch.ones(37, 1000, dtype=torch.float64)
    out = ref.float().clone()
    out[:, 992:] = 2.0  # a bad last column block
    wrong = judge(out, ref, torch.float32, Tolerance(rtol=1e-5, atol=1e-9, norm=1e-6))
    tests = [
        TestResult("demo", "rows", "correctness", "demo/rows: float32 37x1000", wrong.reason, 0.0, 1.0,
                   wrong.message, wrong.metrics),  # fmt: skip
        _speed("rows", {"bytes": 268_435_456, "flops": 167_772_160}, 0.0644, 0.14),
        _speed("tiles", {"bytes": 100_663_296, "flops": 137_438_953_472}, 0.187, 0.180),
        TestResult("demo", "tiles", "performance", "demo/tiles: speed", "no_gpu", 0.0, 1.0, "needs a GPU"),
    ]
    return Grade("demo-submission", tests, {"device": "cuda", "tier": "GPU"}, 1.0)


def test_html_report_shows_the_map_the_bars_and_the_right_roofline():
    html = report.render_html(_grade())
    assert "Where it is wrong" in html and "bad columns: 992-999" in html
    assert html.count("<svg") == 4, "one map, two time bars and the speed chart at the top"
    assert "GB/s, 102% of the measured copy bandwidth" in html  # memory-bound: bandwidth
    assert "TFLOP/s against torch" in html  # compute-bound: arithmetic rate
    assert "not graded" in html
    assert "http://" not in html and "https://" not in html, "the report must open offline"


def test_terminal_table_has_a_row_per_part_failures_first_and_names_the_first_failure():
    out = io.StringIO()
    terminal.print_table(_grade(), Console(file=out, width=160))
    text = out.getvalue()
    assert "wrong_result" in text and "demo/rows: float32 37x1000" in text
    rows = [line.split() for line in text.splitlines() if re.match(r"  \S", line)]  # a part's row: indented
    assert [row[0] for row in rows] == ["tiles", "rows"], "the part that lost most comes first"
    assert any(line.split() == ["demo", "1.50/4.00"] for line in text.splitlines()), "the assignment's own row"
    # tiles: 0.96x torch, under the 1.00x edge: the table says what full credit needs, in ms.
    assert "0.96x; 1.00x (100%) needs <= 0.1800 ms" in text
    assert "1.00 points need a GPU" in text


def _class_grade() -> Grade:
    """A GPU grade of every part of every assignment, as a student with bugs here and there gets:
    each part's cases, its speed against its own tiers, one part failing and one too slow."""
    tests = []
    for assignment in load_assignments():
        for n, part in enumerate(assignment.parts):
            wrong = n == 1  # the second part of each assignment fails a case
            for i, case in enumerate(part.cases):
                reason = "wrong_result" if wrong and i == 0 else "ok"
                tests.append(TestResult(assignment.name, part.name, "correctness", f"{assignment.name}/{part.name}: "
                                        f"{case.dtype} {case.label}", reason, 0.0 if reason != "ok" else 1.0, 1.0,
                                        "max abs error 1" if reason != "ok" else "", bonus=part.bonus))  # fmt: skip
            for i, case in enumerate(part.benchmarks):
                ratio = 0.6 if wrong else 1.1
                bench = BenchReport(Timings([0.1] * 20, [0.01] * 20), Timings([0.1 * ratio] * 20, [0.01] * 20),
                                    Activity(), copy_gbps=4100.0)  # fmt: skip
                metrics = judging.speed_metrics(bench, {"bytes": 10**8, "flops": 10**9})
                metrics["tiers"] = [list(t) for t in part.performance.tiers]
                credit = part.performance.credit_for(metrics["ratio"])
                tests.append(TestResult(assignment.name, part.name, "performance", f"{assignment.name}/{part.name}: "
                                        f"speed {case.label}", "ok" if credit == 1 else "too_slow", credit, 1.0,
                                        "timed", metrics, bonus=part.bonus))  # fmt: skip
    return Grade("a-student", tests, {"device": "cuda", "tier": "GPU"}, 300.0)


def _starter_grade() -> Grade:
    """What a student's first `make grade` of the untouched starter gives on a CPU: every CPU-tier
    case of every part not_implemented, speed not graded."""
    tests = []
    for assignment in load_assignments():
        for part in assignment.parts:
            message = "the entry point still raises NotImplementedError: fill in the stub"
            for case in [c for c in part.cases if c.runs_on("cpu")] or part.cases[:1]:
                tests.append(TestResult(assignment.name, part.name, "correctness", f"{assignment.name}/"
                                            f"{part.name}: {case.label}", "not_implemented", 0.0, 1.0, message,
                                            bonus=part.bonus))  # fmt: skip
            tests.append(TestResult(assignment.name, part.name, "performance", f"{assignment.name}/{part.name}: speed",
                                    "no_gpu", 0.0, 1.0, "needs a GPU", bonus=part.bonus))  # fmt: skip
    return Grade(str(REPO_ROOT / "starter"), tests, {"device": "cpu", "tier": "CPU"}, 30.0)


def _words(grade: Grade) -> set[str]:
    """Every word the table must show whole: assignment and part names, statuses, reasons, speeds."""
    words, timed = set(), any(line.speeds for line in glance.parts(grade))
    for line in glance.parts(grade):
        words |= {line.assignment, line.part, line.status, *line.reasons.split()}
        words |= set(terminal.speed_cell(line).split()) if timed else set()
    return words - {""}


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("which", ["class on a GPU", "starter on a CPU"])
def test_the_terminal_table_fits_the_terminal_without_breaking_a_word(width, which):
    grade = _class_grade() if which == "class on a GPU" else _starter_grade()
    console = Console(file=io.StringIO(), width=width, record=True)
    terminal.print_table(grade, console)
    text = console.export_text()
    long = [line for line in text.splitlines() if len(line) > width]
    assert not long, f"lines wider than {width} columns: {long}"
    shown = {word.rstrip(",;:") for word in text.split()}
    broken = sorted(w for w in _words(grade) if w.rstrip(",;:") not in shown)
    assert not broken, f"words broken or missing at {width} columns: {broken}\n{text}"
    for line in glance.parts(grade):  # each part's row holds its points on its own line
        assert any(row.split()[:1] == [line.part] and f"{line.score:.2f}/{line.max_score:.2f}" in row
                   for row in text.splitlines()), f"no row for {line.assignment}/{line.part} at {width} columns"
    if which == "class on a GPU":  # every next tier's time is said, in the table or under it
        for line in glance.parts(grade):
            if line.speeds and (needs := min(line.speeds, key=lambda s: s.ratio).next_tier_text()):
                assert " ".join(needs.split()) in " ".join(text.split()), needs


def test_the_starters_first_grade_says_once_which_parts_exist_and_where_to_begin():
    console = Console(file=io.StringIO(), width=100, record=True)
    terminal.print_table(_starter_grade(), console)
    text = console.export_text()
    parts = [(a.name, p.name) for a in load_assignments() for p in a.parts]
    rows = [line.split() for line in text.splitlines() if re.match(r"  \S", line)]
    assert sorted(row[0] for row in rows) == sorted(part for _, part in parts), "a row per part that exists"
    assert text.count("NotImplementedError") == 1, f"said once, not once a part:\n{text}"
    said = " ".join(text.split())
    assert f"not_implemented in {len(parts)} parts of {len(load_assignments())} assignments" in said
    assert "Begin with vector_add, starter/vector_add/vector_add.py, as its handout " \
           "assignments/vector_add/README.md explains." in said, said


def test_parts_that_fail_alike_are_said_once_and_different_failures_each():
    tests = [TestResult("demo", f"p{i}", "correctness", f"demo/p{i}: float32 7", "wrong_result", 0.0, 1.0,
                        "max abs error 2 (allowed 1e-05)") for i in range(3)]  # fmt: skip
    tests.append(TestResult("demo", "q", "correctness", "demo/q: float32 7", "wrong_result", 0.0, 1.0, "max abs error 9"))
    lines = [str(text) for text in terminal.first_failures(Grade("s", tests, {}, 1.0))]
    assert lines == ["wrong_result 3 parts (demo/p0, demo/p1, demo/p2): max abs error 2 (allowed 1e-05)",
                     "wrong_result demo/q: float32 7: max abs error 9"], lines


def test_gradescope_output_says_what_the_terminal_says():
    output = results_json.gradescope(_grade())["output"]
    lines = output.splitlines()
    assert lines[0] == "Score 1.50 of 4.00 (1.00 points need a GPU and were not graded here)."
    assert lines[1] == "demo/tiles: 0.50/2.00 partial (too_slow)", lines
    assert "speed: 0.96x torch, 735.0 TFLOP/s (torch 763.5); 100% of the points from 1.00x: 0.1800 ms or less" in output
    assert "demo/rows: 1.00/2.00 partial (wrong_result)" in output and "full credit" in output


def test_the_report_puts_every_part_first_and_folds_what_passed():
    html = report.render_html(_grade())
    glance_at, first_section = html.index('id="glance"'), html.index('<h2 id="demo">')
    assert glance_at < first_section
    top = html[glance_at:first_section]
    assert top.index('data-part="demo/tiles"') < top.index('data-part="demo/rows"'), "failures first"
    assert "speed of each timed case against its tier edges" in top, "one chart of speed against the tier edges"
    section = html[first_section:]
    failed, fold = section.index("demo/rows: float32 37x1000"), section.index("<details><summary>")
    assert failed < fold and "1 not graded here" in section[fold:], "the failed case open, the rest folded"


def _bars(html: str) -> dict[str, float]:
    """The speed chart's bars, by their label (part and case), as their widths in the SVG."""
    chart = html[html.index('<svg class="chart"'):]
    chart = chart[:chart.index("</svg>")]
    labels = re.findall(r'<text x="0" y="[\d.]+">([^<]*)</text>', chart)
    widths = [float(w) for w in re.findall(r'<rect class="bar" x="[\d.]+" y="[\d.]+" width="([\d.]+)"', chart)]
    return dict(zip(labels, widths, strict=True))


def test_the_speed_chart_is_logarithmic_with_the_tier_edges_marked():
    """A fused chain at 15.9x torch beside kernels at 0.5x, 1x and 2x: on a log scale each factor of
    two is one step, so neither the slow nor the even bars flatten to a sliver."""
    tests = [_speed(name, {"bytes": 10**8}, 0.1, 0.1 * ratio) for name, ratio in
             (("half", 0.5), ("even", 1.0), ("double", 2.0), ("fused", 15.9))]  # fmt: skip
    html = report.render_html(Grade("s", tests, {"device": "cuda", "tier": "GPU"}, 1.0))
    bars = {label.split()[0].split("/")[1]: width for label, width in _bars(html).items()}
    assert bars["double"] - bars["even"] == pytest.approx(bars["even"] - bars["half"], rel=1e-6), "one step per factor"
    assert bars["half"] > 0.1 * bars["fused"], f"the slowest bar flattened beside 15.9x: {bars}"
    assert "on a log scale" in html
    edges = re.findall(r'<line class="edge" x1="([\d.]+)"', html)
    assert len(edges) == 2 * len(tests), "each row marks its two tier edges"
    for label in ("0.5x", "1x", "2x", "10x"):
        assert f">{label}</text>" in html, f"the axis has no {label} tick"


def test_an_assignment_heading_shows_its_points_and_its_bonus_apart():
    tests = [TestResult("fa", "forward", "correctness", "fa/forward: c", "ok", 18.0, 18.0, ""),
             TestResult("fa", "backward", "correctness", "fa/backward: c", "ok", 10.0, 10.0, "", bonus=True)]
    html = report.render_html(Grade("s", tests, {"device": "cpu", "tier": "CPU"}, 1.0))
    assert '<h2 id="fa">fa &mdash; 18.00 / 18.00, bonus 10.00 / 10.00</h2>' in html
    assert "28.00 / 18.00" not in html
    assert glance.points_of(tests[:1]) == "18.00 / 18.00", "no bonus, no bonus said"


# What a submission can put in an exception message or on stdout to attack whoever reads it.
HOSTILE = {
    "closing tag": "[/]",
    "fake style": "[bold red]fake[/]",
    "clear screen": "\x1b[2J",
    "clipboard write": "\x1b]52;c;ZXZpbA==\x07",
    "fake score": "\x1b[32mScore 100/100\x1b[0m",
    "carriage return": "Score 0/100\rScore 100/100",
    "NUL": "a\x00b",
    "bidi override": "grade: \u202edeliaf",
    "script": "<script>alert(1)</script>",
    "lone surrogate": "a\ud800b",
}  # fmt: skip
STUDENT_ONLY = ["\x1b[2J", "\x1b]52", "\x1b[32mScore", "\x07", "\x00", "\r", "\u202e", "\ud800"]


def test_a_machine_off_the_pinned_stack_says_so_first_everywhere(tmp_path):
    """A grade given where torch or Triton is not the pinned version warns before anything else: in
    the terminal, at the top of the HTML report, in results.json's output and on the class page."""
    off_pin = {"device": "cpu", "tier": "CPU", "stack": stack.DIFFERS + "triton 3.9.0 (pinned 3.6.0)"}
    grade = dataclasses.replace(_grade(), environment=off_pin)
    warning = "Warning: graded where the stack DIFFERS FROM THE PINNED STACK: triton 3.9.0 (pinned 3.6.0)"
    out = io.StringIO()
    terminal.print_table(grade, Console(file=out, width=200))
    assert warning in out.getvalue()
    html = report.render_html(grade)
    assert html.index(warning) < html.index("<h2>"), "the warning comes before the first assignment"
    write_json(grade, tmp_path / "results.json")
    assert json.loads((tmp_path / "results.json").read_text())["output"].startswith(warning)
    assignments = load_assignments(["vector_add"])
    for environment, warned in ((off_pin, True), ({"device": "cpu", "stack": "as pinned"}, False)):
        entry = Entry(Key("alice", "vector_add", "h", "v"), "cpu", [], environment, 1.0, "now")
        summary.write_outputs(tmp_path, {"alice": [entry]}, {}, assignments)
        assert (warning in (tmp_path / "summary.html").read_text()) == warned
    assert stack.warning({"stack": "as pinned"}) == "" and warning not in report.render_html(_grade())


def _hostile_grade() -> Grade:
    """One part per nasty string, so each is some part's first failure and reaches the terminal."""
    tests = [TestResult("demo", f"p{i}", "correctness", f"demo/p{i}: {text}", "crash", 0.0, 1.0,
                        f"{text} raised here\nTraceback line {text}")
             for i, text in enumerate(HOSTILE.values())]  # fmt: skip
    tests.append(TestResult("demo", "load", "build", "demo/load", "import_error", 0.0, 0.0, " ".join(HOSTILE.values())))
    return Grade("[/]\x1b[2Jevil", tests, {"device": "cpu", "tier": "CPU", "note": "\x1b[2J"}, 1.0)


def test_student_text_reaches_the_terminal_as_text_not_markup_or_escapes():
    out = io.StringIO()
    console = Console(record=True, file=out, force_terminal=True, width=200)
    terminal.print_table(_hostile_grade(), console)  # a MarkupError here once cost the student results.json
    raw, shown = out.getvalue(), console.export_text()
    for sequence in STUDENT_ONLY:
        assert sequence not in raw, f"{sequence!r} reached the terminal"
    assert "[bold red]fake[/] raised here" in shown, "markup is printed as the characters the student wrote"
    assert "crash demo/p0: [/]: [/] raised here" in shown and "Grades for [/]evil" in shown


def test_student_text_in_results_json_is_printable_and_valid(tmp_path):
    path = tmp_path / "results.json"
    write_json(_hostile_grade(), path)
    results = json.loads(path.read_text())
    texts = [t[key] for t in results["tests"] for key in ("name", "output")] + [results["extra_data"]["submission"]]
    assert any("[bold red]fake[/]" in text for text in texts) and any("Score 100/100" in text for text in texts)
    for text in texts:
        assert not any(sequence in text for sequence in STUDENT_ONLY), repr(text)


def test_student_text_in_the_html_is_escaped_and_printable(tmp_path):
    report.write_html(_hostile_grade(), tmp_path / "report.html")  # a lone surrogate cannot be written as UTF-8
    html = (tmp_path / "report.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert not any(sequence in html for sequence in STUDENT_ONLY)


def test_a_student_name_opens_in_a_spreadsheet_as_text(tmp_path):
    names = ['=HYPERLINK("http://x")', "+1", "alice"]
    path = tmp_path / "grades.csv"
    summary.write_grades_csv(path, {name: _hostile_grade() for name in names}, [SimpleNamespace(name="demo")])
    with path.open(newline="") as file:
        cells = [row[0] for row in csv.reader(file)][1:]
    assert cells == ["'" + names[0], "'+1", "alice"], "a leading quote makes a spreadsheet read the cell as text"


def test_a_hostile_archive_name_is_text_in_the_class_page_and_table(tmp_path):
    student, problem = "[/]\x1b[2Jmallory", "evil.zip was not unpacked: entry '<script>x</script>\x1b]52;c;eA==\x07'"
    assignments = load_assignments(["vector_add"])
    summary.write_outputs(tmp_path, {student: []}, {student: problem}, assignments)
    page = (tmp_path / "summary.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page
    assert not any(sequence in page for sequence in STUDENT_ONLY)
    out = io.StringIO()
    class_table.print_class_table({student: _hostile_grade()}, assignments, Console(file=out, force_terminal=True))
    assert "[/]mallory" in out.getvalue() and "\x1b[2J" not in out.getvalue()


def test_grade_survives_a_submission_that_raises_markup_and_escapes(tmp_path):
    """The real CLI, on a vector_add.py whose import raises with Rich markup and terminal escapes
    (written raw into the source, so the traceback's source line carries them too)."""
    (tmp_path / "sub" / "vector_add").mkdir(parents=True)
    (tmp_path / "sub" / "vector_add" / "vector_add.py").write_text(
        'raise RuntimeError("[/] \x1b[2J \x1b]52;c;ZXZpbA==\x07 \x1b[32mScore 100/100")\n')
    out_json, out_html = tmp_path / "results.json", tmp_path / "report.html"
    argv = ["grade", "--submission", str(tmp_path / "sub"), "--assignment", "vector_add",
            "--json", str(out_json), "--html", str(out_html), "--device", "cpu"]  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "grader", *argv], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    outputs = [t["output"] for t in json.loads(out_json.read_text())["tests"]]
    assert any("raised RuntimeError" in o and "[/]" in o for o in outputs), outputs
    assert not any(sequence in o for o in outputs for sequence in STUDENT_ONLY)
    assert "[/]" in done.stdout, "the first failure is printed, markup as text"
    assert not any(sequence in done.stdout + done.stderr for sequence in STUDENT_ONLY)


def _overflowed_softmax() -> TestResult:
    """A softmax without the row maximum on its first CPU-tier case, judged and diagnosed as a
    grading judges it (grader/judging/verdicts.py): a first line of some 500 characters, its advice last."""
    from grader.assignment import cases
    from grader.judging import diagnosis

    [assignment] = load_assignments(["softmax"])
    part = assignment.parts[0]
    case = part.cases[0]
    inputs = cases.make_inputs(assignment, part, case, cases.seed_for(assignment, part, "case", 0), "cpu")
    x = inputs["x"].float()
    out = (torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)).to(inputs["x"].dtype)
    ref = cases.reference_output(assignment, part, inputs)
    tolerance = part.tolerance_for(case.dtype)
    verdict = judge(out, ref, cases.DTYPES[case.dtype], tolerance)
    found = diagnosis.diagnose(verdict.reason, out, ref, tolerance, inputs, lambda c: cases.reference_output(
        assignment, part, c))  # fmt: skip
    assert verdict.reason == "nan_or_inf" and found and found[0] == "overflow"
    return TestResult("softmax", part.name, "correctness", f"softmax/{part.name}: {case.dtype} {case.label}",
                      verdict.reason, 0.0, 1.0, f"{verdict.message}. Likely cause: {found[1]}", verdict.metrics)


def _softmax_worked_on(softmax: list[TestResult]) -> Grade:
    """The starter's first grade, but for softmax, which the student worked on: `softmax` its tests."""
    starter = _starter_grade()
    tests = [t for t in starter.tests if t.assignment != "softmax"] + softmax
    return dataclasses.replace(starter, tests=tests)


@pytest.mark.parametrize("width", [80, 200])
def test_the_first_thing_to_fix_is_said_whole_and_before_the_untouched_parts(width):
    """Issue 54: at 80 and at 200 columns the line was cut at 200 characters ("Likely cause: NaN
    or Inf ap [...]"), and the parts not started came before the one the student worked on."""
    failed = _overflowed_softmax()
    console = Console(file=io.StringIO(), width=width, record=True)
    terminal.print_table(_softmax_worked_on([failed]), console)
    said = " ".join(console.export_text().split())
    assert " ".join(failed.output.split()) in said, said
    assert "[...]" not in said and "subtract the row's maximum before exp" in said
    assert said.index("nan_or_inf softmax/softmax") < said.index("not_implemented in"), "worked on first"


def test_a_students_endless_first_line_keeps_its_start_and_its_advice():
    flood = "raised: " + "x" * 64_000 + " at the end"
    tests = [TestResult("demo", "p", "correctness", "demo/p: c", "crash", 0.0, 1.0, flood)]
    [line] = [str(text) for text in terminal.first_failures(Grade("s", tests, {}, 1.0))]
    assert len(line) < 2100 and "raised: xxx" in line and line.endswith("xx at the end") and "[...]" in line


def _cuda_part_on_the_cpu() -> list[TestResult]:
    """A CUDA C part on the CPU tier whose file compiled: its build passed, its cases need a GPU."""
    name = "transpose/transpose_naive"
    return [TestResult("transpose", "transpose_naive", "build", f"{name}: load transpose.cu", "ok", 0.0, 0.0,
                       "transpose.cu compiled with nvcc"),
            *(TestResult("transpose", "transpose_naive", "correctness", f"{name}: float32 {shape}", "no_gpu",
                         0.0, 0.25, "CUDA parts run on the GPU tier only") for shape in ("33x65", "2x4099")),
            TestResult("transpose", "transpose_naive", "performance", f"{name}: speed float32 8192x8192", "no_gpu",
                       0.0, 1.0, "speed is measured on the GPU tier only")]  # fmt: skip


def test_a_cuda_part_nothing_checked_is_not_graded_in_the_terminal_the_report_and_gradescope():
    """Issue 54: its compile passed, so the terminal and the report said `passed - 0.00/3.00`,
    while results.json called each case failed. Compiling earns nothing by itself."""
    grade = Grade("s", _cuda_part_on_the_cpu(), {"device": "cpu", "tier": "CPU"}, 1.0)
    console = Console(file=io.StringIO(), width=120, record=True)
    terminal.print_table(grade, console)
    [row] = [line.split() for line in console.export_text().splitlines() if line.startswith("  transpose_naive")]
    assert row[1:3] == ["not", "graded"] and "passed" not in row, row
    glance_row = re.search(r'data-part="transpose/transpose_naive">(.*?)</tr>', report.render_html(grade), re.S)
    assert ">not graded<" in glance_row[1] and ">passed<" not in glance_row[1]
    results = results_json.gradescope(grade)
    assert "transpose/transpose_naive: 0.00/1.50 not graded" in results["output"].splitlines()
    for test in results["tests"][1:]:
        assert test["name"].endswith("(not graded here)") and test["output"].startswith("Not graded here: ")


def _visible_text(html: str) -> str:
    """What a reader of the page reads: the text outside tags, scripts and styles, and the titles
    that show on hovering left out."""
    html = re.sub(r"<(style|script|title)\b.*?</\1>", " ", html, flags=re.S)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


@pytest.mark.parametrize("reason", sorted(report.HINTS))
def test_a_hint_names_nothing_the_page_does_not_show(reason):
    """Issue 54: the hint of wrong_result said "Look at the map" under a case with no map (the map
    needs the output's values; a wrong shape, a crash or a hidden case has none), and on the class
    page, which draws no map at all."""
    tests = [TestResult("demo", "p", "correctness", "demo/p: float32 7", reason, 0.0, 1.0, "what went wrong")]
    shown = _visible_text(report.render_html(Grade("s", tests, {"device": "cpu", "tier": "CPU"}, 1.0)))
    assert report.HINTS[reason] in shown
    assert not re.search(r"\bmaps?\b", shown), f"{reason}: a map is named where none is drawn: {shown}"
    entry = Entry(Key("alice", "demo", "h", "v"), "cpu", tests, {"device": "cpu"}, 1.0, "now")
    page = summary.class_summary({"alice": Grade("alice", tests, {}, 1.0)}, {"alice": [entry]}, {}, [])
    assert not any(re.search(r"\bmaps?\b", row["hint"]) for row in page["reasons"])


def test_the_assignment_worked_on_comes_first_and_the_untouched_are_folded():
    """Issue 54: report.html put the one assignment worked on 10,300 px down the page, after 63
    not_implemented blocks, each with its message and hint."""
    html = report.render_html(_softmax_worked_on([_overflowed_softmax()]))
    body = html[html.index('<h2 id="softmax">'):]
    assert html.index('<h2 id="softmax">') < min(html.index(f'id="{name}"', html.index("</table>"))
                                                 for name in ("vector_add", "matmul", "gelu"))  # fmt: skip
    assert body.count("NotImplementedError") == 1, "said once for every part not started"
    assert "Begin with vector_add" in body
    for name in ("vector_add", "matmul", "gelu", "flash_attention", "transpose"):
        assert re.search(rf'<details class="not-started" id="{name}">', body), f"{name} is not folded"
    first_rows = re.findall(r'<tr data-part="([^"]+)"', html)
    assert first_rows[0] == "softmax/softmax", "the part worked on heads the glance"
