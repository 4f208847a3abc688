"""A student's archive, unpacked as hostile input: every cost is capped before it is paid.

The format is read from the first bytes, never from the name, and a name that disagrees with the
content is accepted by content: a `.tar.gz` that is really bzip2, or a `.zip` that is really a
tarball, unpacks as what it is (a mislabel gains a student nothing, and refusing it would cost
marks). Anything else (a 7z, a rar, a text file) is refused, naming the bytes it starts with.

Every entry must stay inside its folder (no absolute paths, no `..`), and links and device files
are refused rather than followed. The caps, each checked before the work it bounds:
- MAX_ENTRIES counts every entry (files, folders, and the skipped `__MACOSX/` ones), and reading
  stops there;
- the sizes the entries declare are summed against MAX_BYTES before any data is read, skipped
  entries included, and the bytes actually written are counted again, since a header can lie;
- tarfile reads a GNU long name or a pax record whole into memory, so their headers are refused
  above MAX_HEADER_BYTES before tarfile sees them;
- the decompressed tar stream (headers and skipped data included: a tar is skipped through by
  reading it) stops at stream_cap(), as does the archive file itself;
- zipfile parses the whole central directory on opening, so one larger than MAX_ENTRIES entries
  need is refused first.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import re
import stat
import struct
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Callable, Iterator

MAX_BYTES = 50 * 2**20  # a kernel submission is a few kilobytes of source; this leaves room for data files
MAX_ENTRIES = 2000
MAX_HEADER_BYTES = 64 * 2**10  # a GNU long name or pax record: a real one is a few hundred bytes
ENTRY_OVERHEAD = 8 * 2**10  # an entry's tar header, its padding and a pax record for a long name
ZIP_RECORD_BYTES = 2**10  # a central-directory record: 46 bytes, the name and a few extra fields
IGNORED = {"__MACOSX", "__pycache__"}  # what zip tools and Python leave behind, never a student's work

MAGIC = {  # first bytes -> format
    b"PK\x03\x04": "zip",
    b"PK\x05\x06": "zip",  # an empty zip: only the end record
    b"\x1f\x8b": "gzip",
    b"BZh": "bzip2",
    b"\xfd7zXZ\x00": "xz",
}
TAR_MAGIC = (257, b"ustar")  # offset and bytes, for POSIX and GNU tar alike
DECOMPRESSORS: dict[str, Callable[[BinaryIO], BinaryIO]] = {
    "gzip": lambda file: gzip.GzipFile(fileobj=file, mode="rb"),
    "bzip2": bz2.BZ2File,
    "xz": lzma.LZMAFile,
    "tar": lambda file: file,
}
# What a hostile archive makes the libraries raise; MemoryError last of all, should a cap be missed.
UNREADABLE = (zipfile.BadZipFile, zipfile.LargeZipFile, tarfile.TarError, EOFError, OSError, RuntimeError,
              ValueError, zlib.error, lzma.LZMAError, struct.error, OverflowError, MemoryError)  # fmt: skip


class ArchiveError(ValueError):
    """One student's archive is unreadable or hostile; the message says which entry and why."""


def stream_cap() -> int:
    """The most bytes a tar stream, or an archive file, may hold: the data cap plus every entry's overhead."""
    return MAX_BYTES + MAX_ENTRIES * ENTRY_OVERHEAD + tarfile.RECORDSIZE


def _size(size: int) -> str:
    return f"{size / 2**20:.0f} MiB" if size >= 2**20 else f"{size // 2**10} KiB"


def unpack(archive: Path, target: Path) -> None:
    """Unpack a student's zip or tar (plain, gzip, bzip2 or xz) into `target`; ArchiveError if unsafe."""
    try:
        if archive.stat().st_size > stream_cap():
            raise ArchiveError(f"the archive is {_size(archive.stat().st_size)}; the cap is {_size(stream_cap())}")
        with archive.open("rb") as file:
            kind = archive_format(file.read(512))
            file.seek(0)
            if kind == "zip":
                _check_zip_directory(file)
                with zipfile.ZipFile(file) as opened:
                    _write_entries(_zip_entries(opened), target)
            else:
                with DECOMPRESSORS[kind](file) as plain:
                    stream = _CappedStream(plain, stream_cap())
                    with tarfile.open(fileobj=stream, mode="r|", tarinfo=_CheckedHeader) as opened:
                        _write_entries(_tar_entries(opened), target)
    except ArchiveError:
        raise
    except UNREADABLE as error:
        raise ArchiveError(f"it cannot be read as an archive ({type(error).__name__}: {error})") from None


def archive_format(head: bytes) -> str:
    """'zip', 'gzip', 'bzip2', 'xz' or 'tar', from an archive's first 512 bytes."""
    for magic, kind in MAGIC.items():
        if head.startswith(magic):
            return kind
    offset, magic = TAR_MAGIC
    if head[offset : offset + len(magic)] == magic:
        return "tar"
    raise ArchiveError(f"it cannot be read as an archive: it starts with {head[:8]!r}, "
                       "which is not a zip, a tar, or a gzip, bzip2 or xz file")  # fmt: skip


