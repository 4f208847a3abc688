"""`python -m grader grade|profile|batch|override|release|gradescope|tokens|serve|submit ...` (docs/staff.md).

Exit status: 0 when grading ran, whatever the score; 2 for a usage error (unknown assignment,
missing directory, no GPU for --device cuda); 1 for a fault of the grader itself.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path

from rich.console import Console
from rich.text import Text

from grader.kernels import profiling
from grader.reporting import profile_table, report, terminal
from grader.running.compile_cache import CACHE_ROOT
from grader.running.environment import DeviceError, resolve_device
from grader.running import early_workers, gpu_lock, overlap
from grader.running.gpu_lock import GpuLock
from grader.grading import Settings, grade_submission
from grader.reporting.results_json import write_json
from grader.assignment.loading import load_assignments
from grader.assignment.spec import REPO_ROOT
from grader.assignment.toml_table import SpecError
from grader.service import commands as service

USAGE_ERROR, GRADER_FAULT = 2, 1


class UsageError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grader", description="Grade GPU-kernel assignments.")
    commands = parser.add_subparsers(dest="command", required=True)
    grade = commands.add_parser("grade", help="grade one submission (default: starter/)")
    profile = commands.add_parser("profile", help="grade, then profile each timed case under Nsight Compute (advice)")
    for command in (grade, profile):
        command.add_argument("--submission", type=Path, default=REPO_ROOT / "starter", help="a folder laid out like starter/")
        command.add_argument("--assignment", action="append", default=[], help="grade only this assignment (repeatable)")
        command.add_argument("--json", type=Path, default=Path("results/results.json"), help="Gradescope results.json")
        command.add_argument("--html", type=Path, default=Path("results/report.html"), help="the HTML report")
        command.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    profile.add_argument("--timeout-s", type=float, default=profiling.TIMEOUT_S, help="the limit of each profiled case")
    batch = commands.add_parser("batch", help="grade a whole class on Dask, resumably")
    batch.add_argument("submissions", type=Path, help="a folder or archive per student, or a Gradescope export")
    batch.add_argument("--out", type=Path, required=True, help="reports, grades.csv, summary.html, gradebook.sqlite")
    batch.add_argument("--assignment", action="append", default=[], help="grade only this assignment (repeatable)")
    batch.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    batch.add_argument("--workers", type=int, help="worker processes (default: one per GPU, or 2 on the CPU)")
    batch.add_argument("--scheduler", help="address of a running Dask scheduler to join (e.g. tcp://host:8786)")
    batch.add_argument("--regrade", action="store_true", help="grade again what the gradebook already holds")
    batch.add_argument("--no-sandbox", action="store_true",
                       help="grade without bubblewrap (student code runs as you, walled by Landlock where the kernel "
                            "has it); without this flag a batch refuses to start where no sandbox works")  # fmt: skip
    batch.add_argument("--student", action="append", default=None,
                       help="grade only this student (repeatable); the others' stored grades stay in the outputs")
    batch.add_argument("--course", type=Path, help="course.toml: deadlines, late policy, similarity, leaderboard, Canvas")
    batch.add_argument("--advisory", action="store_true",
                       help="on the CPU tier, export canvas.csv anyway, under columns marked advisory (without a GPU "
                            "the points are advice: nothing is timed and no CUDA C runs)")  # fmt: skip
    override = commands.add_parser("override", help="set a student's points for an assignment, with a reason")
    override.add_argument("--out", type=Path, required=True, help="the batch's output folder (its gradebook.sqlite)")
    override.add_argument("student", help="the student as the batch names them")
    override.add_argument("assignment", help="the assignment")
    override.add_argument("--points", type=float,
                          help="the assignment's points for the student: 0 to its most, bonus included")  # fmt: skip
    override.add_argument("--clear", action="store_true", help="remove the override in force (the history keeps it)")
    override.add_argument("--reason", required=True, help="why, in words the student will read")
    release = commands.add_parser("release", help="write the student bundle: no solutions, no known-wrong submissions")
    release.add_argument("--out", type=Path, required=True, help="a new folder for the bundle")
    gradescope = commands.add_parser("gradescope", help="write Gradescope's autograder zip")
    gradescope.add_argument("--out", type=Path, default=Path("autograder.zip"), help="the zip to write")
    service.add_parsers(commands)  # tokens, serve, submit: the submission service (grader/service/)
    return parser


def _assignments(names: list[str]):
    try:
        return load_assignments(names or None)
    except KeyError as error:
        raise UsageError(error.args[0]) from None


def side_by_side(device: str, assignments: list) -> int:
    """How many assignments `grade` grades at once: on a GPU, all of them if the cores allow, and as
    many as its memory holds (early_workers.at_once, overlap.py); one after another on the CPU."""
    return early_workers.at_once(len(assignments)) if device == "cuda" else 1


def grade(args: argparse.Namespace, console: Console, profile: bool = False) -> int:
    if not args.submission.is_dir():
        raise UsageError(f"--submission {args.submission}: no such directory")
    gpu_lock.note("grade begins")
    report.compile_ahead()
    assignments = _assignments(args.assignment)
    device = resolve_device(args.device)
    # A folder's name is whatever the student (or their archive) called it: printed as text, not markup.
    tier = "GPU" if device == "cuda" else "CPU"
    console.print(Text.assemble("Grading ", report.plain(args.submission, "bold"), f" on the {tier} tier: ",
                                ", ".join(a.name for a in assignments)))  # fmt: skip
    with console.status("grading...") as status:
        # Kernels compiled here stay for the next grading of the same files (compile_cache.py); on
        # a GPU the assignments are graded side by side (overlap.py).
        # On a GPU, every grading of the machine takes turns to time through one lock (gpu_lock.py).
        parallel = side_by_side(device, assignments)
        settings = Settings(device=device, progress=lambda text: status.update(text), cache=CACHE_ROOT,
                            owner=str(args.submission.resolve()), parallel=parallel, gradings=parallel,
                            gpu_lock=GpuLock.for_this_gpu() if device == "cuda" else None,
                            remove_later=True)  # fmt: skip
        result = grade_submission(args.submission.resolve(), assignments, settings)
    # The results first: whatever the terminal makes of the student's text, the grade is on disk.
    write_json(result, args.json)
    gpu_lock.note("results written")
    report.write_html(result, args.html)
    gpu_lock.note("results and report written")
    terminal.print_table(result, console)
    gpu_lock.note("grade reported")
    overlap.join_workers()  # they ended while the results were written and shown
    if profile:  # each timed case once more, under Nsight Compute (advice, never the grade)
        with console.status("profiling...") as status:
            profiled = profiling.profile(result, args.submission.resolve(), assignments, device, status.update,
                                         args.timeout_s)  # fmt: skip
        profiling.write_json(profiled, args.json.with_name("profile.json"))
        report.write_html(result, args.html, profiled)
        profile_table.print_profile(profiled, console, str(args.html))
    console.print(report.plain(f"Report: {args.html}   results.json: {args.json}"))
    return 0


def profile(args: argparse.Namespace, console: Console) -> int:
    return grade(args, console, profile=True)


def batch(args: argparse.Namespace, console: Console) -> int:
    if not args.submissions.is_dir():
        raise UsageError(f"{args.submissions}: no such directory")
    assignments = _assignments(args.assignment)
    try:  # Dask is imported here only: `grade` works without it
        from grader.course import batch as engine
        from grader.course.intake import IntakeError
    except ImportError as error:
        console.print(f"[red]error:[/] batch grading needs dask[distributed] ({error}); "
                      "install it with `.venv/bin/pip install 'dask[distributed]'`")  # fmt: skip
        return GRADER_FAULT

    if args.course is not None and not args.course.is_file():
        raise UsageError(f"--course {args.course}: no such file")
    students = frozenset(args.student) if args.student else None
    try:
        options = engine.Options(args.submissions.resolve(), args.out.resolve(), assignments, args.device,
                                 args.workers, args.scheduler, args.regrade, students,
                                 args.course.resolve() if args.course else None, sandboxed=not args.no_sandbox,
                                 advisory=args.advisory)  # fmt: skip
        return engine.run(options, console)
    except (IntakeError, engine.SetupError) as error:
        raise UsageError(str(error)) from None


def override(args: argparse.Namespace, console: Console) -> int:
    """Keep the override (or its removal) in the gradebook, then write the last batch's outputs
    again (grading nobody)."""
    from grader.course import overrides
    from grader.course.gradebook import Gradebook

    book_path = args.out / "gradebook.sqlite"
    if not book_path.is_file():
        raise UsageError(f"--out {args.out}: no gradebook.sqlite there (run `batch` first)")
    if (args.points is None) == (not args.clear) or not args.reason.strip():
        raise UsageError("give --points P or --clear (one of them), and --reason saying why")
    [assignment] = _assignments([args.assignment])
    with Gradebook(book_path) as book:
        if args.student not in overrides.graded_students(book.connection):
            raise UsageError(f"{args.student}: no grade for this student in {book_path}")
        try:
            if args.clear:
                done = overrides.clear(book.connection, args.student, args.assignment, args.reason.strip())
            else:
                overrides.check_points(args.points, assignment.points_possible(bonus=True))
                done = overrides.record(book.connection, args.student, args.assignment, args.points,
                                        args.reason.strip())  # fmt: skip
        except overrides.OverrideError as error:
            raise UsageError(str(error)) from None
        last = overrides.last_batch(book.connection)
    what = f"cleared (it was {done.points:g} points)" if done.cleared else f"= {done.points:g} points"
    console.print(report.plain(f"Override kept ({done.made_at}): {done.student} {done.assignment} {what}: "
                               f"{done.reason}"))  # fmt: skip
    if last is None:
        console.print("No batch has run into this folder yet: the next `batch` shows the override.")
        return 0
    return _rewrite(args.out, last, console)


def _rewrite(out: Path, last: dict, console: Console) -> int:
    """The last batch's outputs written again from the gradebook, as that batch was run, grading nobody."""
    from grader.course import batch as engine

    options = engine.Options(Path(last["submissions"]), out.resolve(), _assignments(last["assignments"]),
                             last["device"], None, None, False, frozenset(),
                             Path(last["course"]) if last["course"] else None,
                             advisory=bool(last.get("advisory")))  # fmt: skip
    try:
        return engine.run(options, console)
    except (engine.SetupError, engine.intake.IntakeError) as error:
        raise UsageError(str(error)) from None


