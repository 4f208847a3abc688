"""A class's submissions, found in one folder: a folder or an archive per student, or a Gradescope export.

Archives are unpacked as hostile input (grader/course/archives.py). Names are hostile too: each entry
names its student, whose folder the batch writes beside its own files, so a name that is no safe
folder name (empty, hidden, holding a separator or a control character), one the caller reserves
(the batch's grades.csv), and an entry that is a link (to solutions/, to a classmate's folder) are
refused. Either way a bad entry costs its student only: the submission comes back with a `problem`
that the batch turns into `missing_file` tests naming it, under a student id of its own, and the
rest of the class is graded. Entries that name one student (`carol/` beside `Carol.zip`) are two
hand-ins of that student, each judged on its own: a refused one costs the other nothing, and the
class summary flags them all (`note`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shutil
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import yaml  # installed with dask, which the batch needs anyway

from grader.course.archives import IGNORED, ArchiveError, unpack
from grader.running.submission_files import graded_files

# What a student may hand in besides a folder; the content, not the suffix, says how it is read.
ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
GRADESCOPE_METADATA = "submission_metadata.yml"
REFUSED_PREFIX = "archive:"  # the hash of a refused submission: summary.identical leaves these out
MAX_NAME = 128  # characters of a student id: a folder name may have 255, and a Gradescope group more
UNSAFE_NAMES = [  # (test on a name as found, why it cannot name a folder)
    (lambda name: not _clean(name), "is empty once made a safe folder name"),
    (lambda name: name.strip().startswith("."), "starts with a dot, which hides a folder"),
    (lambda name: "/" in name or "\\" in name, "holds a path separator"),
    (lambda name: any(unicodedata.category(c) == "Cc" for c in name), "holds a control character"),
]


class IntakeError(ValueError):
    """The submissions folder itself is unusable (a usage error, not one student's problem)."""


@dataclass(frozen=True)
class Submission:
    student: str
    source: Path  # what the student handed in: a folder or an archive
    folder: Path | None  # laid out like starter/; None when the submission was refused
    problem: str = ""  # why it was refused
    note: str = ""  # why a person should look at it, graded or not (another entry named the same student)

    @property
    def flags(self) -> str:
        """What the class summary says of it: why it was refused, and what a TA should look at."""
        return "; ".join(text for text in (self.problem, self.note) if text)

    def content_hash(self, assignment: str) -> str:
        """sha256 over the assignment folder's files (paths and bytes, in sorted order)."""
        if self.folder is None:  # refused: the verdict follows what was handed in and why
            digest = hashlib.sha256(self.problem.encode() + b"\0")
            if self.source.is_file():
                digest.update(_file_hash(self.source).encode())
            return REFUSED_PREFIX + digest.hexdigest()
        digest = hashlib.sha256()
        root = self.folder / assignment
        for path in graded_files(root):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(_file_hash(path).encode() + b"\0")
        return digest.hexdigest()


def _file_hash(path: Path) -> str:
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def _clean(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9@+._-]+", "_", text.strip()).lstrip("._+-@")


def student_name(text: str) -> str:
    """A name that is safe as a folder name and a CSV cell: no separators, no leading dot or formula sign."""
    return _clean(text) or "unnamed"


def archive_stem(path: Path) -> str:
    name = path.name
    suffix = next((s for s in ARCHIVE_SUFFIXES if name.lower().endswith(s)), "")
    return name[: len(name) - len(suffix)]


@dataclass(frozen=True)
class _Claim:
    """An entry of the submissions folder, and the name it gives its student."""

    source: Path
    name: str  # as found: the folder's name, the archive's stem, or the submitters in Gradescope's metadata

    @property
    def student(self) -> str:
        student = student_name(self.name)
        return student if len(student) <= MAX_NAME else self.own_id()

    def own_id(self) -> str:
        """An id nobody else has: student_name never writes '~', and entries of one folder differ in name."""
        digest = hashlib.sha256(self.source.name.encode()).hexdigest()[:16]
        return f"{student_name(self.name)[:64]}~{digest}"


def collect(directory: Path, staging: Path, assignments: list[str], reserved: Collection[str] = ()) -> list[Submission]:
    """Every student's submission in `directory`, archives unpacked under `staging`.

    `reserved` names what the caller writes beside the students' folders (the batch's grades.csv):
    a student of one of those names is refused, as are unsafe names and links (_accept). Entries
    that name one student are that student's (_admit).
    """
    if (directory / GRADESCOPE_METADATA).is_file():
        claims = _gradescope(directory)
    else:
        claims = [_Claim(entry, entry.name if entry.is_dir() else archive_stem(entry))
                  for entry in sorted(directory.iterdir()) if _candidate(entry)]  # fmt: skip
    if not claims:
        raise IntakeError(f"{directory}: no submissions (expected a folder, .zip or .tar.gz per student)")
    problems = _entry_problems(claims, reserved)
    found = {c.source: Submission(c.own_id(), c.source, None, problems[c.source])
             for c in claims if c.source in problems}  # fmt: skip
    students: dict[str, list[_Claim]] = {}
    for claim in claims:  # case folded: a TA's laptop may not tell Bob's folder from bob's
        if claim.source not in problems:
            students.setdefault(student_name(claim.name).casefold(), []).append(claim)
    for group in students.values():
        found.update(_admit(group, staging, assignments))
    return [found[claim.source] for claim in claims]


def _candidate(entry: Path) -> bool:
    if entry.name.startswith(".") or entry.name in IGNORED:
        return False
    return entry.is_dir() or entry.name.lower().endswith(ARCHIVE_SUFFIXES)


def _entry_problems(claims: list[_Claim], reserved: Collection[str]) -> dict[Path, str]:
    """Why each entry whose name cannot name a student is refused; the others are looked inside."""
    return {c.source: f"{c.source.name!r} was not graded: its student name {c.name!r} {why}; rename it"
            for c in claims if (why := _unsafe(c.name, reserved))}  # fmt: skip


def _admit(group: list[_Claim], staging: Path, assignments: list[str]) -> dict[Path, Submission]:
    """The entries that name one student, each judged on its own, so that one bad entry costs no
    other: two entries of one name are two hand-ins of one student (an upload and its unpacked
    copy, a resubmission). The first that can be graded (folders first, then by name) is graded
    under the student's name, another that can be graded under an id of its own, one that cannot
    is refused with its own reason; each is flagged for the TA to decide which counts."""
    if len(group) == 1:
        return {group[0].source: _accept(group[0], staging, assignments, group[0].student)}
    ordered = sorted(group, key=_folders_first)
    admitted = {claim.source: _accept(claim, staging, assignments, claim.own_id()) for claim in ordered}
    graded = [claim for claim in ordered if admitted[claim.source].folder is not None]
    name = (graded or ordered)[0].student
    if graded:
        first = admitted[graded[0].source]
        admitted[graded[0].source] = dataclasses.replace(first, student=name)
    entries = " and ".join(repr(claim.source.name) for claim in ordered)
    for claim in ordered:
        submission = admitted[claim.source]
        outcome = (f"{claim.source.name!r} is graded as {submission.student!r}" if submission.folder is not None
                   else f"{claim.source.name!r} is refused")  # fmt: skip
        note = f"{entries} name the same student {name!r}: {outcome}; decide which counts"
        admitted[claim.source] = dataclasses.replace(submission, note=note)
    return admitted


def _folders_first(claim: _Claim) -> tuple[bool, str]:
    return claim.source.is_symlink() or not claim.source.is_dir(), claim.source.name


def _unsafe(name: str, reserved: Collection[str]) -> str:
    """Why `name` cannot name a student's folder beside the caller's own files, or ''."""
    why = next((why for unsafe, why in UNSAFE_NAMES if unsafe(name)), "")
    taken = next((r for r in reserved if r.casefold() == student_name(name).casefold()), None)
    return why or (f"is taken by the batch's own {taken!r} beside the students' folders" if taken else "")


def _accept(claim: _Claim, staging: Path, assignments: list[str], student: str) -> Submission:
    if claim.source.is_symlink():
        return Submission(student, claim.source, None, f"{claim.source.name!r} was not graded: it is a link, "
                          "which the grader does not follow (it could lead to another student's folder); copy the "
                          "files in")  # fmt: skip
    if claim.source.is_dir():
        return Submission(student, claim.source, submission_root(claim.source, assignments))
    target = staging / student
    shutil.rmtree(target, ignore_errors=True)  # a rerun unpacks afresh: the archive may have changed
    try:
        unpack(claim.source, target)
    except ArchiveError as error:
        shutil.rmtree(target, ignore_errors=True)
        return Submission(student, claim.source, None, f"{claim.source.name} was not unpacked: {error}")
    return Submission(student, claim.source, submission_root(target, assignments))


def submission_root(folder: Path, assignments: list[str]) -> Path:
    """The folder laid out like starter/: archives often wrap it in one folder of the student's name."""
    for _ in range(3):
        if any((folder / name).is_dir() for name in assignments):
            return folder
        inside = [p for p in folder.iterdir() if not p.name.startswith(".") and p.name not in IGNORED]
        if len(inside) != 1 or not inside[0].is_dir() or inside[0].is_symlink():
            return folder
        folder = inside[0]
    return folder


def _gradescope(directory: Path) -> list[_Claim]:
    """A Gradescope export: `submission_<id>/` folders, named by their submitters in the metadata."""
    metadata = _gradescope_metadata(directory / GRADESCOPE_METADATA)
    found = []
    for folder in sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith(".")):
        submitters = metadata.get(folder.name, {}).get(":submitters") or []
        ids = [s.get(":email") or s.get(":sid") or s.get(":name") for s in submitters if isinstance(s, dict)]
        name = "+".join(str(i) for i in ids if i) or folder.name  # a group submission names every member
        found.append(_Claim(folder, name))
    return found


class _MetadataLoader(yaml.SafeLoader):
    """Gradescope writes Ruby objects (`!ruby/object:BigDecimal` scores): read them as plain values."""


_MetadataLoader.add_multi_constructor("!", lambda loader, tag, node: loader.construct_scalar(node)
                                      if isinstance(node, yaml.ScalarNode) else None)  # fmt: skip


def _gradescope_metadata(path: Path) -> dict:
    try:
        data = yaml.load(path.read_text(errors="replace"), Loader=_MetadataLoader)
    except yaml.YAMLError as error:
        raise IntakeError(f"{path}: cannot be read as YAML: {error}") from None
    if not isinstance(data, dict):
        raise IntakeError(f"{path}: expected a mapping of submission folders to their metadata")
    return {str(k): v for k, v in data.items() if isinstance(v, dict)}
