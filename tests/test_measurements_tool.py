"""tools/measurements.py's reading of what a grading leaves: the phases table (issue 52's per-phase
figures) from a real grading's results.json, with the precompile pass's note in it; and
tools/class_grade.py's class, graded over several commands; and tools/cpu_tier.py's cold grading
of a commit's own tree, read into the CPU tier's table."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from conftest import no_sandbox_where_none
from grader.assignment.loading import load_assignment
from grader.assignment.spec import REPO_ROOT
from grader.grading import Settings, grade_submission
from grader.reporting.results_json import gradescope
from grader.running.orphans import children

sys.path.insert(0, str(REPO_ROOT / "tools"))
import clock_ramp  # noqa: E402
import cpu_tier  # noqa: E402
import hold_timeline  # noqa: E402
import measurements  # noqa: E402
import spy_summary  # noqa: E402
import steady_grade  # noqa: E402


def test_the_phases_line_is_read_whole_notes_with_parentheses_and_semicolons_included():
    line = ("flash_attention: start 2.8 s, build 0.0 s, precompile 31.5 s, correctness 18.2 s, timing 12.6 s "
            "(precompiled 264 of 266 kernels in 15 processes (0 found compiled); GPU memory held by torch: at most "
            "2.1 GiB); gelu: start 3.0 s, correctness 0.7 s, timing 4.1 s, waiting 1.5 s")  # fmt: skip
    found = measurements.phases_of(line)
    assert list(found) == ["flash_attention", "gelu"]
    figures, notes = found["flash_attention"]
    assert figures == {"start": 2.8, "build": 0.0, "precompile": 31.5, "correctness": 18.2, "timing": 12.6}
    assert notes.startswith("precompiled 264 of 266 kernels in 15 processes (0 found compiled); GPU memory")
    assert found["gelu"] == ({"start": 3.0, "correctness": 0.7, "timing": 4.1, "waiting": 1.5}, "")


def test_a_real_gradings_phases_become_the_table(tmp_path):
    assignment = load_assignment(REPO_ROOT / "assignments" / "vector_add")
    grade = grade_submission(REPO_ROOT / "solutions", [assignment], Settings(device="cpu", precompile=2))
    (tmp_path / "results.json").write_text(json.dumps(gradescope(grade)))
    (tmp_path / "wall.json").write_text(json.dumps({"seconds": 12.34, "exit": 0}))
    record = measurements.phases([f"cold={tmp_path / 'results.json'}"], driver="-")
    [row] = record["rows"]
    assert row[:3] == ["cold", "12.3 s", "vector_add"] and len(row) == len(record["columns"])
    assert float(row[4].removesuffix(" s")) > 0  # its correctness child ran
    (figures, _), = measurements.phases_of(grade.environment["phases"]).values()
    assert {"judging", "sizing"} <= set(figures), "the grading process's own work is in its phases line"
    assert [row[record["columns"].index(p)] for p in ("judging", "sizing")] == \
        [f"{figures['judging']:.1f} s", f"{figures['sizing']:.1f} s"], "and in the table"
    assert row[-1].startswith(("foresaw", "precompiled")), row  # the pass ran, and said what it did
    # gpu_session.sh's cold-NAME step leaves NAME's results beside its own wall file
    (tmp_path / "cold-vector_add.json").write_text((tmp_path / "results.json").read_text())
    (tmp_path / "cold-vector_add.wall.json").write_text(json.dumps({"seconds": 85.81}))
    [row] = measurements.phases([f"alone={tmp_path / 'cold-vector_add.json'}"], driver="-")["rows"]
    assert row[:3] == ["alone", "85.8 s", "vector_add"]


def test_a_class_stopped_at_its_limit_is_graded_on_in_the_next_command(tmp_path):
    """tools/class_grade.py, rehearsed on the CPU tier: a command stopped at its limit before a grade
    ends the batch and its workers (no process left) and keeps its span; the next grades the class,
    and the summary sums both spans, counts every grade and becomes the table."""
    tool = [sys.executable, str(REPO_ROOT / "tools" / "class_grade.py")]
    rehearsal = ["--dir", str(tmp_path), "--students", "2", "--workers", "1", "--device", "cpu",
                 "--assignment", "vector_add"]  # fmt: skip
    rehearsal += no_sandbox_where_none()
    before = children()
    stopped = subprocess.run([*tool, "run", *rehearsal, "--limit", "0.5"], capture_output=True, text=True, timeout=300)
    assert stopped.returncode == 3, stopped.stdout + stopped.stderr
    assert children() <= before, "the batch and its workers ended with the command"
    done = subprocess.run([*tool, "run", *rehearsal, "--limit", "600"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and "0 left" in done.stdout, done.stdout + done.stderr
    summary = subprocess.run([*tool, "summary", "--dir", str(tmp_path), "--json", str(tmp_path / "class.json")],
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    figures = json.loads((tmp_path / "class.json").read_text())
    spans = [json.loads(line) for line in (tmp_path / "spans.jsonl").read_text().splitlines()]
    assert figures["calls"] == 2 and figures["students"] == figures["of"] == 2 and figures["grades"] == 2, figures
    assert figures["wall_s"] == sum(span["seconds"] for span in spans)
    assert summary.returncode == 1 and len(figures["lost"]) == 2, "on the CPU tier nothing is timed: points short"
    record = measurements.class_grade(tmp_path / "class.json", tmp_path / "out" / "student00" / "results.json", "-")
    assert record["rows"][0] == ["students graded", "2 of 2 (2 grades)"]
    assert figures["workers_used"] == 1 and figures["environment"]["triton_version"], figures
    machine = measurements.class_grade(tmp_path / "class.json", None, "-")["measured"]
    assert machine["triton"] == figures["environment"]["triton_version"], "the machine its grades name"
    # A first run still grading (a detached batch: its span is written at its end): no figures yet
    (tmp_path / "spans.jsonl").rename(tmp_path / "spans.kept")
    early = subprocess.run([*tool, "summary", "--dir", str(tmp_path), "--device", "cpu"], capture_output=True, text=True,
                           timeout=300)  # fmt: skip
    assert early.returncode == 2 and "2 grades so far" in early.stdout, early.stdout + early.stderr


def test_a_gradings_benchmark_seconds_are_summed_per_assignment():
    """tools/steady_grade.py: where each assignment's benchmarks spent their seconds, from the
    results JSON alone (the timed calls' GPU time from the samples, the rest from the child's account)."""
    def bench(assignment: str, seconds: float, harness: dict | None) -> dict:
        metrics = {"samples": 40, "student_ms": 1.0, "baseline_ms": 1.5, "seconds": seconds, "harness_s": harness}
        return {"extra_data": {"assignment": assignment, "kind": "performance", "metrics": metrics}}

    results = {"tests": [bench("softmax", 0.6, {"inputs": 0.1, "calls": 0.3}), bench("softmax", 0.5, {"calls": 0.2}),
                         bench("gelu", 0.4, None),
                         {"extra_data": {"assignment": "gelu", "kind": "correctness", "metrics": {"seconds": 9.0}}}]}  # fmt: skip
    assert steady_grade.benchmark_seconds(results) == {
        "gelu": {"benchmarks": 1, "seconds": 0.4, "timed": 0.1, "harness_s": {}},
        "softmax": {"benchmarks": 2, "seconds": 1.1, "timed": 0.2, "harness_s": {"inputs": 0.1, "calls": 0.5}}}


def test_py_spys_samples_of_a_timing_childs_repetitions_are_counted_by_the_part_below_round():
    """tools/spy_summary.py on raw lines as py-spy writes them: a child's command line holds ';' of
    its own (python -c), and only the samples inside `_round` of a grading child count."""
    child = 'process 12:"python -I -c import sys; from grader.child.main import main; main()"'
    parent = 'process 10:"python -m grader grade"'
    round_ = "<module> (<string>:1);run (grader/child/worker.py:330);_round (grader/child/timing.py:150)"
    lines = [f"{parent};{child};{round_};agrees (grader/child/timing.py:120);_norms (grader/child/timing.py:140) 7",
             f"{parent};{child};{round_};make_inputs (grader/child/worker.py:283) 3",
             f"{parent};{child};<module> (<string>:1);run (grader/child/worker.py:330) 50",
             f"{parent};main (grader/cli.py:10);_round (grader/child/timing.py:150) 9"]  # fmt: skip
    below, leaves, total = spy_summary.summarize(lines, "_round")
    assert total == 10
    assert below == {"agrees (grader/child/timing.py:120)": 7, "make_inputs (grader/child/worker.py:283)": 3}
    assert leaves["_norms (grader/child/timing.py:140)"] == 7


def test_a_gradings_timeline_is_read_from_the_locks_own_hold_log(tmp_path, monkeypatch):
    """Real holds of a real lock, logged as a grading logs them (GRADER_GPU_LOCK_LOG): a shared
    hold, a timed one that ends shared while its outputs are sent, a mark between; read back in
    seconds from the grading's start, with a line from before it left out."""
    import time

    from grader.running import gpu_lock

    log = tmp_path / "holds.log"
    log.write_text(f"shared 1.000 1.000 2.000 1 an earlier grading\n")
    monkeypatch.setenv(gpu_lock.LOG_ENVIRONMENT, str(log))
    lock = gpu_lock.GpuLock(tmp_path / "locks", "0")
    began = time.time()
    with lock.shared("vector_add correctness"):
        time.sleep(0.05)
    gpu_lock.note("vector_add cases judged")
    with lock.timed("vector_add timing") as hold:
        time.sleep(0.1)
        hold.share()
        time.sleep(0.05)
    held = hold_timeline.lines_of(log.read_text(), began, 10.0)
    assert [(h["how"], h["label"]) for h in held] == [
        ("shared", "vector_add correctness"), ("mark", "vector_add cases judged"),
        ("exclusive", "vector_add timing"), ("shared", "vector_add timing sending")]  # fmt: skip
    found = hold_timeline.summary(held)
    assert 0 <= found["first_hold_s"] < found["first_timed_s"] < 5
    assert 0.09 <= found["timed_s"] < 1 and 0.04 <= found["sendings_s"] < 1, found
    assert "vector_add cases judged" in hold_timeline.render(held)


