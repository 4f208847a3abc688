"""Similarity review: which students' code for an assignment is too alike to be independent work.

What is compared is the code as the compiler sees it (canonical.py): comments, docstrings, dead
statements and assignments nothing reads are left out, so padding a copy with comments or junk
statements changes nothing. copydetect (0.5.0) then does the fingerprinting: Pygments tokenizes
each file (Python and CUDA C alike), every identifier becomes one letter, so renaming variables
changes nothing; winnowing keeps position-independent fingerprints of 25-character runs, so
reordering functions changes nothing either. The review's cost follows the code left once that is
done, and is capped there (MAX_CODE), not by the bytes handed in; a submission that is not compared
(past a cap, unreadable, too little code of its own) is listed with the reason on the class page. The starter's code is
boilerplate (every student starts from it), as is any folder course.toml adds; earlier terms'
submissions that course.toml points at are references each student is compared with.

A pair's similarity is the larger of the two shares of each side's own code (starter left out)
that matches the other side: a student who pasted a classmate's kernel into a longer file of
their own is still caught. A pair at or above the threshold (0.5 by default) is flagged; the
threshold comes from measurements on this repository's solutions and public kernels, which
the staff guide in docs/ gives. Each student's files of one language (Python, or CUDA C and its headers)
in an assignment folder are read as one document, so code moved between files still matches.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import itertools
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import canonical
from grader.running.compile_cache import CACHE_ROOT
from grader.running.submission_files import graded_files
from grader.assignment.spec import Assignment

# What is compared, by language: the suffix copydetect's lexer is chosen by, and the files it reads.
LANGUAGES = {"python": (".py", (".py",)), "cuda": (".cu", (".cu", ".cuh", ".h", ".hpp", ".cpp", ".c"))}
AS_COMPILED = {"python": canonical.python, "cuda": canonical.cuda}
NOISE, GUARANTEE = 25, 30  # copydetect's defaults: shortest run that counts, run always found
MIN_OWN = 60  # characters of tokenized code beyond the starter's: with less, there is nothing to compare
# The review's work follows the code left once comments and dead statements are gone: a comparison
# fingerprints every character of it. The largest solution here is about 9,000 characters so.
MAX_CODE = 200_000
MAX_READ_BYTES = 32 << 20  # of one student's files of one language: reading and parsing them is work too
SHOWN_CHARS = 40_000  # of each side in the class page


def unavailable() -> str:
    """Why the review cannot run here ('' when it can)."""
    if importlib.util.find_spec("copydetect") is None:
        return ("similarity review skipped: copydetect is not installed; "
                "`.venv/bin/pip install copydetect==0.5.0` where the network allows")  # fmt: skip
    return ""


def _copydetect():
    """copydetect, imported where the review runs. It imports matplotlib (for plots the review never
    draws), which writes a font cache and a config folder under the user's home on first import:
    they go to the grader's own cache folder instead, beside the compiled kernels."""
    os.environ.setdefault("MPLCONFIGDIR", str(CACHE_ROOT.parent / "matplotlib"))
    os.environ.setdefault("MPLBACKEND", "Agg")
    import copydetect
    import copydetect.utils

    copydetect.utils.hashed_kgrams = stable_kgrams
    return copydetect


@dataclass(frozen=True)
class Segment:
    text: str
    matched: bool  # part of a run the other side shares


@dataclass(frozen=True)
class Pair:
    assignment: str
    language: str
    student_a: str
    student_b: str  # a student, or an earlier term's submission ("earlier:<folder>/<name>")
    similarity: float  # 0..1
    left: tuple[Segment, ...]
    right: tuple[Segment, ...]


@dataclass(frozen=True)
class Uncompared:
    """A student's code for an assignment that the review could not compare, and why."""

    assignment: str
    language: str
    student: str
    reason: str


@dataclass
class Review:
    pairs: list[Pair] = field(default_factory=list)
    skipped: str = ""  # why no review ran, shown in the console and the class page
    threshold: float = 0.5
    documents: int = 0  # how many (student, assignment, language) documents were compared
    uncompared: list[Uncompared] = field(default_factory=list)  # listed on the class page


def document(folder: Path | None, language: str) -> tuple[str, str]:
    """A submission's files of one language in one assignment folder as the compiler sees them,
    read as one text; or '' and why they could not be ('', '' where there are none)."""
    if folder is None or not folder.is_dir():
        return "", ""
    suffixes = LANGUAGES[language][1]
    try:
        files = [p for p in graded_files(folder) if p.suffix in suffixes]
        size = sum(p.stat().st_size for p in files)
        if size > MAX_READ_BYTES:
            return "", f"{size / 2**20:.1f} MiB of files, past the {MAX_READ_BYTES / 2**20:.1f} MiB the review reads"
        texts = AS_COMPILED[language]([p.read_text(errors="replace") for p in files])
    except OSError as error:
        return "", f"its files could not be read ({type(error).__name__}: {error})"
    marker = "# file: " if language == "python" else "// file: "  # a comment, which tokenizing drops
    text = "".join(f"{marker}{p.relative_to(folder)}\n{code}\n" for p, code in zip(files, texts))
    if len(text) > MAX_CODE:
        return "", (f"{len(text):,} characters of code once comments and dead statements are left out, past the "
                    f"{MAX_CODE:,} the review compares")  # fmt: skip
    return text, ""


