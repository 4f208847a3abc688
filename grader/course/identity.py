"""Who an entry of a class's submissions folder stands for: its exact name, never a neighbour's.

A student is the name an entry gives, exactly as written: a folder's name, an archive's name less
its suffix, or the submitters Gradescope's metadata lists. Letters of every script are kept
(`张伟`, `José` and `Josè` are three students), and nothing is rewritten into a "safe" form that
two names could share. Two names that read alike once normalised (case, Unicode's compatibility
forms, invisible characters, punctuation and spaces: `bob`, `Bob`, `_bob`, `+bob`, `b.o.b`, a
fullwidth `ｂｏｂ`) are a second hand-in of one student or a classmate's name taken, and only a
person can tell which: every entry of such a group is held back, graded as nobody and in no
output, until course.toml's `[names]` gives each entry its student (or "" for nobody). The same
rule keeps two students' folders under --out apart on a filesystem that folds case.

A name that cannot name a folder (a separator, a control or invisible formatting character, a
leading dot, a name the batch writes itself) refuses its entry, under an id of its own.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Collection, Mapping
from dataclasses import dataclass

MAX_NAME_BYTES = 200  # of a student id in UTF-8: a folder name may have 255, a Gradescope group more
JOINERS = "\u200c\u200d"  # format characters that spell words in Persian, Hindi and emoji (text.printable keeps them)
UNSAFE_NAMES = [  # (test on a name, why it cannot name a student's folder)
    (lambda name: not name.strip(), "is empty"),
    (lambda name: name.strip().startswith("."), "starts with a dot, which hides a folder"),
    (lambda name: "/" in name or "\\" in name, "holds a path separator"),
    (lambda name: any(unicodedata.category(c) in ("Cc", "Cf", "Cs") and c not in JOINERS for c in name),
     "holds a control or invisible formatting character"),
    (lambda name: not any(unicodedata.category(c)[0] in "LN" for c in name), "has no letter or digit"),
]


def collision_key(name: str) -> str:
    """What two names share when they read alike: Unicode's compatibility form folded for case
    (NFKC_Casefold, done by hand), keeping only letters, marks and digits. Accents are marks and
    stay: `José` and `Josè` differ."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    return "".join(c for c in folded if unicodedata.category(c)[0] in "LMN")


def unsafe(name: str, reserved: Collection[str] = ()) -> str:
    """Why `name` cannot name a student's folder beside the caller's own files ('' when it can)."""
    why = next((why for test, why in UNSAFE_NAMES if test(name)), "")
    folded = unicodedata.normalize("NFKC", name).casefold()
    taken = next((r for r in reserved if r.casefold() == folded), None)
    return why or (f"is taken by the batch's own {taken!r} beside the students' folders" if taken else "")


def own_id(name: str, entry: str) -> str:
    """An id nobody else has, for an entry refused under its name or whose name is too long: what
    can name a folder of the name, then '~' and a digest of the entry's own file name."""
    stem = re.sub(r"[/\\\x00-\x1f\x7f]+", "_", "".join(c for c in name if unicodedata.category(c) not in ("Cf", "Cs")))
    stem = stem.strip().lstrip(".").encode()[:120].decode(errors="ignore") or "entry"
    return f"{stem}~{hashlib.sha256(entry.encode()).hexdigest()[:16]}"


@dataclass(frozen=True)
class Attribution:
    """What one entry is graded as."""

    student: str  # the name it is graded under (course.toml's [names] where it gives one)
    held: str = ""  # why it waits for the TA: graded as nobody, in no output ('' when graded)
    mapped: bool = False  # the name came from course.toml's [names]


def attribute(entries: Mapping[str, str], names: Mapping[str, str]) -> dict[str, Attribution]:
    """`entries`: each entry (its file name in the submissions folder) -> the name it gives;
    `names`: course.toml's [names], entry -> student ("" for nobody). Every entry whose name reads
    like another's (collision_key) is held back, each saying which entries it waits with."""
    wanted = {entry: names.get(entry, name) for entry, name in entries.items()}
    groups: dict[str, list[str]] = {}
    for entry, student in wanted.items():
        if student:
            groups.setdefault(collision_key(student), []).append(entry)
    found = {}
    for entry, student in wanted.items():
        mapped = entry in names
        if not student:
            found[entry] = Attribution(entries[entry], "set aside: course.toml's [names] gives it no student", mapped)
            continue
        group = groups[collision_key(student)]
        found[entry] = Attribution(student, _held(group, wanted) if len(group) > 1 else "", mapped)
    return found


def _held(group: list[str], wanted: Mapping[str, str]) -> str:
    entries = ", ".join(f"{entry!r} (as {wanted[entry]!r})" for entry in sorted(group))
    example = min(group)
    return (f"held back: {entries} have names that read alike, so any one of them may be a second hand-in or a "
            f"classmate's name taken; none is graded or in any output until course.toml's [names] gives each "
            f"entry its student, e.g. [names] {example!r} = {wanted[example]!r}, and \"\" for an entry that is "
            f"nobody's")  # fmt: skip


def too_long(name: str) -> bool:
    return len(name.encode()) > MAX_NAME_BYTES
