"""What a person reads: a compact table in the terminal and a self-contained HTML report.

The HTML comes from Jinja2 templates in grader/templates/ (inline CSS and SVG, nothing fetched
from the network), so a report opens the same on a laptop offline as on a course server.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader import stack
from grader.results import Grade, TestResult, possible, summary_line
from grader.text import printable

TEMPLATES = Path(__file__).parent / "templates"

HINTS = {
    "not_implemented": "The stub still raises NotImplementedError. Fill in the function body.",
    "missing_file": "Keep the starter's file names and folders: <assignment>/<file> inside the submission.",
    "syntax_error": "Python could not parse the file. Fix the line shown, then run `make grade` again.",
    "import_error": "The file failed while being imported. Import only torch, triton and your own modules.",
    "missing_entry_point": "The grader calls the function by the name in the handout; keep that name and signature.",
    "compile_error": "The kernel did not compile. Read the compiler's message: it names the line.",
    "wrong_shape": "Return a tensor of the shape the handout gives (usually the input's shape).",
    "wrong_dtype": "Return the input's dtype: compute in float32 inside the kernel, store in the output dtype.",
    "wrong_result": "Look at the map: a bad last block points at a mask, every row bad at a reduction or stride.",
    "nan_or_inf": "An overflow or a masked-off lane read as a real number: subtract the row max, load -inf.",
    "unwritten_output": "Some outputs were never stored: check the grid covers every row/block and the store mask.",
    "input_modified": "Inputs are read-only: write results into a tensor you allocate.",
    "forbidden_op": "The torch op this assignment replaces ran during your call: compute it in your kernel.",
    "no_kernel_launched": "The work must happen in a Triton kernel defined in your own file.",
    "not_fused": "This part must be a single kernel launch.",
    "too_slow": "Correct but slower than the threshold: check memory access patterns and block sizes.",
    "timeout": "The call did not finish in time: look for a loop that never ends or a huge grid.",
    "crash": "The process died or raised: the message and traceback show where.",
    "out_of_memory": "The call allocated more memory than the machine allows.",
    "no_gpu": "Speed is graded on a GPU only; on this machine it is not graded.",
    "tampering": "The measurement itself was disturbed. Time your kernel honestly.",
}


def status_of(test: TestResult) -> str:
    if not test.graded:
        return "not graded"
    if test.passed:
        return "passed"
    return "partial" if test.score > 0 else "failed"


COLOURS = {"passed": "green", "partial": "yellow", "failed": "red", "not graded": "dim"}
CHECKS = {"build": "load", "correctness": "numerics", "performance": "speed", "integrity": "integrity"}


def _groups(grade: Grade) -> dict[tuple[str, str, str], list[TestResult]]:
    """Tests by (assignment, part, kind), in the order they were graded."""
    groups: dict[tuple[str, str, str], list[TestResult]] = {}
    for test in grade.tests:
        groups.setdefault((test.assignment, test.part, test.kind), []).append(test)
    return groups


def _group_status(tests: list[TestResult]) -> str:
    graded = [t for t in tests if t.graded]
    if not graded:
        return "not graded"
    if all(t.passed for t in graded):
        return "passed"
    return "partial" if sum(t.score for t in graded) > 0 else "failed"


def _reasons(tests: list[TestResult]) -> str:
    counts = Counter(t.reason for t in tests if not t.passed)
    return ", ".join(f"{reason} x{n}" if n > 1 else reason for reason, n in counts.most_common()) or "ok"


def _points(tests: list[TestResult]) -> str:
    if tests and all(t.bonus for t in tests):  # extra credit: out of its own points, which the total leaves out
        return f"{sum(t.score for t in tests):.2f}/{sum(t.max_score for t in tests):.2f} bonus"
    return f"{sum(t.score for t in tests):.2f}/{possible(tests):.2f}"


def plain(text: object, style: str = "") -> Text:
    """Text for Rich that is printed as it reads: a `Text` is never parsed as markup, so a student's
    `[/]` cannot make Rich raise, and printable() leaves no escape sequence for the terminal."""
    return Text(printable(text), style=style)


def print_table(grade: Grade, console: Console | None = None) -> None:
    """One row per part and kind of test (load rows only when a file failed to load), then each
    part's first failure in one line: enough to know what to fix; the HTML report has the rest."""
    console = console or Console()
    table = Table(title=plain(f"Grades for {grade.submission}"))
    for column in ("assignment", "part", "check", "passed", "reasons", "points"):
        table.add_column(column, justify="right" if column in ("passed", "points") else "left")
    first_failures = []
    for (assignment, part, kind), tests in _groups(grade).items():
        status = _group_status(tests)
        failed = [t for t in tests if t.graded and not t.passed]
        if failed and kind != "build":
            first_failures.append(failed[0])
        if kind == "build" and status == "passed":
            continue
        passed = plain(f"{sum(t.passed for t in tests)}/{len(tests)}", COLOURS[status])
        table.add_row(*map(plain, (assignment, part, CHECKS[kind])), passed, plain(_reasons(tests)), _points(tests))
    console.print(table)
    for test in first_failures:  # the first thing to fix in each part
        lines = printable(test.output).strip().splitlines() or [""]
        console.print(Text.assemble(plain(test.reason, "red"), " ", plain(test.name), ": ", printable(lines[0], 200)),
                      highlight=False)  # fmt: skip
    console.print(summary_line(grade), markup=False)
    if warning := stack.warning(grade.environment):
        console.print(Text(warning, style="bold red"))


def _finalize(value: object) -> object:
    """Every `{{ ... }}` passes here before autoescaping: what a student wrote shows as its
    characters, with no control or bidi character to hide or reorder it in the browser."""
    return value if isinstance(value, Markup) else printable(value)


def templates() -> Environment:
    """The Jinja2 environment of every HTML page (this report and the class summary)."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]),
                      finalize=_finalize)  # fmt: skip
    env.filters["status"] = status_of
    env.filters["possible"] = possible
    return env


def render_html(grade: Grade) -> str:
    template = templates().get_template("report.html.j2")
    return template.render(grade=grade, groups=grade.by_assignment(), hints=HINTS, summary=summary_line(grade),
                           warning=stack.warning(grade.environment))  # fmt: skip


def write_html(grade: Grade, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(grade))