def stable_kgrams(string: str, k: int):
    """copydetect's k-gram hashes, from a hash that is the same in every process: its own uses
    Python's `hash()`, salted per process, so which fingerprints winnowing kept (and the figures in
    similarity.csv) changed from one run to the next by a percent or two."""
    import numpy as np

    grams = (string[i : i + k].encode() for i in range(len(string) - k + 1))
    return np.array([int.from_bytes(hashlib.blake2b(g, digest_size=8).digest(), "little", signed=True) for g in grams],
                    dtype=np.int64)  # fmt: skip


def _fingerprint(text: str, language: str, boilerplate=None):
    window = GUARANTEE - NOISE + 1
    return _copydetect().CodeFingerprint(f"doc{LANGUAGES[language][0]}", NOISE, window, boilerplate=boilerplate, fp=io.StringIO(text))


def _segments(text: str, slices) -> tuple[Segment, ...]:
    segments, at = [], 0
    for start, end in sorted(zip(slices[0].tolist(), slices[1].tolist())):
        start, end = max(start, at), min(end, len(text))
        if start > at:
            segments.append(Segment(text[at:start], False))
        if end > start:
            segments.append(Segment(text[start:end], True))
        at = max(at, end)
    segments.append(Segment(text[at:], False))
    shown, out = 0, []
    for segment in segments:  # cut at SHOWN_CHARS: a flagged pair is read, not scrolled through
        if shown >= SHOWN_CHARS:
            out.append(Segment("\n[... cut ...]\n", False))
            break
        out.append(Segment(segment.text[: SHOWN_CHARS - shown], segment.matched))
        shown += len(segment.text)
    return tuple(out)


def _boilerplate(folders: list[Path], assignment: str, language: str):
    import numpy as np

    hashes: set = set()
    for folder in folders:
        if text := document(folder / assignment, language)[0]:
            hashes |= _fingerprint(text, language).hashes
    return np.array(sorted(hashes)) if hashes else None


def compare(assignment: str, language: str, mine: dict[str, str], earlier: dict[str, str], boilerplate,
            threshold: float, uncompared: list[Uncompared] | None = None) -> list[Pair]:  # fmt: skip
    """Every pair of students, and each student against each earlier submission, at or above
    `threshold`; a student with too little code of their own to compare joins `uncompared`."""
    compare_files = _copydetect().compare_files
    every = {name: _fingerprint(text, language, boilerplate) for name, text in {**mine, **earlier}.items() if text}
    prints = {name: fp for name, fp in every.items() if fp.token_coverage >= MIN_OWN}
    for name in sorted(set(mine) & set(every) - set(prints)):
        if every[name].token_coverage and uncompared is not None:  # none at all: the starter untouched
            uncompared.append(Uncompared(assignment, language, name, f"{every[name].token_coverage} characters of "
                                         f"code of its own beyond the starter's: fewer than the {MIN_OWN} a comparison needs"))  # fmt: skip
    students = sorted(name for name in mine if name in prints)
    candidates = list(itertools.combinations(students, 2))
    candidates += [(s, e) for s in students for e in sorted(earlier) if e in prints]
    pairs = []
    for a, b in candidates:
        _, shares, (left, right) = compare_files(prints[a], prints[b])
        similarity = float(max(shares))
        if similarity >= threshold:
            pairs.append(Pair(assignment, language, a, b, round(similarity, 3),
                              _segments(prints[a].raw_code, left), _segments(prints[b].raw_code, right)))  # fmt: skip
    return pairs


def review(folders: dict[str, Path | None], assignments: list[Assignment], starter: Path, threshold: float,
           references: tuple[Path, ...] = (), boilerplate: tuple[Path, ...] = ()) -> Review:  # fmt: skip
    """Review each assignment of the class (`folders`: student -> their folder laid out like starter/)."""
    if why := unavailable():
        return Review(skipped=why, threshold=threshold)
    logging.getLogger().setLevel(max(logging.getLogger().level, logging.ERROR))  # copydetect logs per odd file
    earlier = earlier_submissions(references)
    result = Review(threshold=threshold)
    for assignment in assignments:
        for language in LANGUAGES:
            read = {s: document(f / assignment.name if f else None, language) for s, f in folders.items()}
            result.uncompared += [Uncompared(assignment.name, language, s, why) for s, (_, why) in read.items() if why]
            mine = {s: text for s, (text, _) in read.items()}
            theirs = {e: document(f / assignment.name, language)[0] for e, f in earlier.items()}
            result.documents += sum(1 for text in mine.values() if text)
            shared = _boilerplate([starter, *boilerplate], assignment.name, language)
            result.pairs += compare(assignment.name, language, mine, theirs, shared, threshold, result.uncompared)
    result.pairs.sort(key=lambda p: (-p.similarity, p.assignment, p.student_a, p.student_b))
    return result


def earlier_submissions(references: tuple[Path, ...]) -> dict[str, Path]:
    """Earlier terms' submissions: each reference folder holds a folder per student, laid out like starter/."""
    from grader.course.intake import submission_root
    from grader.assignment.loading import assignment_names

    found = {}
    for reference in references:  # the TA's own folders: course.toml checked they exist
        for folder in sorted(p for p in reference.iterdir() if p.is_dir() and not p.name.startswith(".")):
            found[f"earlier:{reference.name}/{folder.name}"] = submission_root(folder, assignment_names())
    return found