# --- Reading entries ---------------------------------------------------------------------------


@dataclass
class _Entry:
    name: str
    kind: str  # "file", "dir", "link" or "special"
    size: int  # as the archive declares it; the bytes written are counted again
    open: Callable[[], BinaryIO]


def _check_zip_directory(file: BinaryIO) -> None:
    # zipfile's own reader of the end record (zip64's included): private, but the one that agrees with it.
    end = zipfile._EndRecData(file)
    if end is None:
        return  # not a zip after all: zipfile says so
    entries, size = end[zipfile._ECD_ENTRIES_TOTAL], end[zipfile._ECD_SIZE]
    if entries > MAX_ENTRIES or size > MAX_ENTRIES * ZIP_RECORD_BYTES:
        raise ArchiveError(f"its central directory declares {entries} entries in {size} bytes; "
                           f"the cap is {MAX_ENTRIES} entries")  # fmt: skip


def _zip_entries(archive: zipfile.ZipFile) -> Iterator[_Entry]:
    for info in archive.infolist():
        mode = info.external_attr >> 16  # the Unix mode, for archives made on Unix
        kind = "link" if stat.S_ISLNK(mode) else "dir" if info.is_dir() else "file"
        yield _Entry(info.filename, kind, info.file_size, lambda info=info: archive.open(info))


def _tar_entries(archive: tarfile.TarFile) -> Iterator[_Entry]:
    for member in archive:  # a stream: one header at a time, each entry's data read before the next
        if member.issym() or member.islnk():
            kind = "link"
        elif member.issparse():
            kind = "special"  # holes to fill in: no source file is sparse
        else:
            kind = "file" if member.isreg() else "dir" if member.isdir() else "special"
        yield _Entry(member.name, kind, member.size, lambda member=member: archive.extractfile(member))


class _CheckedHeader(tarfile.TarInfo):
    """A tar header whose extended payload is checked before tarfile reads it whole into memory."""

    EXTENDED = {  # header type -> what a message calls it
        tarfile.GNUTYPE_LONGNAME: "GNU long-name",
        tarfile.GNUTYPE_LONGLINK: "GNU long-link",
        tarfile.XHDTYPE: "pax",
        tarfile.XGLTYPE: "pax global",
        tarfile.SOLARIS_XHDTYPE: "Solaris pax",
    }

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        # tarfile's hook for subclasses, called for every header, the extended ones included.
        if self.type in self.EXTENDED and not 0 <= self.size <= MAX_HEADER_BYTES:
            raise ArchiveError(f"its {self.EXTENDED[self.type]} header '{self.name}' declares {self.size} bytes; "
                               f"the cap is {MAX_HEADER_BYTES // 2**10} KiB")  # fmt: skip
        return super()._proc_member(tarfile_)


class _CappedStream:
    """The decompressed tar stream, cut off at `limit` bytes: a bomb, or skipping, stops there."""

    def __init__(self, source: BinaryIO, limit: int):
        self.source, self.limit, self.consumed = source, limit, 0

    def read(self, size: int) -> bytes:
        data = self.source.read(size)  # tarfile asks for a record (10 KiB) at a time
        self.consumed += len(data)
        if self.consumed > self.limit:
            raise ArchiveError(f"it decompresses to more than {_size(self.limit)} of tar stream "
                               "(headers and skipped entries included)")  # fmt: skip
        return data


# --- Writing -----------------------------------------------------------------------------------


def _write_entries(entries: Iterator[_Entry], target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    count = declared = written = 0
    for entry in entries:
        count += 1
        if count > MAX_ENTRIES:  # before the entry is looked at, so reading stops here
            raise ArchiveError(f"it holds more than {MAX_ENTRIES} entries (files, folders and skipped ones)")
        if entry.kind in ("link", "special"):
            what = "a link" if entry.kind == "link" else "a device, pipe or sparse file"
            raise ArchiveError(f"entry '{entry.name}' is {what}; a submission may hold only files and folders")
        path = _inside(target, entry.name)
        declared += entry.size
        if entry.size < 0 or declared > MAX_BYTES:  # skipped entries too: skipping a tar entry reads it
            raise ArchiveError(f"entry '{entry.name}' declares {entry.size} bytes, which takes the archive "
                               f"past the {_size(MAX_BYTES)} cap")  # fmt: skip
        if path is None or entry.kind == "dir":
            (path or target).mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        written = _copy_capped(entry, path, written)


def _inside(target: Path, name: str) -> Path | None:
    """Where an entry lands (None: nowhere, it is skipped), or ArchiveError when it would leave `target`."""
    pure = PurePosixPath(name.replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts or re.match(r"^[A-Za-z]:", name):
        raise ArchiveError(f"entry '{name}' points outside the submission folder")
    parts = [p for p in pure.parts if p not in ("", ".")]
    if not parts or any(p in IGNORED for p in parts):
        return None  # macOS resource forks and bytecode are not code: never opened, never written
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
                raise ArchiveError(f"it unpacks to more than {_size(MAX_BYTES)} (at entry '{entry.name}')")
            destination.write(chunk)
    return written
