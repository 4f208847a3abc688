"""The class's leaderboard per GPU model, under pseudonyms (course/leaderboard.py and the batch's
own boards, course/outputs.py), from each student's counted submission of each assignment."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from grader.course import leaderboard, outputs
from grader.service.auth import identify
from grader.service.tokens import Identity

router = APIRouter()


def boards(service) -> list[outputs.Board]:
    entries = {student: [graded.entry for graded in counted.values()] for student, counted in service.counted().items()}
    return outputs.leaderboards(entries, service.salt)


@router.get("/leaderboard", response_class=HTMLResponse)
def index(request: Request, identity: Identity | None = Depends(identify)) -> Response:
    if identity is None:
        return RedirectResponse("/", status_code=303)
    service = request.app.state.service
    page = service.pages.get_template("boards.html.j2")
    return HTMLResponse(page.render(boards=boards(service), me=leaderboard.pseudonym(identity.name, service.salt),
                                    device=service.device))  # fmt: skip


@router.get("/leaderboard/{file}", response_class=HTMLResponse)
def board(file: str, request: Request, identity: Identity | None = Depends(identify)) -> str:
    service = request.app.state.service
    found = next((b for b in boards(service) if b.file == file), None) if identity else None
    if found is None:
        raise HTTPException(404, "not found")
    return service.pages.get_template("leaderboard.html.j2").render(board=found)
