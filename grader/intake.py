"""A class's submissions, found in one folder: a folder or an archive per student, or a Gradescope export.

Archives come from students, so they are unpacked as hostile input: every entry must stay inside
its folder (no absolute paths, no `..`), links and device files are refused rather than followed,
and the file count and the bytes actually written are capped, so a zip bomb stops at the cap
instead of filling the disk. A bad archive costs its student only: the submission comes back with
a `problem` that the batch turns into `missing_file` tests naming it.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Callable, Iterator

import yaml  # installed with dask, which the batch needs anyway

from grader.isolation import graded_files

MAX_BYTES = 50 * 2**20  # a kernel submission is a few kilobytes of source; this leaves room for data files
MAX_FILES = 2000
ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar")
GRADESCOPE_METADATA = "submission_metadata.yml"
IGNORED = {"__MACOSX", "__pycache__"}  # what zip tools and Python leave behind, never a student's work


class IntakeError(ValueError):
    """The submissions folder itself is unusable (a usage error, not one student's problem)."""


class ArchiveError(ValueError):
    """One student's archive is unreadable or hostile; the message says which entry and why."""


@dataclass(frozen=True)
class Submission:
    student: str
    source: Path  # what the student handed in: a folder or an archive
    folder: Path | None  # laid out like starter/; None when the archive was refused
    problem: str = ""  # why it was refused

    def content_hash(self, assignment: str) -> str:
        """sha256 over the assignment folder's files (paths and bytes, in sorted order)."""
        if self.folder is None:  # nothing was unpacked: the archive itself is the submission
            return "archive:" + _file_hash(self.source)
        digest = hashlib.sha256()
        root = self.folder / assignment
        for path in graded_files(root):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(_file_hash(path).encode() + b"\0")
        return digest.hexdigest()


def _file_hash(path: Path) -> str:
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def student_name(text: str) -> str:
    """A name that is safe as a folder name and a CSV cell: no separators, no leading dot or formula sign."""
    name = re.sub(r"[^A-Za-z0-9@+._-]+", "_", text.strip()).lstrip("._+-@")
    return name or "unnamed"


def archive_stem(path: Path) -> str:
    name = path.name
    suffix = next((s for s in ARCHIVE_SUFFIXES if name.lower().endswith(s)), "")
    return name[: len(name) - len(suffix)]


def collect(directory: Path, staging: Path, assignments: list[str]) -> list[Submission]:
    """Every student's submission in `directory`, archives unpacked under `staging`."""
    if (directory / GRADESCOPE_METADATA).is_file():
        found = _gradescope(directory, assignments)
    else:
        found = [_one(entry, staging, assignments) for entry in sorted(directory.iterdir()) if _candidate(entry)]
    seen: dict[str, Path] = {}
    for submission in found:
        if submission.student in seen:
            raise IntakeError(f"two submissions for student '{submission.student}': "
                              f"{seen[submission.student].name} and {submission.source.name}")  # fmt: skip
        seen[submission.student] = submission.source
    if not found:
        raise IntakeError(f"{directory}: no submissions (expected a folder, .zip or .tar.gz per student)")
    return found


def _candidate(entry: Path) -> bool:
    if entry.name.startswith(".") or entry.name in IGNORED:
        return False
    return entry.is_dir() or entry.name.lower().endswith(ARCHIVE_SUFFIXES)


def _one(entry: Path, staging: Path, assignments: list[str]) -> Submission:
    if entry.is_dir():
        return Submission(student_name(entry.name), entry, submission_root(entry, assignments))
    student = student_name(archive_stem(entry))
    target = staging / student
    shutil.rmtree(target, ignore_errors=True)  # a rerun unpacks afresh: the archive may have changed
    try:
        unpack(entry, target)
    except ArchiveError as error:
        shutil.rmtree(target, ignore_errors=True)
        return Submission(student, entry, None, f"{entry.name} was not unpacked: {error}")
    return Submission(student, entry, submission_root(target, assignments))


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


def _gradescope(directory: Path, assignments: list[str]) -> list[Submission]:
    """A Gradescope export: `submission_<id>/` folders, named by their submitters in the metadata."""
    metadata = _gradescope_metadata(directory / GRADESCOPE_METADATA)
    found = []
    for folder in sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith(".")):
        submitters = metadata.get(folder.name, {}).get(":submitters") or []
        ids = [s.get(":email") or s.get(":sid") or s.get(":name") for s in submitters if isinstance(s, dict)]
        name = "+".join(str(i) for i in ids if i) or folder.name  # a group submission names every member
        found.append(Submission(student_name(name), folder, submission_root(folder, assignments)))
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


