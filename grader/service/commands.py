"""The command lines of `tokens`, `serve` and `submit` (DESIGN's section 4; grader/cli.py adds them).
Nothing heavy is imported until a command runs: `grade` works without FastAPI or Dask."""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

from grader.assignment.spec import REPO_ROOT

USAGE_ERROR, GRADER_FAULT = 2, 1


def add_parsers(commands) -> None:
    tokens = commands.add_parser("tokens", help="print each student's token for the submission service (CSV)")
    tokens.add_argument("--course", type=Path, required=True, help="course.toml, with its [service] table")
    tokens.add_argument("--staff", action="store_true", help="the course staff's tokens ([service] staff) instead")
    serve = commands.add_parser("serve", help="the submission service: a queue, a web page and an API")
    serve.add_argument("--course", type=Path, required=True, help="course.toml, with its [service] table")
    serve.add_argument("--out", type=Path, required=True, help="the batch's output folder (its gradebook.sqlite)")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int,
                       help="worker processes, one grading at a time each (default: one per GPU, or 2 on the CPU); "
                            "more workers than GPUs share each GPU through its lock, as in `batch`")  # fmt: skip
    serve.add_argument("--scheduler", help="address of a running Dask scheduler to join (e.g. tcp://host:8786)")
    serve.add_argument("--no-sandbox", action="store_true", help="grade without bubblewrap, as `batch --no-sandbox`")
    submit = commands.add_parser("submit", help="submit a folder to the course's submission service")
    submit.add_argument("--server", required=True, help="the service's address, e.g. https://grader.example.edu")
    submit.add_argument("--token", default=os.environ.get("GRADER_TOKEN"),
                        help="your token, from your course staff (default: $GRADER_TOKEN, which keeps it out of "
                             "the shell's history and of `ps`)")  # fmt: skip
    submit.add_argument("--submission", type=Path, default=REPO_ROOT / "starter", help="a folder laid out like starter/")
    submit.add_argument("--assignment", action="append", default=[], help="submit only this assignment (repeatable)")
    submit.add_argument("--json", type=Path, help="write the results.json here too")


def _error(console: Console, text: object) -> int:
    console.print(Text.assemble(("error:", "red"), " ", Text(str(text))))
    return USAGE_ERROR


def tokens(args: argparse.Namespace, console: Console) -> int:
    from grader.assignment.loading import assignment_names
    from grader.course import salt
    from grader.course.config import CourseError, load_course, read_course_salt
    from grader.service import rules
    from grader.service.tokens import token_for

    if not args.course.is_file():
        return _error(console, f"--course {args.course}: no such file")
    try:
        course = load_course(args.course, assignment_names())
        secret = read_course_salt(course) or salt.from_environment()
        found = rules.load(course)
    except (CourseError, salt.SaltError) as error:
        return _error(console, error)
    if not secret:
        return _error(console, "tokens are derived from the course's secret: name its file (course.toml's salt_file, "
                               "or GRADER_SALT_FILE)")  # fmt: skip
    writer = csv.writer(sys.stdout)
    writer.writerow(["staff" if args.staff else "student", "token"])
    for name in found.staff if args.staff else found.students:
        writer.writerow([name, token_for(secret, name)])
    return 0


def serve(args: argparse.Namespace, console: Console) -> int:
    try:
        from grader.service import server
    except ImportError as error:
        console.print(f"[red]error:[/] the service needs FastAPI, uvicorn, python-multipart and dask[distributed] "
                      f"({error}); `make .venv/.ready` installs them where the network allows")  # fmt: skip
        return GRADER_FAULT
    if not args.course.is_file():
        return _error(console, f"--course {args.course}: no such file")
    try:
        return server.serve(args.course.resolve(), args.out.resolve(), args.host, args.port, args.scheduler,
                            args.workers, not args.no_sandbox, console)  # fmt: skip
    except server.ServeError as error:
        return _error(console, error)


def submit(args: argparse.Namespace, console: Console) -> int:
    from grader.assignment.loading import assignment_names
    from grader.service import client

    if not args.token:
        return _error(console, "no token: give --token, or set GRADER_TOKEN (your course staff hands it out)")
    if not args.submission.is_dir():
        return _error(console, f"--submission {args.submission}: no such directory")
    known = assignment_names()
    if unknown := [name for name in args.assignment if name not in known]:
        return _error(console, f"no such assignment: {', '.join(unknown)} (known: {', '.join(known)})")
    try:
        return client.submit(args.server, args.token, args.submission, args.assignment or known, args.json, console)
    except client.Unreachable as error:
        console.print(Text.assemble(("error:", "red"), f" the server does not answer: {error}"))
        return GRADER_FAULT


COMMANDS = {"tokens": tokens, "serve": serve, "submit": submit}
