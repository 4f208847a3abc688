"""The HTML report and the terminal table, rendered from results made up here (a GPU run's
speed results included, so their part of the template is exercised without a GPU)."""

from __future__ import annotations

import io

import torch
from rich.console import Console

from grader import judging, report
from grader.numerics import judge
from grader.results import Grade, TestResult
from grader.spec import Tolerance


def _speed(name: str, traffic: dict, student_ms: float, baseline_ms: float) -> TestResult:
    samples = {"student": {"event_ms": [student_ms] * 20, "hidden_ms": [0.02] * 20},
               "baseline": {"event_ms": [baseline_ms] * 20, "hidden_ms": [0.02] * 20}}  # fmt: skip
    metrics = judging.speed_metrics({"samples": samples, "copy_gbps": 4100.0}, traffic)
    return TestResult("demo", name, "performance", f"demo/{name}: speed", "ok", 1.0, 1.0, "fast", metrics)


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
    assert html.count("<svg") == 3, "one map and two time bars"
    assert "GB/s, 102% of the measured copy bandwidth" in html  # memory-bound: bandwidth
    assert "TFLOP/s against torch" in html  # compute-bound: arithmetic rate
    assert "not graded" in html
    assert "http://" not in html and "https://" not in html, "the report must open offline"


def test_terminal_table_groups_by_part_and_names_the_first_failure():
    out = io.StringIO()
    report.print_table(_grade(), Console(file=out, width=120))
    text = out.getvalue()
    assert "wrong_result" in text and "demo/rows: float32 37x1000" in text
    assert "numerics" in text and "speed" in text
    assert "1.00 points need a GPU" in text
