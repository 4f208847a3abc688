"""A class's submissions, found in one folder: a folder or an archive per student, or a Gradescope export.

Archives are unpacked as hostile input (grader/archives.py). Names are hostile too: each entry
names its student, whose folder the batch writes beside its own files, so a name that is no safe
folder name (empty, hidden, holding a separator or a control character), one the caller reserves
(the batch's grades.csv), or one that two entries share is refused. Either way a bad entry costs
its student only: the submission comes back with a `problem` that the batch turns into
`missing_file` tests naming it, under a student id of its own, and the rest of the class is graded.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import yaml  # installed with dask, which the batch needs anyway

from grader.archives import IGNORED, ArchiveError, unpack
from grader.isolation import graded_files

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
    a student of one of those names is refused, as are unsafe names and entries that share a student.
    """
    if (directory / GRADESCOPE_METADATA).is_file():
        claims = _gradescope(directory)
    else:
        claims = [_Claim(entry, entry.name if entry.is_dir() else archive_stem(entry))
                  for entry in sorted(directory.iterdir()) if _candidate(entry)]  # fmt: skip
    if not claims:
        raise IntakeError(f"{directory}: no submissions (expected a folder, .zip or .tar.gz per student)")
    problems = _name_problems(claims, reserved)
    return [
        Submission(claim.own_id(), claim.source, None, problems[claim.source])
        if claim.source in problems
        else _accept(claim, staging, assignments)
        for claim in claims
    ]


def _candidate(entry: Path) -> bool:
    if entry.name.startswith(".") or entry.name in IGNORED:
        return False
    return entry.is_dir() or entry.name.lower().endswith(ARCHIVE_SUFFIXES)


def _name_problems(claims: list[_Claim], reserved: Collection[str]) -> dict[Path, str]:
    """Why each refused entry's name cannot be its student's; entries not named here are accepted."""
    problems = {c.source: f"{c.source.name!r} was not graded: its student name {c.name!r} {why}; rename it"
                for c in claims if (why := _unsafe(c.name, reserved))}  # fmt: skip
    owners: dict[str, list[_Claim]] = {}
    for claim in claims:  # case folded: a TA's laptop may not tell Bob's folder from bob's
        if claim.source not in problems:
            owners.setdefault(student_name(claim.name).casefold(), []).append(claim)
    for group in (group for group in owners.values() if len(group) > 1):
        for claim in group:
            others = " and ".join(repr(other.source.name) for other in group if other is not claim)
            problems[claim.source] = (f"{claim.source.name!r} was not graded: it and {others} name the same "
                                      f"student {student_name(claim.name)!r}; rename all but one")  # fmt: skip
    return problems


def _unsafe(name: str, reserved: Collection[str]) -> str:
    """Why `name` cannot name a student's folder beside the caller's own files, or ''."""
    why = next((why for unsafe, why in UNSAFE_NAMES if unsafe(name)), "")
    taken = next((r for r in reserved if r.casefold() == student_name(name).casefold()), None)
    return why or (f"is taken by the batch's own {taken!r} beside the students' folders" if taken else "")


def _accept(claim: _Claim, staging: Path, assignments: list[str]) -> Submission:
    if claim.source.is_dir():
        return Submission(claim.student, claim.source, submission_root(claim.source, assignments))
    target = staging / claim.student
    shutil.rmtree(target, ignore_errors=True)  # a rerun unpacks afresh: the archive may have changed
    try:
        unpack(claim.source, target)
    except ArchiveError as error:
        shutil.rmtree(target, ignore_errors=True)
        return Submission(claim.student, claim.source, None, f"{claim.source.name} was not unpacked: {error}")
    return Submission(claim.student, claim.source, submission_root(target, assignments))


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
