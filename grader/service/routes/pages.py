"""The student's pages: sign in with the token, then one page with the upload form, the deadlines,
the queue and one's own history. Server-rendered (templates/), no script: a page with a grading
under way reloads itself every few seconds."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Form, Request
from starlette.datastructures import UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from anyio import to_thread

from grader.service import queue, standing
from grader.service.auth import COOKIE, form_of_session, from_this_site, identify
from grader.service.routes.submissions import INTAKE, Refused, accept
from grader.service.tokens import SESSION_HOURS, Identity

router = APIRouter()


def render(request: Request, name: str, status: int = 200, **values) -> HTMLResponse:
    service = request.app.state.service
    page = service.pages.get_template(name).render(**values)
    return HTMLResponse(page, status_code=status)


def home(request: Request, identity: Identity, message: str = "", status: int = 200) -> HTMLResponse:
    service = request.app.state.service
    now = queue.now()
    with service.db() as db:
        rows = queue.of_student(db, identity.name)
        positions = {row.id: queue.position(db, row) for row in rows}
        load = queue.load(db, now)
    history = service.graded(rows)
    counted = standing.counted(history, service.rules.counts, service.course)
    deadlines = [{"assignment": a.name, "text": standing.deadline(service.course, identity.name, a.name, now),
                  "counted": counted.get(a.name)} for a in service.assignments]  # fmt: skip
    return render(request, "home.html.j2", status, identity=identity, history=history, positions=positions,
                  load=load, deadlines=deadlines, course=service.course, rules=service.rules, message=message,
                  assignments=[a.name for a in service.assignments], device=service.device,
                  csrf=service.roster.csrf(request.cookies.get(COOKIE, "")),
                  busy=any(row.state in ("queued", "grading") for row in rows))  # fmt: skip


@router.get("/", response_class=HTMLResponse)
def index(request: Request, accepted: int = 0, identity: Identity | None = Depends(identify)) -> Response:
    if identity is None:
        return render(request, "signin.html.j2")
    return home(request, identity, f"Accepted: {accepted} submission(s) queued." if accepted else "")


@router.post("/signin")
def sign_in(request: Request, token: str = Form("")) -> Response:
    from_this_site(request)
    service = request.app.state.service
    identity = service.roster.who(token)
    if identity is None:
        return render(request, "signin.html.j2", 401, message="That is not a token of this course.")
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(COOKIE, service.roster.session(identity, time.time()), max_age=SESSION_HOURS * 3600,
                        httponly=True, samesite="strict", secure=request.url.scheme == "https")  # fmt: skip
    return response


@router.post("/signout")
def sign_out(identity: Identity = Depends(form_of_session)) -> Response:
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(COOKIE, httponly=True, samesite="strict")
    return response


@router.post("/upload")
async def upload_form(request: Request, identity: Identity = Depends(form_of_session)) -> Response:
    form = await request.form()
    archive = form.get("archive")
    if not isinstance(archive, UploadFile) or not archive.filename:
        return home(request, identity, "Choose a zip of your folder first.", 400)
    requested = [str(name) for name in form.getlist("assignment")]
    try:
        rows = await to_thread.run_sync(accept, request.app.state.service, identity, archive.file, requested,
                                        limiter=INTAKE)  # fmt: skip
    except Refused as refused:
        when = f" (try again in {refused.retry_after} s)" if refused.retry_after else ""
        response = home(request, identity, f"Refused: {refused.detail}{when}", refused.status)
        if refused.retry_after:
            response.headers["Retry-After"] = str(refused.retry_after)
        return response
    return RedirectResponse(f"/?accepted={len(rows)}", status_code=303)


