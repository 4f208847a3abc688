"""The result channel, from the parent's side: what a child sends is data the parent checks.

A child signs each frame with the job's key (messages.FrameWriter); the parent's reader
(isolation._Channel) builds each message against its declared types and then judges what it
says. Here a writer stands in for the child and sends what a hostile one could.
"""

from __future__ import annotations

import os
import secrets

import pytest

from grader import isolation, messages
from grader.messages import Done, Failure, Finished, Hello, Imported, Start, Task

CAP = 16 * 2**30  # the assignment's gpu_memory_gib, in bytes
TASK = Task("t", "add", "case", 0, 0)


def _read(sent: list, tmp_path, signed_with: bytes | None = None, gate=None, tasks=()) -> isolation.ChildRun:
    """What the parent makes of `sent`, each message signed as a child signs it: with the job's key,
    or with `signed_with`; `gate(stage)` is called as a gated child's parent would open it; `tasks`
    are the job's."""
    key = secrets.token_bytes(32)
    read_fd, write_fd = os.pipe()
    run = isolation.ChildRun()
    channel = isolation._Channel(read_fd, key, tmp_path, list(tasks), run, lambda: None, CAP, gate)
    writer = messages.FrameWriter(write_fd, signed_with or key)
    for message in sent:
        writer.send(message)
    os.close(write_fd)
    channel.run()
    return run


@pytest.mark.parametrize("figure, kept", [(3 * 2**30, 3 * 2**30), (CAP, CAP), (CAP + 1, 0), (-1, 0), (0, 0)])
def test_the_gpu_memory_a_child_reports_is_kept_only_within_its_cap(tmp_path, figure, kept):
    run = _read([Finished(figure)], tmp_path)
    assert run.finished and run.violation is None
    assert run.gpu_reserved_bytes == kept


@pytest.mark.parametrize("figure", ["lots", 1e300, True, 9223372036854775807])
def test_a_gpu_memory_figure_that_is_no_integer_is_tampering(tmp_path, figure):
    run = _read([Finished(figure)], tmp_path)
    assert not run.finished and run.gpu_reserved_bytes == 0
    assert run.violation is not None and run.violation.reason == "tampering"


def test_a_second_hello_is_tampering(tmp_path):
    """Hello opens a child's gate (the GPU's lock, where workers share a GPU): a forged second one
    must not take it again."""
    run = _read([Hello("ready"), Hello("ready")], tmp_path)
    assert run.ready and run.violation is not None and run.violation.reason == "tampering"
    assert "Hello out of turn" in run.violation.message


def test_a_gated_child_opens_its_gate_in_two_stages_in_order(tmp_path):
    """Imported opens the gate's first stage (start CUDA), Hello the second (run student code), each
    once: anything else on the channel of a gated child is tampering, and opens nothing."""
    stages = []
    run = _read([Imported(), Hello("ready")], tmp_path, gate=stages.append)
    assert stages == ["cuda", "run"] and run.ready and run.violation is None
    for sent, opened in (([Hello("ready")], []), ([Imported(), Imported()], ["cuda"]),
                         ([Imported(), Hello("ready"), Imported()], ["cuda", "run"])):  # fmt: skip
        stages = []
        run = _read(sent, tmp_path, gate=stages.append)
        assert stages == opened and run.violation is not None and run.violation.reason == "tampering", sent
    run = _read([Imported()], tmp_path)
    assert run.violation is not None and run.violation.reason == "tampering", "an ungated child has no gate to open"


def test_a_frame_signed_with_another_key_is_tampering(tmp_path):
    run = _read([Finished(2**30)], tmp_path, signed_with=secrets.token_bytes(32))
    assert not run.finished and run.gpu_reserved_bytes == 0
    assert run.violation is not None and run.violation.reason == "tampering"


def test_the_phases_line_shows_the_most_gpu_memory_any_child_held():
    from grader.grading import Phases

    phases = Phases(start=0.0, correctness=0.0, timing=0.0)
    phases.add_child("correctness", isolation.ChildRun(seconds=5.0, ready_s=1.0, gpu_reserved_bytes=3 * 2**30))
    phases.add_child("timing", isolation.ChildRun(seconds=2.0, ready_s=1.0, gpu_reserved_bytes=2**30))
    assert phases.line() == "start 2.0 s, correctness 4.0 s, timing 1.0 s (GPU memory held by torch: at most 3.0 GiB)"
    assert phases.gpu_reserved_bytes == 3 * 2**30
    assert "GPU memory" not in Phases(start=1.0).line(), "the CPU tier reports none"


@pytest.mark.parametrize("reason", ["ok", "too_slow", "no_gpu", "a reason of its own"])
def test_a_failure_no_child_may_report_is_tampering(tmp_path, reason):
    """A child's Failure is its own account of the student's code (an import error, a crash): a
    reason only the parent gives, "ok" above all, is not a child's to give."""
    run = _read([Hello("ready"), Start("t"), Done("t", Failure(reason, "the child's word"))], tmp_path, tasks=[TASK])
    assert run.violation is not None and run.violation.reason == "tampering", reason
    assert "a reason a child may give" in run.violation.message
    assert run.outcomes == {}, run.outcomes


def test_a_failure_a_child_may_report_is_taken(tmp_path):
    run = _read([Hello("ready"), Start("t"), Done("t", Failure("import_error", "no module named tritonn"))], tmp_path,
                tasks=[TASK])  # fmt: skip
    assert run.violation is None and run.outcomes["t"].outcome.reason == "import_error"
