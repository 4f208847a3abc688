"""How long the reports take to make, with pytest-benchmark: a speed goal, measured here and
written into docs/measurements.md (`tools/measurements.py report-speed`), never a pass/fail timer
in `make test`, which a busy machine would fail.

    .venv/bin/python -m pytest tests/bench_report.py --benchmark-json=bench-report.json

The grade is every part of every assignment as a GPU grading gives it (test_report._class_grade).
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

pytest.importorskip("pytest_benchmark", reason="needs pytest-benchmark: .venv/bin/pip install pytest-benchmark")

from grader.reporting import report, terminal  # noqa: E402
from test_report import _class_grade  # noqa: E402


def test_html_report(benchmark):
    html = benchmark(report.render_html, _class_grade())
    assert len(html.encode()) <= 500_000, "the report stays small enough to mail and open offline"


@pytest.mark.parametrize("width", [80, 120])
def test_terminal_table(benchmark, width):
    grade = _class_grade()
    benchmark(lambda: terminal.print_table(grade, Console(file=io.StringIO(), width=width)))
