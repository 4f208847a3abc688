"""`python -m grader serve`: the service on uvicorn, grading on the batch's Dask engine.

The cluster is the batch's (batch.Engine: one worker per GPU, or CPU workers, or `--scheduler`'s;
`--workers` as the batch's, several sharing a GPU through its lock and as many as its memory fits),
started before the web server, with the batch's checks: no sandbox, no service (unless
--no-sandbox); the salt from course.toml's salt_file (or GRADER_SALT_FILE), never the
environment. The service needs the salt: tokens are derived from it. Rows left `grading` by a
server that was stopped or killed go back in the queue first (queue.requeue_interrupted).
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from grader.assignment.loading import load_assignments
from grader.course import batch
from grader.course.config import CourseError
from grader.reporting.report import plain
from grader.service import queue, rules, uploads
from grader.service.app import Service, create_app
from grader.service.dispatcher import Dispatcher, Grading, grade_on_worker
from grader.service.tokens import Roster


class ServeError(ValueError):
    """The service cannot start (a usage error): the message says why."""


def prepare(course_path: Path, out: Path, scheduler: str | None, workers: int | None, sandboxed: bool,
            console: Console):  # fmt: skip
    """course.toml, its [service] rules and secret, and the options of the engine."""
    assignments = load_assignments(None)
    try:
        options = batch.Options(out / ".service", out, assignments, "auto", workers, scheduler, False,
                                course=course_path, sandboxed=sandboxed)  # fmt: skip
        course, secret = batch.course_and_salt(options, console)
        service_rules = rules.load(course)
    except (batch.SetupError, CourseError) as error:
        raise ServeError(str(error)) from None
    if not secret:
        raise ServeError("the service derives each student's token from the course's secret: name its file "
                         "(course.toml's salt_file, or GRADER_SALT_FILE)")  # fmt: skip
    return options, course, secret, service_rules


def serve(course_path: Path, out: Path, host: str, port: int, scheduler: str | None, workers: int | None,
          sandboxed: bool, console: Console, task=grade_on_worker) -> int:  # fmt: skip
    import uvicorn

    options, course, secret, service_rules = prepare(course_path, out, scheduler, workers, sandboxed, console)
    out.mkdir(parents=True, exist_ok=True)
    queue.create(out / batch.GRADEBOOK)
    db = queue.connect(out / batch.GRADEBOOK)
    if requeued := queue.requeue_interrupted(db):
        console.print(f"{requeued} submission(s) were being graded when the server last stopped: queued again")
    db.close()
    try:
        engine = batch.start_engine(options, console)
    except batch.SetupError as error:
        raise ServeError(str(error)) from None
    client = engine.start()
    grading = Grading(client, engine.device, secret, sandboxed, {a.name: a for a in options.assignments}, task)
    dispatcher = Dispatcher(out / batch.GRADEBOOK, grading)
    dispatcher.start()
    service = Service(out, course, service_rules, Roster(secret, service_rules.students, service_rules.staff),
                      options.assignments, engine.device, secret, uploads.Intake(), dispatcher)  # fmt: skip
    console.print(plain(f"Grading on {engine.description} ({engine.device}); Dask scheduler {client.scheduler.address} "
                        f"(a TA's `batch --scheduler` can join it); gradebook {out / batch.GRADEBOOK}"))  # fmt: skip
    console.print(plain(f"{len(service_rules.students)} students; serving on http://{host}:{port}/"))
    try:
        uvicorn.run(create_app(service), host=host, port=port, log_level="warning", access_log=False,
                    proxy_headers=True, forwarded_allow_ips="127.0.0.1")  # fmt: skip
    finally:
        service.intake.close()
        dispatcher.stop()
        dispatcher.join(30)
        engine.close()
    return 0
