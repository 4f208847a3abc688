"""The service's intake processes (grader/service/uploads.py's Intake): an upload is unpacked
outside the server's process, at a lower priority, as `batch` unpacks it; a process that dies
unpacking costs that one upload alone, with a message, and the next upload is unpacked."""

from __future__ import annotations

import io
import os
import signal

import pytest

from service_run import zip_of
from grader.service import uploads

KNOWN = ["softmax", "vector_add"]


@pytest.fixture
def intake():
    found = uploads.Intake(workers=1)
    yield found
    found.close()


def test_an_upload_is_unpacked_in_a_process_of_its_own_at_a_lower_priority(intake, tmp_path):
    archive = io.BytesIO(zip_of({"vector_add/vector_add.py": "# mine\n", "vector_add/note.txt": "hi"}))
    upload = intake.receive(archive, "alice", tmp_path, [], KNOWN)
    assert (upload.root / "vector_add" / "vector_add.py").read_text() == "# mine\n" and list(upload.hashes) == ["vector_add"]
    [worker] = intake.pool._processes.values()
    assert worker.pid != os.getpid() and os.getpriority(os.PRIO_PROCESS, worker.pid) == uploads.INTAKE_NICENESS


def test_a_refused_upload_says_why_and_leaves_no_folder(intake, tmp_path):
    with pytest.raises(uploads.Refused, match="holds no assignment folder"):
        intake.receive(io.BytesIO(zip_of({"notes/readme.txt": "x"})), "bob", tmp_path, [], KNOWN)
    assert not any((tmp_path / uploads.FOLDER).iterdir())


def test_an_intake_process_that_dies_costs_one_upload_and_the_next_is_unpacked(intake, tmp_path):
    archive = zip_of({"vector_add/vector_add.py": "# mine\n"})
    intake.receive(io.BytesIO(archive), "carol", tmp_path, [], KNOWN)  # its process is running
    for process in intake.pool._processes.values():
        os.kill(process.pid, signal.SIGKILL)
    with pytest.raises(uploads.Refused, match="could not unpack this upload; try again"):
        intake.receive(io.BytesIO(archive), "carol", tmp_path, [], KNOWN)
    assert len(list((tmp_path / uploads.FOLDER).iterdir())) == 1, "the lost upload's folder is removed"
    assert intake.receive(io.BytesIO(archive), "carol", tmp_path, [], KNOWN).hashes
