"""Student text as data: no control sequences reach a terminal, a report or a spreadsheet."""

from __future__ import annotations

import re

_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[PX^_][^\x1b]*(\x1b\\)?|.)")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str, limit: int | None = None) -> str:
    cleaned = _CONTROLS.sub("", _ESCAPES.sub("", str(text)))
    if limit is not None and len(cleaned) > limit:
        cleaned = cleaned[:limit] + " [...]"
    return cleaned
