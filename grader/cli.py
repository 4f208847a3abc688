"""`python -m grader grade|batch ...` (DESIGN.md section 4).

Exit status: 0 when grading ran, whatever the score; 2 for a usage error (unknown assignment,
missing directory, no GPU for --device cuda); 1 for a fault of the grader itself.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from rich.console import Console

from grader import report
from grader.environment import DeviceError, resolve_device
from grader.grading import Settings, grade_submission
from grader.results import write_json
from grader.spec import REPO_ROOT, SpecError, load_assignments

USAGE_ERROR, GRADER_FAULT = 2, 1


class UsageError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grader", description="Grade GPU-kernel assignments.")
    commands = parser.add_subparsers(dest="command", required=True)
    grade = commands.add_parser("grade", help="grade one submission (default: starter/)")
    grade.add_argument("--submission", type=Path, default=REPO_ROOT / "starter", help="a folder laid out like starter/")
    grade.add_argument("--assignment", action="append", default=[], help="grade only this assignment (repeatable)")
    grade.add_argument("--json", type=Path, default=Path("results/results.json"), help="Gradescope results.json")
    grade.add_argument("--html", type=Path, default=Path("results/report.html"), help="the HTML report")
    grade.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    batch = commands.add_parser("batch", help="grade a whole class")
    batch.add_argument("submissions", type=Path)
    batch.add_argument("--out", type=Path, required=True)
    batch.add_argument("--assignment", action="append", default=[])
    batch.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    batch.add_argument("--workers", type=int)
    batch.add_argument("--scheduler")
    batch.add_argument("--regrade", action="store_true")
    return parser


def _assignments(names: list[str]):
    try:
        return load_assignments(names or None)
    except KeyError as error:
        raise UsageError(error.args[0]) from None


def grade(args: argparse.Namespace, console: Console) -> int:
    if not args.submission.is_dir():
        raise UsageError(f"--submission {args.submission}: no such directory")
    assignments = _assignments(args.assignment)
    device = resolve_device(args.device)
    console.print(f"Grading [bold]{args.submission}[/] on the {'GPU' if device == 'cuda' else 'CPU'} tier: "
                  f"{', '.join(a.name for a in assignments)}")  # fmt: skip
    with console.status("grading...") as status:
        settings = Settings(device=device, progress=lambda text: status.update(text))
        result = grade_submission(args.submission.resolve(), assignments, settings)
    report.print_table(result, console)
    write_json(result, args.json)
    report.write_html(result, args.html)
    console.print(f"Report: {args.html}   results.json: {args.json}")
    return 0


def batch(args: argparse.Namespace, console: Console) -> int:
    if not args.submissions.is_dir():
        raise UsageError(f"{args.submissions}: no such directory")
    _assignments(args.assignment)
    resolve_device(args.device)
    console.print("batch grading is not available in this version yet; grade each submission with "
                  "`python -m grader grade --submission DIR`")  # fmt: skip
    return GRADER_FAULT


def main(argv: list[str] | None = None) -> int:
    console = Console(stderr=False)
    try:
        args = _parser().parse_args(argv)
    except SystemExit as stop:  # argparse's own usage errors
        return USAGE_ERROR if stop.code else 0
    try:
        return grade(args, console) if args.command == "grade" else batch(args, console)
    except (UsageError, DeviceError) as error:
        console.print(f"[red]error:[/] {error}")
        return USAGE_ERROR
    except SpecError as error:
        console.print(f"[red]assignment.toml error:[/] {error}")
        return GRADER_FAULT
    except Exception:
        traceback.print_exc(file=sys.stderr)
        return GRADER_FAULT
