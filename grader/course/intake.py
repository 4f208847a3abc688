"""A class's submissions, found in one folder: a folder or an archive per student, or a Gradescope export.

Archives are unpacked as hostile input (grader/course/archives.py). Names are hostile too: each
entry names its student exactly (identity.py), whose folder the batch writes beside its own files.
An entry whose name cannot name a folder, or that is a link (to solutions/, to a classmate's
folder), or neither a folder nor a file (a pipe would block the reader), or that cannot be read,
is refused: it costs its student only, as a submission with a `problem` that the batch turns into
`missing_file` tests naming it, and the rest of the class is graded. Entries whose names read
alike are all held back for the TA (`held`), graded as nobody, until course.toml's [names] says
whose each is.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml  # installed with dask, which the batch needs anyway

from grader.course import identity
from grader.course.archives import IGNORED, ArchiveError, unpack
from grader.running.submission_files import graded_files

# What a student may hand in besides a folder; the content, not the suffix, says how it is read.
ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
GRADESCOPE_METADATA = "submission_metadata.yml"
REFUSED_PREFIX = "archive:"  # the hash of a refused submission: summary.identical leaves these out


class IntakeError(ValueError):
    """The submissions folder itself is unusable (a usage error, not one student's problem)."""


@dataclass(frozen=True)
class Submission:
    student: str
    source: Path  # what the student handed in: a folder or an archive
    folder: Path | None  # laid out like starter/; None when the submission was refused or held back
    problem: str = ""  # why it was refused
    held: str = ""  # why it waits for the TA (identity.py): graded as nobody, in no output
    members: tuple[str, ...] = ()  # who it stands for in a roster: a Gradescope group's submitters; else the student

    @property
    def flags(self) -> str:
        """What the class summary says of it: why it was refused."""
        return self.problem

    @property
    def people(self) -> tuple[str, ...]:
        return self.members or (self.student,)

    def content_hash(self, assignment: str) -> str:
        """sha256 over the assignment folder's files (paths and bytes, in sorted order)."""
        if self.folder is None:  # refused: the verdict follows what was handed in and why
            digest = hashlib.sha256(self.problem.encode() + b"\0")
            if self.source.is_file() and not self.source.is_symlink():
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


def archive_stem(path: Path) -> str:
    name = path.name
    suffix = next((s for s in ARCHIVE_SUFFIXES if name.lower().endswith(s)), "")
    return name[: len(name) - len(suffix)]


@dataclass(frozen=True)
class _Claim:
    """An entry of the submissions folder, the name it gives its student, and who it stands for."""

    source: Path
    name: str  # as found: the folder's name, the archive's stem, or the submitters in Gradescope's metadata
    members: tuple[str, ...] = ()  # a Gradescope submission's submitters


def collect(directory: Path, staging: Path, assignments: list[str], reserved: Collection[str] = (),
            names: Mapping[str, str] | None = None) -> list[Submission]:  # fmt: skip
    """Every entry of `directory`, archives unpacked under `staging`; each submission's student is
    the entry's name, or what `names` (course.toml's [names]: entry -> student) gives it.

    `reserved` names what the caller writes beside the students' folders (the batch's grades.csv):
    a student of one of those names is refused, as are unsafe names and links (_accept). Entries
    whose names read alike are held back (identity.attribute).
    """
    if (directory / GRADESCOPE_METADATA).is_file():
        claims = _gradescope(directory)
    else:
        claims = [_Claim(entry, entry.name if entry.is_dir() else archive_stem(entry))
                  for entry in sorted(directory.iterdir()) if _candidate(entry)]  # fmt: skip
    if not claims:
        raise IntakeError(f"{directory}: no submissions (expected a folder, .zip or .tar.gz per student)")
    decided = identity.attribute({c.source.name: c.name for c in claims}, names or {})
    return [_admit(claim, decided[claim.source.name], staging, assignments, reserved) for claim in claims]


def _candidate(entry: Path) -> bool:
    if entry.name.startswith(".") or entry.name in IGNORED:
        return False
    return entry.is_dir() or entry.name.lower().endswith(ARCHIVE_SUFFIXES)


def _admit(claim: _Claim, decided: identity.Attribution, staging: Path, assignments: list[str],
           reserved: Collection[str]) -> Submission:  # fmt: skip
    """The entry as the batch takes it: held back, refused for its name, or looked inside."""
    members = () if decided.mapped else claim.members
    if decided.held:
        return Submission(decided.student, claim.source, None, held=decided.held, members=members)
    if why := identity.unsafe(decided.student, reserved):
        return Submission(identity.own_id(decided.student, claim.source.name), claim.source, None,
                          f"{claim.source.name!r} was not graded: its student name {decided.student!r} {why}; rename "
                          "it, or give it a student in course.toml's [names]", members=members)  # fmt: skip
    student = decided.student
    if identity.too_long(student):
        student = identity.own_id(student, claim.source.name)
    try:
        submission = _accept(claim, staging, assignments, student)
        for assignment in assignments if submission.folder is not None else ():
            submission.content_hash(assignment)  # every file is readable now, or the entry is refused here
    except OSError as error:
        submission = Submission(student, claim.source, None, f"{claim.source.name!r} could not be read: "
                                f"{type(error).__name__}: {error}")  # fmt: skip
    return Submission(submission.student, submission.source, submission.folder, submission.problem, members=members)


def _accept(claim: _Claim, staging: Path, assignments: list[str], student: str) -> Submission:
    if claim.source.is_symlink():
        return Submission(student, claim.source, None, f"{claim.source.name!r} was not graded: it is a link, "
                          "which the grader does not follow (it could lead to another student's folder); copy the "
                          "files in")  # fmt: skip
    if claim.source.is_dir():
        return Submission(student, claim.source, submission_root(claim.source, assignments))
    if not claim.source.is_file():  # a pipe or a device: reading it could block the whole batch
        return Submission(student, claim.source, None, f"{claim.source.name!r} was not graded: it is neither a "
                          "folder nor a file")  # fmt: skip
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
        ids = [str(i) for s in submitters
               if isinstance(s, dict) and (i := s.get(":email") or s.get(":sid") or s.get(":name"))]  # fmt: skip
        name = "+".join(ids) or folder.name  # a group submission names every member
        found.append(_Claim(folder, name, tuple(ids)))
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
