"""Student text as data: no control sequences reach a terminal, a report or a spreadsheet.

Exception messages, stdout and file names come from code that may be hostile, and they end up in
a TA's terminal, in HTML, in Gradescope's results.json and in grades.csv. `printable` keeps the
characters a person reads and drops the ones a device obeys; it runs where text crosses from the
child (grader/messages/decoding.py, grader/running/isolation.py) and again wherever text is printed or written, so
text made in the parent is covered too. Markup (Rich's `[...]`, HTML's `<...>`) is the job of each
output: Rich gets `Text` objects, Jinja2 autoescapes.
"""

from __future__ import annotations

import re
import unicodedata

# Whole escape sequences, in their 7-bit (ESC ...) and 8-bit (C1) forms. CSI moves the cursor,
# clears the screen and colours text (a fake green "Score 100/100"); OSC sets the window title,
# writes the clipboard (OSC 52) and makes links (OSC 8); DCS, SOS, PM and APC carry payloads some
# terminals act on. A string left unterminated runs to the end, as a terminal would swallow it.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"  # CSI: parameters, intermediates, one final byte
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC, ended by BEL or ST
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # DCS, SOS, PM, APC, ended by ST
    r"|\x1b[ -/]*[0-~]?"  # any other escape (charset switch, reset, save cursor): intermediates, final
)
_NEWLINES = re.compile(r"\r\n?")  # a lone CR rewrites the line on a terminal; as data it ends one
_SUSPECT = re.compile(r"[^\t\n\x20-\x7e]")  # plain ASCII is kept without a look-up
# Control (Cc), format (Cf) and lone surrogate (Cs) characters go. Format characters include the
# bidi overrides and isolates (U+202A-202E, U+2066-2069, the marks U+200E/F), which reorder what
# a reader sees ("Trojan Source"), and invisible ones (U+200B, U+2060, U+FEFF, the U+E00xx tags)
# that hide text from whoever reads it. A lone surrogate cannot be written as UTF-8 at all.
_DROPPED = {"Cc", "Cf", "Cs"}
# Zero-width (non-)joiners stay: Persian, Hindi and emoji need them to be spelled right, and they
# neither move nor hide text; at worst two names look alike, as any homoglyph already makes them.
_KEPT = {"\t", "\n", "\u200c", "\u200d"}
MARKER = " [...]"
# What makes a spreadsheet read a cell as a formula: OWASP's list, where a spreadsheet that trims
# a leading tab or CR then meets the `=`. printable() has made every CR a newline, so newline too.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")


def _keep(match: re.Match) -> str:
    char = match[0]
    return char if char in _KEPT or unicodedata.category(char) not in _DROPPED else ""


def printable(text: str, limit: int | None = None) -> str:
    """`text` with no escape sequence, control, format or surrogate character (newline and tab
    stay), cut to at most `limit` characters with MARKER at the end. Idempotent; never raises on text."""
    cleaned = _SUSPECT.sub(_keep, _NEWLINES.sub("\n", _ESCAPES.sub("", str(text))))
    if limit is not None and len(cleaned) > limit:
        # The marker counts towards the limit, so cleaning a cleaned text changes nothing.
        cleaned = cleaned[: limit - len(MARKER)] + MARKER if limit > len(MARKER) else cleaned[: max(limit, 0)]
    return cleaned


def middle_cut(text: str, limit: int) -> str:
    """A printable `text` of at most `limit` characters, cut in the middle where longer: its start
    (what failed) and its end (the advice a message closes with) both stay."""
    cleaned = printable(text)
    if len(cleaned) <= limit:
        return cleaned
    keep = max(limit - len(MARKER) - 1, 0)
    return cleaned[: keep // 2] + MARKER + " " + cleaned[len(cleaned) - (keep - keep // 2):]


def csv_cell(text: str) -> str:
    """A printable cell that a spreadsheet opens as text, never as a formula: a leading `=`, `+`,
    `-`, `@`, tab, CR or newline gets a single quote in front (OWASP's advice on CSV injection)."""
    cell = printable(text)
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell
