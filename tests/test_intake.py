"""Intake of a class's submissions: layouts, names, and archives unpacked as hostile input."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import shutil
import struct
import tarfile
import threading
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from grader.course import archives, identity, intake
from grader.reporting import summary
from grader.assignment.loading import assignment_names

ASSIGNMENTS = assignment_names()
EXPORT_METADATA = """\
submission_111:
  :submitters:
  - :name: Ada Lovelace
    :sid: '001'
    :email: ada@example.edu
  :created_at: 2026-01-10 12:00:00.000000000 -08:00
  :score: !ruby/object:BigDecimal 18:0.4e1
  :status: processed
submission_222:
  :submitters:
  - :name: Alan Turing
    :email: alan@example.edu
  - :name: Grace Hopper
    :email: grace@example.edu
  :created_at: 2026-01-11 09:30:00.000000000 -08:00
  :score: 0.0
"""


def write_zip(path: Path, files: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.create_system = 3  # Unix, so the mode below is read
            info.external_attr = 0o120777 << 16  # a symbolic link
            archive.writestr(info, target)
    return path


def write_tar(path: Path, files: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE if name.endswith("/") else tarfile.REGTYPE
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            archive.addfile(info)
    return path


def write_bomb(path: Path) -> Path:
    """A zip of a few hundred kilobytes that unpacks past the size cap."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("vector_add/data.bin", "w", force_zip64=True) as member:
            for _ in range(archives.MAX_BYTES // 2**20 + 1):
                member.write(bytes(2**20))
    return path


GOOD = {"vector_add/vector_add.py": b"def add(x, y):\n    return x\n"}
# What grader.course.batch.OUTPUT_NAMES holds (not imported here: the batch imports torch, seconds to load).
RESERVED = (".unpacked", "gradebook.sqlite", "gradebook.sqlite-journal", "grades.csv", "summary.html", "similarity.csv",
            "canvas.csv", "leaderboards")
TAR_END = bytes(1024)  # two zero blocks


def tar_header(name: str, size: int, kind: bytes = tarfile.REGTYPE) -> bytes:
    """One 512-byte header declaring `size` bytes (base-256 past 8 GiB), whatever follows it."""
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    return info.tobuf(format=tarfile.GNU_FORMAT)


def padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % 512)


def pax_record(keyword: str, value: str) -> bytes:
    body = f" {keyword}={value}\n"
    length = len(body) + len(str(len(body)))
    length = len(body) + len(str(length))  # the length counts its own digits
    return f"{length}{body}".encode()


def archive_bytes(kind: str, files: dict[str, bytes]) -> bytes:
    """A good archive of the given format: zip, or a tar that is plain or gzip, bzip2 or xz compressed."""
    if kind == "zip":
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in files.items():
                archive.writestr(name, data)
        return buffer.getvalue()
    tar = b"".join(tar_header(name, len(data)) + padded(data) for name, data in files.items()) + TAR_END
    return {"tar": bytes, "gzip": gzip.compress, "bzip2": bz2.compress, "xz": lzma.compress}[kind](tar)


def declare_zip_size(path: Path, size: int) -> None:
    """Make the central directory declare `size` bytes for the zip's first entry."""
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, data.index(b"PK\x01\x02") + 24, size)  # the uncompressed size
    path.write_bytes(data)


@pytest.mark.parametrize("writer", [write_zip, write_tar], ids=["zip", "tar.gz"])
def test_a_good_archive_unpacks_and_a_wrapping_folder_is_seen_through(tmp_path, writer):
    archive = writer(tmp_path / ("kim.zip" if writer is write_zip else "kim.tar.gz"),
                     {f"kim-final/{name}": data for name, data in GOOD.items()})  # fmt: skip
    (tmp_path / "class").mkdir()
    shutil.move(archive, tmp_path / "class" / archive.name)
    [found] = intake.collect(tmp_path / "class", tmp_path / "staging", ASSIGNMENTS)
    assert found.student == "kim" and not found.problem
    assert found.folder == tmp_path / "staging" / "kim" / "kim-final"
    assert (found.folder / "vector_add" / "vector_add.py").read_bytes() == GOOD["vector_add/vector_add.py"]


