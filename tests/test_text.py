"""grader/reporting/text.py: student text comes out as characters a person reads, never as instructions to a
terminal, a browser or a spreadsheet. A table of nasty strings, then seeded random mixes of their
pieces (hypothesis is not a dependency; a fixed seed keeps a failure reproducible)."""

from __future__ import annotations

import random

import pytest

from grader.reporting.text import MARKER, csv_cell, printable

NASTY = {
    "rich markup": ("[/]", "[/]"),
    "rich style": ("[bold red]fake[/]", "[bold red]fake[/]"),
    "clear screen": ("a\x1b[2Jb", "ab"),
    "clipboard write (OSC 52)": ("\x1b]52;c;ZXZpbA==\x07after", "after"),
    "OSC ended by ST": ("\x1b]0;title\x1b\\after", "after"),
    "hyperlink (OSC 8)": ("\x1b]8;;http://x\x1b\\click\x1b]8;;\x1b\\", "click"),
    "fake green score": ("\x1b[32mScore 100/100\x1b[0m", "Score 100/100"),
    "8-bit CSI": ("a\x9b2Jb", "ab"),
    "DCS payload": ("\x1bPq#0;2;0;0;0\x1b\\after", "after"),
    "unterminated OSC swallows the rest": ("before\x1b]52;c;ZXZp", "before"),
    "charset switch": ("\x1b(0lqk\x1b(B", "lqk"),
    "lone ESC at the end": ("end\x1b", "end"),
    "carriage return overwrites a line": ("Score 0/100\rScore 100/100", "Score 0/100\nScore 100/100"),
    "windows line end": ("a\r\nb", "a\nb"),
    "NUL, BEL, backspace, DEL": ("a\x00b\x07c\x08d\x7f", "abcd"),
    "bidi override": ("grade: \u202edeliaf", "grade: deliaf"),
    "bidi isolates and marks": ("\u2066a\u2069\u200fb\u200e", "ab"),
    "invisible characters": ("a\u200bb\u2060c\ufeffd\U000e0041", "abcd"),
    "lone surrogate": ("a\ud800b", "ab"),
    "joiners stay": ("\U0001f468\u200d\U0001f469 \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",
                     "\U0001f468\u200d\U0001f469 \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"),
    "newline and tab stay": ("a\n\tb", "a\n\tb"),
    "accents stay": ("na\u00efve \u00e9t\u00e9 \u6f22\u5b57", "na\u00efve \u00e9t\u00e9 \u6f22\u5b57"),
}  # fmt: skip
PIECES = [text for text, _ in NASTY.values()] + ["\x1b", "\x1b[", "\x1b]", "\x9d", "\x9c", "\\", "\r", "x", " "]
FORBIDDEN = ["\x1b", "\x07", "\x9b", "\x9d", "\x90", "\r", "\x00", "\u202e", "\u2066", "\u2069"]


@pytest.mark.parametrize("text, expected", NASTY.values(), ids=NASTY.keys())
def test_printable_keeps_what_a_person_reads_and_drops_what_a_device_obeys(text, expected):
    assert printable(text) == expected


def _mixes(count: int = 3000):
    chance = random.Random(20261123)
    for _ in range(count):
        yield "".join(chance.choice(PIECES) for _ in range(chance.randint(0, 12))), chance.choice([None, 0, 3, 8, 40])


def test_printable_is_idempotent_and_leaves_no_control_character():
    for text, limit in _mixes():
        once = printable(text, limit)
        assert printable(once, limit) == once, repr(text)
        assert not any(c in once for c in FORBIDDEN), (repr(text), repr(once))
        once.encode("utf-8")  # every output can be written to a file or a terminal as UTF-8
        if limit is not None:
            assert len(once) <= limit, (repr(text), limit)


def test_printable_cuts_with_a_marker_inside_the_limit():
    assert printable("x" * 100, 20) == "x" * (20 - len(MARKER)) + MARKER
    assert printable("short", 20) == "short"
    assert printable(ValueError("not a string")) == "not a string", "anything is printed as str() prints it"


@pytest.mark.parametrize("name", ['=HYPERLINK("http://x")', "+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1", "\n=1"])
def test_a_cell_that_would_be_a_formula_opens_as_text(name):
    cell = csv_cell(name)
    assert cell.startswith("'") and cell[1:] == printable(name)
    assert csv_cell(cell) == cell, "quoting twice changes nothing"


def test_an_ordinary_cell_is_left_alone():
    assert csv_cell("alice") == "alice" and csv_cell("bob+carol") == "bob+carol"
