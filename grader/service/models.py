"""What crosses the HTTP seam, typed: the JSON the API answers (docs/students.md shows it)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

State = Literal["queued", "grading", "graded", "failed"]


class Submission(BaseModel):
    """One submission of one assignment, as its student (or a TA) may see it."""

    id: str
    assignment: str
    state: State
    points: float | None  # after the late penalty; None until graded
    max_points: float | None
    late_days: int  # by the server's clock when it was accepted; 0 when on time or without a deadline
    submitted_at: str  # UTC, ISO 8601
    position: int  # 1 for the next to be graded; 0 once grading has begun
    problem: str  # why it failed, where it did
    report: str  # the report's address on this server
    results: str  # results.json's address


class Refusal(BaseModel):
    """Why an upload was refused; `retry_after` (seconds) where the rate limit refused it."""

    detail: str
    retry_after: int | None = None
