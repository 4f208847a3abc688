"""The ASGI app: the service's state, its routers, and what every answer carries.

Each router serves one resource (routes/): the submissions API, the reports, the student's pages,
the leaderboard and the class page. Every request reads the gradebook through a connection of its
own (sqlite3 in the threads FastAPI runs plain functions in); only the dispatcher grades. Every
answer forbids scripts, framing and sniffing (a report holds text the student wrote: it is escaped,
and no script would run anyway), is not cached, and leaks no address to another site.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from jinja2 import ChoiceLoader, Environment, FileSystemLoader

from grader.assignment.spec import Assignment
from grader.course.batch import GRADEBOOK
from grader.course.config import Course
from grader.course.gradebook import Gradebook, Key
from grader.reporting import report
from grader.service import queue, standing, uploads
from grader.service.dispatcher import Dispatcher
from grader.service.rules import Rules
from grader.service.standing import Graded
from grader.service.tokens import Identity, Roster

TEMPLATES = Path(__file__).parent / "templates"
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # "no-referrer" would make a browser post `Origin: null`
    "Cache-Control": "no-store",
}
MULTIPART_SLACK = 2**16  # a form's fields and boundaries around the archive


@dataclass
class Service:
    out: Path
    course: Course
    rules: Rules
    roster: Roster
    assignments: list[Assignment]
    device: str  # the tier the workers grade on
    salt: str
    intake: uploads.Intake  # where uploads are unpacked
    dispatcher: Dispatcher | None = None
    pages: Environment = field(default_factory=lambda: pages_environment())

    @property
    def book(self) -> Path:
        return self.out / GRADEBOOK

    @contextlib.contextmanager
    def db(self):
        connection = queue.connect(self.book)
        try:
            yield connection
        finally:
            connection.close()

    def graded(self, rows: list[queue.Row]) -> list[Graded]:
        """Each row with the grade the gradebook holds for it."""
        with Gradebook(self.book) as book:
            return [Graded(row, book.lookup(Key(row.student, row.assignment, row.submission_hash, row.grader_version),
                                            row.device) if row.state == "graded" else None) for row in rows]  # fmt: skip

    def counted(self) -> dict[str, dict[str, Graded]]:
        """student -> assignment -> the submission that counts (standing.counted), for the whole class."""
        with self.db() as db:
            rows = queue.in_state(db, "graded")
        by_student: dict[str, list[Graded]] = {}
        for graded in self.graded(rows):
            by_student.setdefault(graded.row.student, []).append(graded)
        return {student: standing.counted(mine, self.rules.counts, self.course) for student, mine in by_student.items()}

    def readable(self, id: str, identity: Identity | None) -> Graded:
        """The submission `id` if `identity` may read it; else 404, as for an id that does not exist,
        so that nobody learns whether another student's id exists."""
        with self.db() as db:
            row = queue.get(db, id)
        if row is None or identity is None or not identity.may_read(row.student):
            raise HTTPException(404, "not found")
        return self.graded([row])[0]


def pages_environment() -> Environment:
    """The reports' Jinja2 environment (its escaping and filters), finding the service's pages first."""
    shared = report.templates()
    return shared.overlay(loader=ChoiceLoader([FileSystemLoader(TEMPLATES), shared.loader]))


class UploadCap:
    """No request body past the upload cap: refused by its Content-Length before it is read, or
    cut off where it passes the cap while it is read (413)."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if (int(declared) if declared.isdigit() else 0) > self.limit:
            return await self.too_large(scope, receive, send)
        seen, started = 0, False

        async def counted():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooLarge
            return message

        async def sending(message):
            nonlocal started
            started = True
            await send(message)

        try:
            await self.app(scope, counted, sending)
        except _TooLarge:
            if not started:
                await self.too_large(scope, receive, send)

    async def too_large(self, scope, receive, send) -> None:
        detail = f"the upload is larger than this course's cap ({self.limit // 2**20} MiB)"
        await JSONResponse({"detail": detail}, status_code=413, headers=HEADERS)(scope, receive, send)


class _TooLarge(Exception):
    pass


def create_app(service: Service) -> FastAPI:
    from grader.service.routes import classpage, leaderboard, pages, reports, submissions

    app = FastAPI(title="kernel-grader submissions", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.service = service
    for router in (submissions.router, reports.router, pages.router, leaderboard.router, classpage.router):
        app.include_router(router)

    @app.middleware("http")
    async def headers(request: Request, call_next):
        response = await call_next(request)
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    @app.get("/health")
    def health() -> dict:
        """For a proxy's or a script's checks: whether the dispatcher runs, and the queue."""
        with service.db() as db:
            load = queue.load(db, queue.now())
        dispatcher = service.dispatcher
        alive = dispatcher is not None and dispatcher.is_alive()
        return {"grading": alive, "failure": dispatcher.failure if dispatcher else "", "queued": load["queued"],
                "in_progress": load["grading"], "device": service.device,
                "max_upload_mb": service.rules.max_upload_mb}  # fmt: skip

    app.add_middleware(UploadCap, limit=service.rules.max_upload_bytes + MULTIPART_SLACK)
    return app