# --- Unpacking ---------------------------------------------------------------------------------

@dataclass
class _Entry:
    name: str
    kind: str  # "file", "dir", "link" or "special"
    size: int  # as the archive declares it; the bytes written are counted again
    open: Callable[[], BinaryIO]


def _zip_entries(archive: zipfile.ZipFile) -> Iterator[_Entry]:
    for info in archive.infolist():
        mode = info.external_attr >> 16  # the Unix mode, for archives made on Unix
        kind = "link" if stat.S_ISLNK(mode) else "dir" if info.is_dir() else "file"
        yield _Entry(info.filename, kind, info.file_size, lambda info=info: archive.open(info))


def _tar_entries(archive: tarfile.TarFile) -> Iterator[_Entry]:
    for member in archive:  # one header at a time: a bomb is stopped before it is all read
        if member.issym() or member.islnk():
            kind = "link"
        else:
            kind = "file" if member.isreg() else "dir" if member.isdir() else "special"
        yield _Entry(member.name, kind, member.size, lambda member=member: archive.extractfile(member))


def unpack(archive: Path, target: Path) -> None:
    """Unpack a student's .zip or .tar(.gz) into `target`, refusing anything unsafe (ArchiveError)."""
    try:
        if archive.name.lower().endswith(".zip"):
            with zipfile.ZipFile(archive) as opened:
                _write_entries(_zip_entries(opened), target)
        else:
            with tarfile.open(archive, "r:*") as opened:
                _write_entries(_tar_entries(opened), target)
    except ArchiveError:
        raise
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, RuntimeError, ValueError) as error:
        raise ArchiveError(f"it cannot be read as an archive ({type(error).__name__}: {error})") from None


def _write_entries(entries: Iterator[_Entry], target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    files = written = 0
    for entry in entries:
        path = _inside(target, entry.name)
        if entry.kind in ("link", "special"):
            what = "a link" if entry.kind == "link" else "a device or pipe"
            raise ArchiveError(f"entry '{entry.name}' is {what}; a submission may hold only files and folders")
        if path is None or entry.kind == "dir":
            (path or target).mkdir(parents=True, exist_ok=True)
            continue
        files += 1
        if files > MAX_FILES:
            raise ArchiveError(f"it holds more than {MAX_FILES} files")
        if written + entry.size > MAX_BYTES:
            raise ArchiveError(f"it unpacks to more than {MAX_BYTES // 2**20} MiB (at entry '{entry.name}')")
        path.parent.mkdir(parents=True, exist_ok=True)
        written = _copy_capped(entry, path, written)


def _inside(target: Path, name: str) -> Path | None:
    """Where an entry lands, or ArchiveError when its name would leave `target`."""
    pure = PurePosixPath(name.replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts or re.match(r"^[A-Za-z]:", name):
        raise ArchiveError(f"entry '{name}' points outside the submission folder")
    parts = [p for p in pure.parts if p not in ("", ".")]
    if not parts:
        return None
    if any(p in IGNORED for p in parts):
        return None  # treated like a folder and left empty: macOS resource forks are not code
    path = target.joinpath(*parts)
    if not path.resolve().is_relative_to(target.resolve()):
        raise ArchiveError(f"entry '{name}' points outside the submission folder")
    return path


def _copy_capped(entry: _Entry, path: Path, written: int) -> int:
    # The declared size may lie (a crafted header): count what is actually decompressed.
    with entry.open() as source, path.open("wb") as destination:
        while chunk := source.read(1 << 20):
            written += len(chunk)
            if written > MAX_BYTES:
                raise ArchiveError(f"it unpacks to more than {MAX_BYTES // 2**20} MiB (at entry '{entry.name}')")
            destination.write(chunk)
    return written
