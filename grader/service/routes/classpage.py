"""The class page for the TAs: the batch's class summary (reporting/summary.py), made from each
student's counted submissions, with the service's queue and load on top; and each student's report."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from grader.course import overrides
from grader.reporting import report, summary
from grader.reporting.results import Grade
from grader.service import queue
from grader.service.auth import staff
from grader.service.tokens import Identity

router = APIRouter()


def class_grades(service) -> tuple[dict[str, Grade], dict[str, list]]:
    """Each student's counted submissions as one Grade (overrides and late penalties applied), and their entries."""
    with service.db() as db:
        forced = overrides.in_force(db)
    grades, entries = {}, {}
    for student, counted in sorted(service.counted().items()):
        parts = [g.grade(service.course, forced.get((student, g.row.assignment)), staff=True) for g in counted.values()]
        entries[student] = [g.entry for g in counted.values()]
        environment = summary.student_grade(student, entries[student]).environment
        grades[student] = Grade(student, [t for p in parts for t in p.tests], environment, sum(p.seconds for p in parts),
                                [a for p in parts for a in p.adjustments])  # fmt: skip
    return grades, entries


@router.get("/class")
def bare(identity: Identity = Depends(staff)) -> RedirectResponse:
    return RedirectResponse("/class/", status_code=303)


@router.get("/class/", response_class=HTMLResponse)
def class_page(request: Request, identity: Identity = Depends(staff)) -> str:
    service = request.app.state.service
    grades, entries = class_grades(service)
    page = summary.class_summary(grades, entries, {}, service.assignments)
    with service.db() as db:
        page["service"] = {**queue.load(db, queue.now()), "device": service.device, "counts": service.rules.counts,
                           "workers": service.dispatcher.capacity() if service.dispatcher else 0}  # fmt: skip
    return service.pages.get_template("summary.html.j2").render(**page)


@router.get("/class/{student}/report.html", response_class=HTMLResponse)
def student_report(student: str, request: Request, identity: Identity = Depends(staff)) -> str:
    grades, _ = class_grades(request.app.state.service)
    if student not in grades:
        raise HTTPException(404, "not found")
    return report.render_html(grades[student])
