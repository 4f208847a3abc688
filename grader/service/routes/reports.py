"""A submission's HTML report: the batch's own report, as its reader may see it."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from grader.reporting import report
from grader.service.auth import identify
from grader.service.routes.submissions import graded_only
from grader.service.tokens import Identity

router = APIRouter()


@router.get("/submissions/{id}/report.html", response_class=HTMLResponse)
def report_page(id: str, request: Request, identity: Identity | None = Depends(identify)) -> str:
    service = request.app.state.service
    graded = graded_only(service, id, identity)
    return report.render_html(graded.grade(service.course, staff=identity.staff))
