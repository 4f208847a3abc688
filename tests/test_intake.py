"""Intake of a class's submissions: layouts, names, and archives unpacked as hostile input."""

from __future__ import annotations

import io
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest

from grader import intake
from grader.spec import assignment_names

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
            for _ in range(intake.MAX_BYTES // 2**20 + 1):
                member.write(bytes(2**20))
    return path


GOOD = {"vector_add/vector_add.py": b"def add(x, y):\n    return x\n"}


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
    with pytest.raises(intake.ArchiveError, match=problem):
        intake.unpack(archive, tmp_path / "deep" / "target")
    assert not (tmp_path / "deep" / "evil.py").exists() and not (tmp_path / "evil.py").exists()


def test_a_bomb_stops_at_the_size_cap(tmp_path):
    bomb = write_bomb(tmp_path / "bomb.zip")
    assert bomb.stat().st_size < 1 << 20
    with pytest.raises(intake.ArchiveError, match="MiB"):
        intake.unpack(bomb, tmp_path / "out")
    written = sum(p.stat().st_size for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert written <= intake.MAX_BYTES


def test_too_many_files_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(intake, "MAX_FILES", 3)
    archive = write_tar(tmp_path / "many.tar.gz", {f"vector_add/f{i}.py": b"" for i in range(5)})
    with pytest.raises(intake.ArchiveError, match="more than 3 files"):
        intake.unpack(archive, tmp_path / "out")


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


def test_student_names_are_safe_folder_names():
    assert intake.student_name("../../etc") == "etc"
    assert intake.student_name("Jane Doe (late)") == "Jane_Doe_late_"
    assert intake.student_name("...") == "unnamed"
    assert intake.student_name("+1+2") == "1+2" and intake.student_name("=HYPERLINK(x)") == "HYPERLINK_x_"