def release(args: argparse.Namespace, console: Console) -> int:
    from grader.course import release as bundle

    try:
        files = bundle.build(args.out)
    except bundle.ReleaseError as error:
        raise UsageError(str(error)) from None
    console.print(f"Student bundle: {args.out} ({len(files)} files; no solutions/). "
                  "Check it with `make test` inside it.")  # fmt: skip
    return 0


def gradescope(args: argparse.Namespace, console: Console) -> int:
    from grader.reporting import gradescope as autograder

    names = autograder.build_zip(args.out)
    console.print(f"Gradescope autograder: {args.out} ({len(names)} files). Upload it as the assignment's "
                  "autograder; run_autograder grades /autograder/submission.")  # fmt: skip
    return 0


COMMANDS = {"grade": grade, "profile": profile, "batch": batch, "override": override, "release": release,
            "gradescope": gradescope, **service.COMMANDS}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    console = Console(stderr=False)
    try:
        args = _parser().parse_args(argv)
    except SystemExit as stop:  # argparse's own usage errors
        return USAGE_ERROR if stop.code else 0
    try:
        return COMMANDS[args.command](args, console)
    except (UsageError, DeviceError) as error:  # may name a student's archive or its entries
        console.print(Text.assemble(("error:", "red"), " ", report.plain(error)))
        return USAGE_ERROR
    except SpecError as error:
        console.print(Text.assemble(("assignment.toml error:", "red"), " ", report.plain(error)))
        return GRADER_FAULT
    except Exception:
        traceback.print_exc(file=sys.stderr)
        return GRADER_FAULT
