"""The submissions API: upload, list, one submission, its results.json and its grade.

`POST /api/submissions` takes the archive as the request's body (`Content-Type: application/zip`;
a tarball works too) and the assignments to grade as `?assignment=NAME` (repeatable; none: those
the archive holds), with a bearer token only: a browser's session posts through the page's form
(pages.py), which carries a CSRF token. Everything a student may not read answers 404.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from dataclasses import dataclass

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse
from anyio import CapacityLimiter, to_thread

import grader
from grader.reporting.results_json import gradescope
from grader.service import models, queue, uploads
from grader.service.auth import identify, signed_in
from grader.service.standing import Graded
from grader.service.tokens import Identity

router = APIRouter()
# Uploads unpacked at once: more would hold the threads that pages are answered in (and the GIL)
# while a class uploads before a deadline; the rest wait their turn without a thread.
INTAKE = CapacityLimiter(2)


@dataclass
class Refused(Exception):
    status: int
    detail: str
    retry_after: int | None = None

    def response(self) -> JSONResponse:
        headers = {"Retry-After": str(self.retry_after)} if self.retry_after else None
        return JSONResponse(models.Refusal(detail=self.detail, retry_after=self.retry_after).model_dump(),
                            status_code=self.status, headers=headers)  # fmt: skip


def accept(service, identity: Identity, archive, requested: list[str]) -> list[queue.Row]:
    """An upload through the batch's intake into the queue; Refused with the reason (400, or 429
    with the seconds until the rate limit allows one more). Blocking: call it in a thread."""
    try:
        known = [a.name for a in service.assignments]
        upload = service.intake.receive(archive, identity.name, service.out, requested, known)
    except uploads.Refused as error:
        raise Refused(400, str(error)) from None
    rows = {name: (str(upload.root), digest) for name, digest in upload.hashes.items()}
    with service.db() as db:
        found = queue.accept(db, identity.name, rows, grader.__version__, service.rules.per_hour, queue.now())
    if isinstance(found, queue.Limited):
        shutil.rmtree(upload.folder, ignore_errors=True)
        raise Refused(429, f"{found.assignment}: at most {service.rules.per_hour} submissions an hour; "
                           f"try again in {found.retry_after} s", found.retry_after)  # fmt: skip
    if service.dispatcher is not None:
        service.dispatcher.wake.set()
    return found


def described(service, graded: Graded, db) -> models.Submission:
    row = graded.row
    return models.Submission(id=row.id, assignment=row.assignment, state=row.state,
                             points=graded.points(service.course), max_points=graded.max_points(),
                             late_days=graded.late_days(service.course), submitted_at=row.submitted_at,
                             position=queue.position(db, row), problem=row.problem,
                             report=f"/submissions/{row.id}/report.html",
                             results=f"/api/submissions/{row.id}/results.json")  # fmt: skip


@router.post("/api/submissions", status_code=202, response_model=list[models.Submission],
             responses={400: {"model": models.Refusal}, 413: {"model": models.Refusal}, 429: {"model": models.Refusal}})
async def upload(request: Request, assignment: list[str] = Query(default=[]),
                 identity: Identity | None = Depends(identify)):  # fmt: skip
    if identity is None or not request.headers.get("authorization"):
        raise HTTPException(401, "send your token as `Authorization: Bearer TOKEN` (the web page has its own form)",
                            headers={"WWW-Authenticate": "Bearer"})  # fmt: skip
    service = request.app.state.service
    with tempfile.SpooledTemporaryFile(max_size=2**20) as archive:
        async for chunk in request.stream():  # the size cap is app.UploadCap's
            archive.write(chunk)
        archive.seek(0)
        try:
            rows = await to_thread.run_sync(accept, service, identity, archive, assignment, limiter=INTAKE)
        except Refused as refused:
            return refused.response()
    with service.db() as db:
        return [described(service, graded, db) for graded in service.graded(rows)]


@router.get("/api/submissions", response_model=list[models.Submission])
def listing(request: Request, identity: Identity = Depends(signed_in)):
    """The student's own submissions, newest first (a TA's: everyone's)."""
    service = request.app.state.service
    with service.db() as db:
        rows = queue.in_state(db, *queue.STATES)[::-1] if identity.staff else queue.of_student(db, identity.name)
        return [described(service, graded, db) for graded in service.graded(rows)]


@router.get("/api/submissions/{id}", response_model=models.Submission)
def one(id: str, request: Request, identity: Identity | None = Depends(identify)):
    service = request.app.state.service
    graded = service.readable(id, identity)
    with service.db() as db:
        return described(service, graded, db)


def graded_only(service, id: str, identity: Identity | None) -> Graded:
    graded = service.readable(id, identity)
    if graded.entry is None:
        raise HTTPException(409, f"submission {id} is {graded.row.state}, not graded")
    return graded


@router.get("/api/submissions/{id}/results.json")
def results(id: str, request: Request, identity: Identity | None = Depends(identify)):
    """Gradescope's results.json, as the reader may see it (hidden cases until they are revealed)."""
    service = request.app.state.service
    graded = graded_only(service, id, identity)
    return gradescope(graded.grade(service.course, staff=identity.staff))


@router.get("/api/submissions/{id}/grade")
def grade(id: str, request: Request, identity: Identity | None = Depends(identify)) -> Response:
    """The Grade itself (what `submit` prints the terminal table from), NaN kept as Python's JSON writes it."""
    service = request.app.state.service
    found = graded_only(service, id, identity).grade(service.course, staff=identity.staff)
    return Response(json.dumps(dataclasses.asdict(found)), media_type="application/json")