def test_the_clock_ramps_figures_become_the_table(tmp_path):
    """tools/clock_ramp.py's JSON, as measurements.py clock-ramp reads it: a row per idle time."""
    batches = [[0.5 * k, 2.0 if k == 0 else 1.875] for k in range(40)]
    figures = {"device": "NVIDIA H200", "torch": "2.11.0+cu130",
               "idle": {"0.3": {"batches": batches, "settled_from_ms": 0.0, "batch_ms": 1.875, "settle_s": 0.062,
                                "after_settle_ms": 1.876, "after_vs_settled": 0.0005}}}  # fmt: skip
    path = tmp_path / "clock-ramp.json"
    path.write_text(json.dumps(figures))
    record = measurements.clock_ramp(path, "580.159.04")
    assert record["measured"]["machine"] == "NVIDIA H200" and record["measured"]["torch"] == "2.11.0+cu130"
    assert record["rows"] == [["0.3 s", "2.000 / 1.875 / 1.875", "1.875 ms", "62 ms", "1.876 ms (+0.1%)"]]
    assert clock_ramp.settled_at([(0.0, 2.0), (1.0, 1.95), (2.0, 1.89), (3.0, 1.875)]) == 1.0, "1.95 is 4% off, 1.89 within 2%"


def test_a_cpu_tier_grading_of_a_tree_becomes_a_row_of_its_table(tmp_path):
    """tools/cpu_tier.py grades a tree's own solutions/ with that tree's grader, from an empty cache,
    and measurements.py's cpu-tier table reads what it left: wall time, points, each assignment's
    phases summed, the load when it began."""
    tree = tmp_path / "tree"
    shutil.copytree(REPO_ROOT / "grader", tree / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    for folder in ("assignments", "solutions"):
        shutil.copytree(REPO_ROOT / folder / "vector_add", tree / folder / "vector_add")
    out = tmp_path / "old-1"
    seconds = cpu_tier.grade(tree, out)
    wall = json.loads((out / "wall.json").read_text())
    assert wall == {"seconds": seconds, "exit": 0}, (out / "grade.log").read_text()
    results = json.loads((out / "results.json").read_text())
    assert results["extra_data"]["device"] == "cpu" and results["score"] > 0
    record = measurements.cpu_tier([f"old={out / 'results.json'}"])
    assert record["columns"] == ["grading", "wall time", "points", "vector_add", "load"]
    [row] = record["rows"]
    assert row[:3] == ["old", f"{seconds:.1f} s", f"{results['score']:g}"]
    assert 0 < float(row[3].removesuffix(" s")) <= seconds, "its phases are within its wall time"
    assert float(row[4]) >= 0