@pytest.mark.parametrize(
    "files, links, problem",
    [
        ({"../evil.py": b"x"}, {}, "outside"),
        ({"/etc/evil.py": b"x"}, {}, "outside"),
        ({"a/../../evil.py": b"x"}, {}, "outside"),
        (GOOD, {"vector_add/passwd": "/etc/passwd"}, "link"),
        (GOOD, {"vector_add/up": "../../.."}, "link"),
    ],
    ids=["dotdot", "absolute", "nested-dotdot", "link-out", "link-up"],
)
@pytest.mark.parametrize("writer", [write_zip, write_tar], ids=["zip", "tar.gz"])
def test_hostile_entries_refuse_the_archive_and_write_nothing_outside(tmp_path, writer, files, links, problem):
    archive = writer(tmp_path / ("in.zip" if writer is write_zip else "in.tar.gz"), files, links)
    with pytest.raises(archives.ArchiveError, match=problem):
        archives.unpack(archive, tmp_path / "deep" / "target")
    assert not (tmp_path / "deep" / "evil.py").exists() and not (tmp_path / "evil.py").exists()


def test_a_bomb_stops_at_the_size_cap(tmp_path):
    bomb = write_bomb(tmp_path / "bomb.zip")
    assert bomb.stat().st_size < 1 << 20
    with pytest.raises(archives.ArchiveError, match="MiB"):
        archives.unpack(bomb, tmp_path / "out")
    written = sum(p.stat().st_size for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert written <= archives.MAX_BYTES


def test_too_many_files_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(archives, "MAX_ENTRIES", 3)
    archive = write_tar(tmp_path / "many.tar.gz", {f"vector_add/f{i}.py": b"" for i in range(5)})
    with pytest.raises(archives.ArchiveError, match="more than 3 entries"):
        archives.unpack(archive, tmp_path / "out")


def test_a_bad_archive_costs_its_student_only(tmp_path):
    klass = tmp_path / "class"
    klass.mkdir()
    write_zip(klass / "good.zip", GOOD)
    write_zip(klass / "evil.zip", {"../evil.py": b"x"})
    (klass / "broken.tar.gz").write_bytes(b"this is not a tarball")
    found = {s.student: s for s in intake.collect(klass, tmp_path / "staging", ASSIGNMENTS)}
    assert set(found) == {"good", "evil", "broken"}
    assert found["good"].folder is not None and not found["good"].problem
    assert found["evil"].folder is None and "evil.zip" in found["evil"].problem and "outside" in found["evil"].problem
    assert found["broken"].folder is None and "cannot be read" in found["broken"].problem
    assert not (tmp_path / "evil.py").exists()
    assert found["evil"].content_hash("vector_add").startswith("archive:")


def test_a_gradescope_export_is_named_by_its_submitters(tmp_path, repo):
    export = tmp_path / "export"
    export.mkdir()
    (export / "submission_metadata.yml").write_text(EXPORT_METADATA)
    shutil.copytree(repo / "solutions", export / "submission_111")
    shutil.copytree(repo / "starter", export / "submission_222" / "my-work")
    found = {s.student: s for s in intake.collect(export, tmp_path / "staging", ASSIGNMENTS)}
    assert set(found) == {"ada@example.edu", "alan@example.edu+grace@example.edu"}
    assert found["ada@example.edu"].folder == export / "submission_111"
    assert found["alan@example.edu+grace@example.edu"].folder == export / "submission_222" / "my-work"


def test_the_hash_follows_content_not_timestamps(tmp_path, repo):
    one, two = tmp_path / "one", tmp_path / "two"
    shutil.copytree(repo / "solutions", one)
    shutil.copytree(repo / "solutions", two, copy_function=shutil.copyfile)  # fresh timestamps
    (two / "vector_add" / "__pycache__").mkdir()
    (two / "vector_add" / "__pycache__" / "junk.pyc").write_bytes(b"ignored, as the grader ignores it")
    hashes = [intake.Submission(p.name, p, p).content_hash("vector_add") for p in (one, two)]
    assert hashes[0] == hashes[1]
    (two / "vector_add" / "vector_add.py").write_text("# changed\n")
    assert intake.Submission("two", two, two).content_hash("vector_add") != hashes[0]
    assert intake.Submission("one", one, one).content_hash("softmax") != hashes[0]


def test_a_student_is_the_exact_name_of_the_entry_letters_of_every_script_kept(tmp_path):
    """Issue 53, 2: names were rewritten to ASCII: `张伟` became `unnamed~...` with 0 points, and
    `José` and `Josè` both became `Jos_`. A name is kept as written and graded."""
    names = ["张伟", "José", "Josè", "Ōta", "Zed+alice", "Alice@somewhere", "=HYPERLINK(x)", "Jane Doe (late)"]
    klass = tmp_path / "class"
    for name in names:
        (klass / name / "vector_add").mkdir(parents=True)
    write_zip(klass / "Łukasz.zip", GOOD)
    found = {s.source.name: s for s in intake.collect(klass, tmp_path / "staging", ASSIGNMENTS, RESERVED)}
    for name in names:
        assert found[name].student == name and found[name].folder == klass / name and not found[name].held
    assert found["Łukasz.zip"].student == "Łukasz" and found["Łukasz.zip"].folder is not None
    assert len({identity.collision_key(n) for n in [*names, "Łukasz"]}) == len(names) + 1  # none reads like another


# --- Attacks measured against the grader: each archive built here declares its size rather than holding it


@pytest.mark.parametrize("kind", ["zip", "tar", "gzip", "bzip2", "xz"])
def test_the_format_is_read_from_the_content_not_the_suffix(tmp_path, kind):
    """A bzip2 tarball called .tar.gz, a zip called .tar.gz, a tarball called .zip: each unpacks as what it is."""
    for suffix in (".zip", ".tar.gz"):
        archive = tmp_path / f"kim{suffix}"
        archive.write_bytes(archive_bytes(kind, GOOD))
        archives.unpack(archive, tmp_path / suffix)
        assert (tmp_path / suffix / "vector_add" / "vector_add.py").read_bytes() == GOOD["vector_add/vector_add.py"]


def test_a_format_that_is_not_read_is_refused_naming_its_first_bytes(tmp_path):
    archive = tmp_path / "kim.zip"
    archive.write_bytes(b"7z\xbc\xaf\x27\x1c" + bytes(600))
    with pytest.raises(archives.ArchiveError, match=r"cannot be read .*7z.* not a zip, a tar"):
        archives.unpack(archive, tmp_path / "out")


def test_a_bzip2_bomb_called_tar_gz_is_refused_before_it_is_decompressed(tmp_path, monkeypatch):
    """The measured attack: 1 KB of `.tar.gz`, really bzip2, whose __MACOSX/ entry is 760 MiB of zeros.

    Here 16 MiB against a 1 MiB cap; the bzip2 decompressor counts what it is made to produce.
    """
    monkeypatch.setattr(archives, "MAX_BYTES", 2**20)
    zeros = bz2.compress(bytes(2**20))  # 1 MiB in 40 bytes; bzip2 streams concatenate
    bomb = bz2.compress(tar_header("__MACOSX/._big", 16 * 2**20)) + zeros * 16 + bz2.compress(TAR_END)
    (tmp_path / "kim.tar.gz").write_bytes(bomb)
    produced = []

    class Counted:
        def __init__(self, real=bz2.BZ2Decompressor):
            self.real = real()

        def decompress(self, data, max_length=-1):
            produced.append(len(out := self.real.decompress(data, max_length)))
            return out

        def __getattr__(self, name):
            return getattr(self.real, name)

    monkeypatch.setattr(bz2, "BZ2Decompressor", Counted)
    with pytest.raises(archives.ArchiveError, match=r"entry '__MACOSX/\._big' declares 16777216 bytes.* 1 MiB cap"):
        archives.unpack(tmp_path / "kim.tar.gz", tmp_path / "out")
    assert len(bomb) < 1500 and 0 < sum(produced) < 2**20


EXTENDED = {  # id: (type, header name, declared size, compression)
    "longname-1GiB": (tarfile.GNUTYPE_LONGNAME, "././@LongLink", 2**30, gzip.compress),
    "longname-1TiB": (tarfile.GNUTYPE_LONGNAME, "././@LongLink", 2**40, gzip.compress),
    "pax-1GiB": (tarfile.XHDTYPE, "././@PaxHeader", 2**30, gzip.compress),
    "pax-1TiB": (tarfile.XHDTYPE, "././@PaxHeader", 2**40, gzip.compress),
    "longlink-plain": (tarfile.GNUTYPE_LONGLINK, "././@LongLink", 2**40, bytes),
    "global-plain": (tarfile.XGLTYPE, "././@GlobalHead", 2**40, bytes),
}


@pytest.mark.parametrize("kind, name, size, compress", EXTENDED.values(), ids=EXTENDED.keys())
def test_an_extended_header_declaring_gigabytes_is_refused_before_it_is_read(tmp_path, kind, name, size, compress):
    """tarfile reads a long name or pax record whole: a 100-byte archive cost 1 GiB, or at 1 TiB a MemoryError."""
    archive = tmp_path / "kim.tar.gz"
    archive.write_bytes(compress(tar_header(name, size, kind) + b"a" * 4096 + TAR_END))
    tracemalloc.start()
    try:
        with pytest.raises(archives.ArchiveError, match=rf"header '{name}' declares {size} bytes; the cap is 64 KiB"):
            archives.unpack(archive, tmp_path / "out")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20


def test_an_archive_that_crashed_the_batch_costs_its_student_only(tmp_path):
    """A 1 TiB long name (a MemoryError), corrupt deflate (a zlib.error), corrupt xz (an LZMAError)."""
    klass = tmp_path / "class"
    klass.mkdir()
    write_zip(klass / "good.zip", GOOD)
    (klass / "longname.tar").write_bytes(tar_header("././@LongLink", 2**40, tarfile.GNUTYPE_LONGNAME) + TAR_END)
    deflated = bytearray(archive_bytes("zip", GOOD))
    start = deflated.index(b"vector_add.py") + len("vector_add.py")  # the compressed data follows the name
    deflated[start : start + 8] = b"\xff" * 8
    (klass / "deflate.zip").write_bytes(deflated)
    noise = bytes(range(256)) * 16 + bytes((i * 7919) % 251 for i in range(100_000))
    xz = bytearray(archive_bytes("xz", {**GOOD, "vector_add/noise.bin": noise}))
    xz[len(xz) // 2 : len(xz) // 2 + 16] = bytes(16)
    (klass / "xz.tar.xz").write_bytes(xz)
    found = {s.student: s for s in intake.collect(klass, tmp_path / "staging", ASSIGNMENTS)}
    assert found["good"].folder is not None and not found["good"].problem
    assert "'././@LongLink' declares 1099511627776 bytes; the cap is 64 KiB" in found["longname"].problem
    assert "cannot be read" in found["deflate"].problem and "cannot be read" in found["xz"].problem
    assert all(found[s].folder is None for s in ("longname", "deflate", "xz"))


@pytest.mark.parametrize("writer", [write_zip, write_tar], ids=["zip", "tar.gz"])
@pytest.mark.parametrize("filler", ["folders", "skipped"])
def test_every_entry_counts_against_one_cap_and_reading_stops_there(tmp_path, monkeypatch, writer, filler):
    """200,000 folders (940 KB of .tar.gz) passed a cap that counted files only."""
    monkeypatch.setattr(archives, "MAX_ENTRIES", 5)
    names = [f"d{i}/" for i in range(20)] if filler == "folders" else [f"__MACOSX/._f{i}" for i in range(20)]
    files = {**dict.fromkeys(names, b""), "../evil.py": b"x"}  # past the cap: never reached
    archive = writer(tmp_path / ("in.zip" if writer is write_zip else "in.tar.gz"), files)
    if writer is write_zip:  # an end record that owns up to 21 entries is refused before this count; this one lies
        data = bytearray(archive.read_bytes())
        struct.pack_into("<HH", data, data.rindex(b"PK\x05\x06") + 8, 1, 1)  # entries here, entries in all
        archive.write_bytes(data)
    with pytest.raises(archives.ArchiveError, match=r"more than 5 entries \(files, folders and skipped ones\)"):
        archives.unpack(archive, tmp_path / "deep" / "out")
    assert not (tmp_path / "deep" / "evil.py").exists()


def test_a_zip_directory_bigger_than_the_cap_needs_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    """zipfile builds an object per entry on opening: the end record's totals are checked first."""
    monkeypatch.setattr(archives, "MAX_ENTRIES", 5)
    archive = write_zip(tmp_path / "many.zip", dict.fromkeys((f"d{i}/" for i in range(50)), b""))
    with pytest.raises(archives.ArchiveError, match="central directory declares 50 entries .* cap is 5 entries"):
        archives.unpack(archive, tmp_path / "out")


@pytest.mark.parametrize("form", ["zip", "tar.gz"])
def test_a_skipped_entry_declaring_gigabytes_is_refused_without_being_read(tmp_path, form):
    """Skipping a tar entry reads it: a 4 GiB __MACOSX/ entry was decompressed to be thrown away.

    The data is not there: reading it would fail on the missing bytes, not on the declared size.
    """
    archive = tmp_path / f"kim.{form}"
    if form == "zip":
        write_zip(archive, {"__MACOSX/._big": b"x", **GOOD})
        declare_zip_size(archive, 3 * 2**30)
    else:
        archive.write_bytes(gzip.compress(tar_header("__MACOSX/._big", 4 * 2**30) + bytes(512) + TAR_END))
    with pytest.raises(archives.ArchiveError, match=r"entry '__MACOSX/\._big' declares \d{10} bytes.* 50 MiB cap"):
        archives.unpack(archive, tmp_path / "out")


@pytest.mark.parametrize("writer", [write_zip, write_tar], ids=["zip", "tar.gz"])
def test_skipped_entries_are_never_opened(tmp_path, monkeypatch, writer):
    files = {"__MACOSX/vector_add/._vector_add.py": b"\0" * 4096, "vector_add/__pycache__/x.pyc": b"\0", **GOOD}
    archive = writer(tmp_path / ("in.zip" if writer is write_zip else "in.tar.gz"), files)
    opened = []
    for cls, method in ((zipfile.ZipFile, "open"), (tarfile.TarFile, "extractfile")):

        def spy(self, member, *args, original=getattr(cls, method), **kwargs):
            opened.append(getattr(member, "filename", getattr(member, "name", member)))
            return original(self, member, *args, **kwargs)

        monkeypatch.setattr(cls, method, spy)
    archives.unpack(archive, tmp_path / "out")
    assert opened == ["vector_add/vector_add.py"]
    assert sorted(p.name for p in (tmp_path / "out").rglob("*")) == ["vector_add", "vector_add.py"]


def test_an_archive_file_bigger_than_its_contents_could_be_is_refused_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(archives, "MAX_BYTES", 2**10)
    monkeypatch.setattr(archives, "MAX_ENTRIES", 1)
    archive = write_zip(tmp_path / "kim.zip", GOOD)
    archive.write_bytes(archive.read_bytes() + bytes(30_000))  # a gzip of 30,000 empty members reads the same
    with pytest.raises(archives.ArchiveError, match="the archive is 29 KiB; the cap is 19 KiB"):
        archives.unpack(archive, tmp_path / "out")


def test_the_tar_stream_is_capped_headers_included(tmp_path, monkeypatch):
    """Extended headers under their own cap still cost reading: 2000 of 64 KiB are 128 MiB for nothing."""
    monkeypatch.setattr(archives, "MAX_BYTES", 2**16)
    monkeypatch.setattr(archives, "MAX_ENTRIES", 4)
    record = pax_record("comment", "x" * 60_000)
    members = [tar_header("././@PaxHeader", len(record), tarfile.XHDTYPE) + padded(record)
               + tar_header(f"vector_add/f{i}.py", 0) for i in range(3)]  # fmt: skip
    archive = tmp_path / "kim.tar.gz"
    archive.write_bytes(gzip.compress(b"".join(members) + TAR_END))
    with pytest.raises(archives.ArchiveError, match=r"decompresses to more than 106 KiB of tar stream"):
        archives.unpack(archive, tmp_path / "out")


def test_a_reserved_or_unsafe_student_name_costs_that_student_only(tmp_path):
    """A student called grades.csv made the batch's own grades.csv a folder, and the end of the run crash."""
    klass = tmp_path / "class"
    unsafe = {
        "grades.csv": "is taken by the batch's own 'grades.csv'",
        "Summary.HTML": "is taken by the batch's own 'summary.html'",
        "gradebook.sqlite-journal": "is taken by the batch's own 'gradebook.sqlite-journal'",
        "back\\slash": "holds a path separator",
        "tab\there": "holds a control or invisible formatting character",
        "bidi\u202eevil": "holds a control or invisible formatting character",
        "@@@": "has no letter or digit",
    }
    for name in ("alice", *unsafe):
        (klass / name / "vector_add").mkdir(parents=True)
        (klass / name / "vector_add" / "vector_add.py").write_bytes(GOOD["vector_add/vector_add.py"])
    write_zip(klass / "gradebook.sqlite.zip", GOOD)
    unsafe["gradebook.sqlite.zip"] = "is taken by the batch's own 'gradebook.sqlite'"
    out = tmp_path / "out"
    found = intake.collect(klass, out / ".unpacked", ASSIGNMENTS, RESERVED)
    by_source = {s.source.name: s for s in found}
    assert by_source["alice"].student == "alice" and by_source["alice"].folder is not None
    for name, why in unsafe.items():
        refused = by_source[name]
        assert refused.folder is None and repr(name) in refused.problem and why in refused.problem, refused
        assert refused.content_hash("vector_add").startswith("archive:")
    ids = {s.student.casefold() for s in found}
    assert len(ids) == len(found) and not ids & {r.casefold() for r in RESERVED}
    assert not (out / ".unpacked" / "gradebook.sqlite").exists()  # refused before it was unpacked
    summary.write_outputs(out, {s.student: [] for s in found}, {}, [])  # the end of the run, as the batch does it
    assert (out / "grades.csv").is_file() and all((out / s.student / "report.html").is_file() for s in found)


def test_a_gradescope_submitter_name_is_checked_too(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    (export / "submission_metadata.yml").write_text(
        "submission_1:\n  :submitters:\n  - :email: .hidden@example.edu\n"
        "submission_2:\n  :submitters:\n  - :sid: summary.html\n"
        "submission_3:\n  :submitters:\n  - :email: ada@example.edu\n"
        "submission_4:\n  :submitters:\n" + "".join(f"  - :email: {c * 60}@example.edu\n" for c in "abcde")
    )
    for folder in ("submission_1", "submission_2", "submission_3", "submission_4"):
        (export / folder / "vector_add").mkdir(parents=True)
    found = {s.source.name: s for s in intake.collect(export, tmp_path / "staging", ASSIGNMENTS, RESERVED)}
    assert "'.hidden@example.edu' starts with a dot" in found["submission_1"].problem
    group = found["submission_4"].student  # too long for a folder name: shortened, not refused
    assert not found["submission_4"].problem and len(group.encode()) <= identity.MAX_NAME_BYTES
    assert group.startswith("a" * 60 + "@example.edu+") and "~" in group
    assert found["submission_4"].people == tuple(f"{c * 60}@example.edu" for c in "abcde")  # its members, for Canvas
    assert "'summary.html' is taken by the batch's own 'summary.html'" in found["submission_2"].problem
    assert found["submission_3"].student == "ada@example.edu" and not found["submission_3"].problem


# Issue 53, 2: each of these beside `bob` was graded *as* bob (his extension and submission time
# included) while bob was renamed `bob~<hash>`. Every normalisation a name could get: case, the
# punctuation the old safe-name rule stripped or replaced, Unicode's compatibility forms,
# decomposed letters, invisible characters, spaces, an archive's own name.
READS_LIKE_BOB = ["Bob", "_bob", "-bob", "@bob", "+bob", "bob.", "b.o.b", "BOB ", "ｂｏｂ", "Bob.zip", "bob.tar.gz",
                  "bob\u200dx"[:4]]  # fmt: skip


@pytest.mark.parametrize("other", READS_LIKE_BOB)
def test_names_that_read_alike_are_all_held_back_and_none_takes_the_others_name(tmp_path, other):
    klass = tmp_path / "class"
    (klass / "bob" / "vector_add").mkdir(parents=True)
    (klass / "alice" / "vector_add").mkdir(parents=True)
    if other.endswith((".zip", ".tar.gz")):
        (write_zip if other.endswith(".zip") else write_tar)(klass / other, GOOD)
    else:
        (klass / other / "vector_add").mkdir(parents=True)
    found = {s.source.name: s for s in intake.collect(klass, tmp_path / "staging", ASSIGNMENTS, RESERVED)}
    assert not found["alice"].held and found["alice"].folder is not None
    for entry in ("bob", other):
        held = found[entry]
        assert held.held and held.folder is None and not held.problem, held  # graded as nobody
        assert "'bob' (as 'bob')" in held.held and f"{other!r}" in held.held and "[names]" in held.held
    assert not (tmp_path / "staging").exists()  # a held archive is not even unpacked


def test_course_toml_names_say_whose_each_entry_is(tmp_path):
    """The TA's decision: `Bob.zip` is robert's, `_bob` is nobody's; bob is graded as bob again. A
    name the TA gives that reads like another's is held back too."""
    klass = tmp_path / "class"
    for name in ("bob", "_bob"):
        (klass / name / "vector_add").mkdir(parents=True)
    write_zip(klass / "Bob.zip", GOOD)
    names = {"Bob.zip": "robert", "_bob": ""}
    found = {s.source.name: s for s in intake.collect(klass, tmp_path / "staging", ASSIGNMENTS, RESERVED, names)}
    assert (found["bob"].student, found["bob"].held, found["bob"].folder) == ("bob", "", klass / "bob")
    assert found["Bob.zip"].student == "robert" and found["Bob.zip"].folder == tmp_path / "staging" / "robert"
    assert found["_bob"].folder is None and "set aside" in found["_bob"].held
    again = intake.collect(klass, tmp_path / "staging", ASSIGNMENTS, RESERVED, {"Bob.zip": "BOB", "_bob": ""})
    assert all(s.held for s in again if s.source.name != "_bob" and s.student.casefold() == "bob")


def test_a_hostile_archive_beside_an_honest_folder_is_held_back_with_it_until_the_ta_decides(tmp_path):
    """Issue 41, 7: `Carol.zip` (an entry escaping its folder) beside an honest `carol/` refused
    both, and carol got 0; then the folder was graded as carol and the archive under an id of its
    own. The grader cannot tell a classmate's name taken from a second hand-in: both wait, with
    nothing unpacked, until course.toml's [names] says; then each is what it is."""
    klass = tmp_path / "class"
    (klass / "carol" / "vector_add").mkdir(parents=True)
    (klass / "carol" / "vector_add" / "vector_add.py").write_bytes(GOOD["vector_add/vector_add.py"])
    write_zip(klass / "Carol.zip", {"vector_add/vector_add.py": b"x", "../../escaped.py": b"x"})
    found = {s.source.name: s for s in intake.collect(klass, tmp_path / "staging", ASSIGNMENTS, RESERVED)}
    assert found["carol"].held and found["Carol.zip"].held and not (tmp_path / "staging").exists()
    found = {s.source.name: s for s in intake.collect(klass, tmp_path / "staging", ASSIGNMENTS, RESERVED,
                                                      {"Carol.zip": "carol-archive"})}  # fmt: skip
    honest, hostile = found["carol"], found["Carol.zip"]
    assert honest.student == "carol" and honest.folder == klass / "carol" and not honest.problem
    assert hostile.folder is None and hostile.student == "carol-archive" and "outside" in hostile.problem
    assert not (tmp_path / "escaped.py").exists()


def test_an_entry_that_is_neither_a_folder_nor_a_file_costs_its_student_only(tmp_path):
    """A pipe named like an archive blocked the batch for good when it was opened to be unpacked."""
    klass = tmp_path / "class"
    (klass / "alice" / "vector_add").mkdir(parents=True)
    os.mkfifo(klass / "mallory.zip")
    result: list = []
    reader = threading.Thread(target=lambda: result.append(intake.collect(klass, tmp_path / "s", ASSIGNMENTS)),
                              daemon=True)  # fmt: skip
    reader.start()
    reader.join(60)
    assert result, "intake blocked on the pipe"
    found = {s.source.name: s for s in result[0]}
    assert found["alice"].folder is not None and not found["alice"].problem
    assert found["mallory.zip"].folder is None and "neither a folder nor a file" in found["mallory.zip"].problem


def test_a_link_entry_is_refused_not_followed(tmp_path):
    """Issue 41, 6: an entry that is a link (to solutions/, or a classmate's folder) was graded as
    what it points at. It is refused by name; the folder it points at is graded once, as its own."""
    klass = tmp_path / "class"
    (klass / "alice" / "vector_add").mkdir(parents=True)
    (klass / "mallory").symlink_to(klass / "alice")
    (klass / "trudy.zip").symlink_to(write_zip(tmp_path / "elsewhere.zip", GOOD))
    found = {s.source.name: s for s in intake.collect(klass, tmp_path / "staging", ASSIGNMENTS, RESERVED)}
    assert found["alice"].folder == klass / "alice"
    for name in ("mallory", "trudy.zip"):
        assert found[name].folder is None and "is a link, which the grader does not follow" in found[name].problem
