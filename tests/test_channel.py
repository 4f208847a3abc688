"""The result channel, from the parent's side: what a child sends is data the parent checks.

A child signs each frame with the job's key (frames.FrameWriter); the parent's reader
(child_run.Channel) builds each message against its declared types and then judges what it
says. Here a writer stands in for the child and sends what a hostile one could.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import threading
from types import SimpleNamespace

import pytest

from grader.messages import decoding, frames, kept_file, reports
from grader.running import child_run, isolation, tasks
from grader.messages.job import Task
from grader.messages.reports import Done, Failure, Finished, Hello, Imported, Start

CAP = 16 * 2**30  # the assignment's gpu_memory_gib, in bytes
TASK = Task("t", "add", "case", 0, 0)


def _read(sent: list, tmp_path, signed_with: bytes | None = None, gate=None, tasks=()) -> child_run.ChildRun:
    """What the parent makes of `sent`, each message signed as a child signs it: with the job's key,
    or with `signed_with`; `gate(stage)` is called as a gated child's parent would open it; `tasks`
    are the job's."""
    key = secrets.token_bytes(32)
    read_fd, write_fd = os.pipe()
    run = child_run.ChildRun()
    channel = child_run.Channel(read_fd, key, tmp_path, list(tasks), run, lambda: None, CAP, gate)
    writer = frames.FrameWriter(write_fd, signed_with or key)
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
    from grader.running.tasks import Phases

    phases = Phases(start=0.0, correctness=0.0, timing=0.0)
    phases.add_child("correctness", child_run.ChildRun(seconds=5.0, ready_s=1.0, gpu_reserved_bytes=3 * 2**30))
    phases.add_child("timing", child_run.ChildRun(seconds=2.0, ready_s=1.0, gpu_reserved_bytes=2**30))
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


BENCH = [Task(f"add:bench:{i}", "add", "bench", i, 0, max_output_bytes=1 << 20) for i in range(2)]


def _bench_done(task: Task, kind: str = "tensor") -> Done:
    kept = reports.Observation(reports.Returned(kind, "Tensor" if kind == "tensor" else "MyTensor", "kept"))
    return Done(task.id, reports.BenchReport(reports.Timings([0.1]), reports.Timings([0.1]), reports.Activity(),
                                              kept=kept))  # fmt: skip


def _kept(task: Task, name: str = "kept") -> tuple:
    return reports.Output(task.id, name, "float32", [4]), bytes(16)


def _timed_run(after_last_done: list, tmp_path, kinds=("tensor", "tensor"),
               kept: kept_file.KeptFile | None = None) -> tuple[child_run.ChildRun, list]:  # fmt: skip
    """A gated child that times both benchmarks and then sends `after_last_done` (messages, or
    (Output, payload) pairs), as Worker.run does with the outputs it kept for later; `kept`: the
    kept outputs' file it was given."""
    key = secrets.token_bytes(32)
    read_fd, write_fd = os.pipe()
    run, stages = child_run.ChildRun(), []
    channel = child_run.Channel(read_fd, key, tmp_path, BENCH, run, lambda: None, CAP, stages.append, kept)
    writer = frames.FrameWriter(write_fd, key)
    for message in [Imported(), Hello("ready")] + [m for task, kind in zip(BENCH, kinds)
                                                   for m in (Start(task.id), _bench_done(task, kind))] + after_last_done:
        writer.send(*(message if isinstance(message, tuple) else (message,)))
    os.close(write_fd)
    channel.run()
    return run, stages


def test_the_outputs_kept_for_later_follow_the_last_done_and_the_gate_hears_the_timings_are_over(tmp_path):
    """A benchmark's kept output is sent after the last task's Done (worker.Worker.pay): taken then,
    once per benchmark, and the gate is told "timed" at that Done, so the parent shares the GPU
    while the outputs cross (gpu_lock.Timed.share)."""
    run, stages = _timed_run([_kept(BENCH[0]), _kept(BENCH[1]), Finished(0)], tmp_path)
    assert run.violation is None and run.finished
    assert stages == ["cuda", "run", "timed"]
    assert set(run.outputs) == {(task.id, "kept") for task in BENCH} and not run.owed()


@pytest.mark.parametrize("sent", [
    [_kept(BENCH[0]), _kept(BENCH[0])],  # a second copy of one output, to replace the first
    [_kept(BENCH[0], "other")],  # an output no Done said would follow
    [reports.Output("add:case:0", "out", "float32", [4]), bytes(16)],  # for a task of no job
])  # fmt: skip
def test_an_output_after_its_tasks_done_that_no_report_owes_is_tampering(tmp_path, sent):
    sent = [tuple(sent)] if isinstance(sent[0], reports.Output) else sent
    run, _ = _timed_run(sent, tmp_path)
    assert run.violation is not None and run.violation.reason == "tampering"
    assert "out-of-order message" in run.violation.message


def test_a_subclass_kept_by_a_benchmark_owes_no_output(tmp_path):
    """Only a plain tensor is sent: a Done that reports a subclass (never read) makes no Output welcome."""
    run, _ = _timed_run([_kept(BENCH[0])], tmp_path, kinds=("subclass", "tensor"))
    assert run.violation is not None and run.violation.reason == "tampering"


@pytest.mark.parametrize("finished, reason", [(True, "tampering"), (False, "crash")])
def test_a_benchmark_whose_kept_output_never_came_is_not_judged_as_timed(tmp_path, finished, reason):
    """A child that says it finished without sending what it owed was stopped by code in it; one that
    died first lost the output: either way that benchmark earns nothing, with the reason."""
    from grader.running.tasks import _collect

    run, _ = _timed_run([_kept(BENCH[1])] + ([Finished(0)] if finished else []), tmp_path)
    run.returncode = None if finished else -11
    assert run.violation is None and run.owed() == {(BENCH[0].id, "kept")}
    results = _collect(run)
    unsent = results[BENCH[0].id].outcome
    assert isinstance(unsent, Failure) and unsent.reason == reason, unsent
    assert "output" in unsent.message and "timed call" in unsent.message
    assert isinstance(results[BENCH[1].id].outcome, reports.BenchReport)


def test_benchmarks_whose_kept_outputs_died_with_a_cuda_context_are_timed_again(monkeypatch, tmp_path):
    """A child whose CUDA context died (a fatal Failure, then its end on purpose) could not send the
    outputs it kept for later: those benchmarks are timed again in a fresh child, the fatal one is not."""
    from grader.messages.job import Job

    children = []

    def run_child(job, *args, **kwargs):
        children.append([task.id for task in job.tasks])
        run = child_run.ChildRun(started=[task.id for task in job.tasks], ready=True)
        if len(children) == 1:
            run.outcomes = {BENCH[0].id: _bench_done(BENCH[0]),
                            BENCH[1].id: Done(BENCH[1].id, Failure("crash", "an illegal memory access", fatal=True))}
            run.returncode = 3
        else:
            run.outcomes = {task.id: _bench_done(task) for task in job.tasks}
            run.outputs = {(task.id, "kept"): child_run.OutputFile("float32", [4], None) for task in job.tasks}
            run.finished, run.returncode = True, 0
        return run

    monkeypatch.setattr(isolation, "run_child", run_child)
    job = Job("assignment", "submission", "cuda", 0, "", [])
    results = tasks.run_tasks(job, BENCH, tmp_path, None, tasks.Budget(60.0), phase="timing")
    assert children == [[BENCH[0].id, BENCH[1].id], [BENCH[0].id]]
    assert isinstance(results[BENCH[0].id].outcome, reports.BenchReport)
    assert results[BENCH[1].id].outcome.reason == "crash"


def _in_file(tmp_path, outputs: list, size: int = 1 << 12) -> tuple[kept_file.KeptFile, list]:
    """A kept outputs' file as the parent sizes it, the `outputs` (float32 tensors) put in it by the
    child's end, and their Output frames (each for a benchmark of BENCH, in order)."""
    import torch

    kept = kept_file.KeptFile(tmp_path)
    kept.bound(size)
    kept.seed = 12345
    flats = [out.reshape(-1).view(torch.uint8) for out in outputs]
    offsets = kept_file.Putter(kept.fd).put_all(flats)
    frames_ = [reports.Output(task.id, "kept", "float32", list(out.shape), kept_at=offset,
                              fingerprint=kept_file.fingerprint(flat, kept.seed))
               for task, out, flat, offset in zip(BENCH, outputs, flats, offsets)]  # fmt: skip
    return kept, frames_


def test_kept_outputs_in_the_file_are_taken_in_order_and_load_as_the_child_put_them(tmp_path):
    import torch

    outputs = [torch.arange(6, dtype=torch.float32), torch.full((2, 3), 2.5)]
    kept, said = _in_file(tmp_path, outputs)
    run, _ = _timed_run([*said, Finished(0)], tmp_path, kept=kept)
    assert run.violation is None and not run.owed()
    for task, out in zip(BENCH, outputs):
        found = run.outputs[(task.id, "kept")]
        assert found.sent and found.path is None
        assert torch.equal(found.load("cpu").view(torch.float32).reshape(out.shape), out)
    kept_file.close_under(tmp_path)
    assert kept.fd == -1, "closed with its grading's folder"


def test_a_kept_output_rewritten_in_the_file_after_its_fingerprint_is_found_at_its_load(tmp_path):
    """Whatever rewrites the file after the harness fingerprinted the output on the GPU (code left
    running in the child, or anything that kept the file open): the load says so."""
    import torch

    kept, said = _in_file(tmp_path, [torch.ones(8), torch.ones(8)])
    run, _ = _timed_run([*said, Finished(0)], tmp_path, kept=kept)
    os.pwrite(kept.fd, b"\x00\x00\x80\x3f", 32 + 4)  # the second output's second element: 1.0 again, as bytes
    assert torch.equal(run.outputs[(BENCH[1].id, "kept")].load("cpu").view(torch.float32), torch.ones(8))
    os.pwrite(kept.fd, b"\x00\x00\x00\x40", 32 + 4)  # 2.0
    with pytest.raises(kept_file.Rewritten):
        run.outputs[(BENCH[1].id, "kept")].load("cpu")
    assert torch.equal(run.outputs[(BENCH[0].id, "kept")].load("cpu").view(torch.float32), torch.ones(8))


CASES = [Task(f"add:case:{i}", "add", "case", i, 0, max_output_bytes=1 << 20) for i in range(2)]


def _case_run(per_case, tmp_path, kept: kept_file.KeptFile) -> child_run.ChildRun:
    """A correctness child that runs both cases of CASES, sending `per_case(task)` (messages, or
    (Output, payload) pairs) between each one's Start and its Done, as Worker.run_case sends a
    case's outputs as they come; `kept`: the memory file it was given."""
    key = secrets.token_bytes(32)
    read_fd, write_fd = os.pipe()
    run = child_run.ChildRun()
    channel = child_run.Channel(read_fd, key, tmp_path, CASES, run, lambda: None, CAP, None, kept)
    writer = frames.FrameWriter(write_fd, key)
    done = reports.CaseReport(reports.Observation(reports.Returned("tensor", "Tensor", "first")), reports.Activity())
    sent = [Hello("ready")] + [m for task in CASES for m in (Start(task.id), *per_case(task), Done(task.id, done))]
    for message in sent + [Finished(0)]:
        writer.send(*(message if isinstance(message, tuple) else (message,)))
    os.close(write_fd)
    channel.run()
    return run


def _put(kept: kept_file.KeptFile, putter: kept_file.Putter, task: Task, name: str, out) -> reports.Output:
    import torch

    flat = out.reshape(-1).view(torch.uint8)
    [offset] = putter.put_all([flat])
    return reports.Output(task.id, name, "float32", list(out.shape), kept_at=offset,
                          fingerprint=kept_file.fingerprint(flat, kept.seed))  # fmt: skip


def test_a_cases_outputs_in_the_file_are_taken_while_it_runs_and_load_as_the_child_put_them(tmp_path):
    """On the GPU tier a correctness child puts each case's outputs (its first call's and its
    followup's) in the parent's memory file as they come (sending.Outputs.put), sized for two a
    case (spawned.bind_kept): the parent takes each while its case runs, in order, and loads it
    checked against its fingerprint."""
    import torch

    kept = kept_file.KeptFile(tmp_path)
    kept.bound(1 << 12)
    kept.seed = 777
    putter = kept_file.Putter(kept.fd)
    made = {(task.id, name): torch.full((3,), float(i)) for i, (task, name) in
            enumerate((task, name) for task in CASES for name in ("first", "followup"))}  # fmt: skip
    run = _case_run(lambda task: [_put(kept, putter, task, name, made[(task.id, name)]) for name in ("first", "followup")],
                    tmp_path, kept)  # fmt: skip
    assert run.violation is None and run.finished
    for named, out in made.items():
        assert torch.equal(run.outputs[named].load("cpu").view(torch.float32), out)
    os.pwrite(kept.fd, b"\x00\x00\x00\x40", 4)  # the first case's first output, rewritten once the child put it
    with pytest.raises(kept_file.Rewritten):
        run.outputs[(CASES[0].id, "first")].load("cpu")
    kept_file.close_under(tmp_path)


@pytest.mark.parametrize("forged", ["twice", "another task's", "out of order"])
def test_a_cases_output_in_the_file_that_is_not_its_own_next_one_is_tampering(tmp_path, forged):
    """The file's bytes are taken as a running case's outputs only once each, for that case, each
    right after the one before: anything else a child says of the file is tampering."""
    import torch

    kept = kept_file.KeptFile(tmp_path)
    kept.bound(1 << 12)
    kept.seed = 777
    putter = kept_file.Putter(kept.fd)

    def sent(task: Task) -> list:
        first = _put(kept, putter, task, "first", torch.ones(3))
        if forged == "twice":
            return [first, _put(kept, putter, task, "first", torch.ones(3))]
        if forged == "another task's":
            return [dataclasses.replace(first, task=CASES[1].id)] if task is CASES[0] else []
        return [dataclasses.replace(first, kept_at=first.kept_at + 4)]

    run = _case_run(sent, tmp_path, kept)
    assert run.violation is not None and run.violation.reason == "tampering"
    kept_file.close_under(tmp_path)


def _no_library(*_, **__):
    raise OSError("no such library")


def test_the_childs_mapping_begun_ahead_on_a_thread_is_the_one_it_puts_outputs_through(tmp_path, monkeypatch):
    """The child begins mapping the file before it starts CUDA (child/main.py), on a thread (libc's
    mmap, which leaves the interpreter free meanwhile); `ready` takes up that mapping, and what is
    put through it is the parent's to read. A file that cannot be mapped writable says so, and the
    child then sends its kept outputs on the pipe (main._registered)."""
    import torch

    from grader.child import main as child_main

    kept = kept_file.KeptFile(tmp_path)
    kept.bound(1 << 26)
    putter = kept_file.Putter(kept.fd)
    putter.map_ahead()
    begun = putter.mapping
    putter.ready()
    assert putter.mapping is begun and not begun.is_alive()
    assert putter.put_all([torch.arange(16, dtype=torch.uint8)]) == [0]
    assert os.pread(kept.fd, 16, 0) == bytes(range(16))
    read_only = os.open(f"/proc/self/fd/{kept.fd}", os.O_RDONLY)
    try:
        refused = SimpleNamespace(kept_fd=read_only)
        assert child_main._registered(child_main._kept_outputs_file(refused)) is None
        with pytest.raises(OSError, match="could not be mapped"):
            kept_file.Putter(read_only).ready()
        with monkeypatch.context() as patched:  # no libc to call: said as plainly, on the mapping's own thread
            patched.setattr(kept_file.ctypes, "CDLL", _no_library)
            with pytest.raises(OSError, match="could not be mapped"):
                kept_file.Putter(kept.fd).ready()
    finally:
        os.close(read_only)
        kept_file.close_under(tmp_path)


def _forged(said: list, **change) -> list:
    return [dataclasses.replace(said[0], **change), said[1]]


@pytest.mark.parametrize("forge", [
    lambda said: [said[1], said[0]],  # out of order: the second output's place named first
    lambda said: [said[0], dataclasses.replace(said[1], kept_at=0)],  # the first one's bytes again, for the second
    lambda said: _forged(said, kept_at=1 << 12),  # past the file's end
    lambda said: _forged(said, shape=[1 << 20]),  # more than the benchmark may send (its cap, 1 MiB)
    lambda said: _forged(said, sent=False),  # "not sent", yet said to lie in the file
    lambda said: [(said[0], bytes(32)), said[1]],  # a payload on the pipe too
])  # fmt: skip
def test_a_kept_output_said_to_lie_anywhere_but_next_in_the_file_is_tampering(tmp_path, forge):
    import torch

    kept, said = _in_file(tmp_path, [torch.ones(8), torch.ones(8)])
    run, _ = _timed_run(forge(said), tmp_path, kept=kept)
    assert run.violation is not None and run.violation.reason == "tampering", run.violation


def test_an_output_said_to_lie_in_a_file_the_child_was_not_given_is_tampering(tmp_path):
    import torch

    _, said = _in_file(tmp_path, [torch.ones(8), torch.ones(8)])
    run, _ = _timed_run(said, tmp_path)
    assert run.violation is not None and run.violation.reason == "tampering"
    assert "where none was owed" in run.violation.message


def test_a_gpu_childs_file_is_sized_and_sealed_before_its_job_with_the_pages_it_needs_made_ahead(tmp_path):
    """spawned.bind_kept: the file holds what the tasks send when right (half a task's cap for
    each output: one a benchmark keeps, two a correctness case sends) and can grow no further (a
    child could otherwise fill the machine's memory with it); its pages are made by the parent,
    not by the child (nor between two timed phases)."""
    from grader.running.spawned import bind_kept

    child = SimpleNamespace(kept=kept_file.KeptFile(tmp_path))
    tasks = [*BENCH, Task("add:case:0", "add", "case", 0, 0, max_output_bytes=1 << 20)]
    fd, seed = bind_kept(child, tasks)
    assert fd == child.kept.fd and seed == child.kept.seed and seed > 0
    assert child.kept.size == 2 << 20, "half the benchmarks' caps, and the case's whole cap (two outputs)"
    for attempt in (lambda: os.ftruncate(fd, 4 << 20), lambda: os.pwrite(fd, b"x", 2 << 20)):
        with pytest.raises(OSError):
            attempt()
    assert bind_kept(child, tasks) == (-1, 0), "sized once"
    shown = SimpleNamespace(kept=kept_file.KeptFile(tmp_path))
    assert bind_kept(shown, [Task("add:shown:0", "add", "shown", 0, 0, max_output_bytes=1 << 20)]) == (-1, 0)
    assert shown.kept is None, "no task sends an output there: no file"
    for _ in range(500):
        if os.fstat(fd).st_blocks * 512 >= 2 << 20:
            break
        threading.Event().wait(0.01)
    assert os.fstat(fd).st_blocks * 512 >= 2 << 20, "its pages, made ahead"
    kept_file.close_under(tmp_path)
    assert str(tmp_path) not in kept_file._open, "every file of the folder closed"


def test_a_fingerprint_changes_with_any_word_or_its_seed():
    import torch

    data = torch.randint(0, 256, (4096 + 3,), dtype=torch.uint8)
    first = kept_file.fingerprint(data, 7)
    assert first == kept_file.fingerprint(data.clone(), 7) and 0 <= first < 1 << 62
    assert first != kept_file.fingerprint(data, 8)
    for at in (0, 2048, 4098):
        changed = data.clone()
        changed[at] ^= 1
        assert kept_file.fingerprint(changed, 7) != first, at
    words = data[:4096]
    swapped = torch.cat([words[4:8], words[:4], words[8:]])
    assert kept_file.fingerprint(swapped, 7) != kept_file.fingerprint(words, 7), "the order of the words counts"


def _sent_in_pieces(tmp_path, pieces, length: int, threads=None) -> frames.Frame:
    """One Output whose payload the writer takes in `pieces` (adding up to `length`), read back
    by the parent's reader on another thread, as the pipe's two ends run in two processes."""
    key = secrets.token_bytes(32)
    read_fd, write_fd = os.pipe()
    got: list = []

    def read() -> None:
        try:
            got.append(frames.FrameReader(os.fdopen(read_fd, "rb"), key, tmp_path, length, length).read())
        except decoding.ProtocolError as error:
            got.append(error)

    reader = threading.Thread(target=read)
    reader.start()
    writer = frames.FrameWriter(write_fd, key)
    if threads is not None:
        writer._threads = threads
    try:
        writer.send(reports.Output("add:bench:0", "kept", "uint8", [length]), pieces, length)
    finally:
        os.close(write_fd)
        reader.join()
    return got[0]


def _reused_buffer(data: bytes, size: int):
    """`data` piece by piece through one buffer, rewritten for each piece, as Worker.pieces does
    with its pinned memory: only a writer that signs and writes a piece before it asks for the
    next sends `data` itself."""
    buffer = bytearray(size)
    for start in range(0, len(data), size):
        piece = data[start : start + size]
        buffer[: len(piece)] = piece
        yield memoryview(buffer)[: len(piece)]


def test_a_payload_sent_in_pieces_through_one_reused_buffer_arrives_whole_and_signed(tmp_path):
    data = secrets.token_bytes(3 * frames.PAYLOAD_CHUNK + 12345)
    frame = _sent_in_pieces(tmp_path, _reused_buffer(data, 1 << 20), len(data))
    assert frame.payload.read_bytes() == data


def test_where_no_thread_can_start_the_writer_signs_each_piece_itself(tmp_path):
    """The signing thread is a thread of the student's process: where a process limit that the
    student's own threads used up refuses it, the payload still goes, signed in turn."""
    def refused(*_):
        raise RuntimeError("can't start new thread")

    data = secrets.token_bytes(5 << 20)
    frame = _sent_in_pieces(tmp_path, _reused_buffer(data, 1 << 20), len(data),
                            threads=(refused, *frames.FrameWriter(-1, b"k")._threads[1:]))  # fmt: skip
    assert frame.payload.read_bytes() == data


@pytest.mark.parametrize("pieces, length", [([b"ab", b"cd"], 3), ([b"ab"], 3)])
def test_pieces_that_do_not_add_up_to_the_frame_are_the_harness_own_fault(tmp_path, pieces, length):
    """The length goes out in the frame's header before the first piece: pieces that say otherwise
    are a bug of the harness, raised in the child, never a frame the parent could take."""
    with pytest.raises(ValueError, match="payload (longer|shorter)"):
        _sent_in_pieces(tmp_path, pieces, length)


def _frame_bytes(key: bytes, data: bytes, pieces) -> bytes:
    """One Output frame with `data` as its payload, as the child writes it (taken in `pieces`)."""
    read_fd, write_fd = os.pipe()
    chunks: list = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(read_fd, 1 << 20), b"")))
    reader.start()
    frames.FrameWriter(write_fd, key).send(reports.Output("add:bench:0", "kept", "uint8", [len(data)]), pieces,
                                             len(data))  # fmt: skip
    os.close(write_fd)
    reader.join()
    os.close(read_fd)
    return b"".join(chunks)


def test_a_payload_is_signed_through_the_sha256_of_each_unit_in_order():
    """The frame's HMAC covers the sequence number, both lengths, the header and each
    PAYLOAD_CHUNK of the payload's SHA-256 in turn, wherever the writer's pieces begin and end
    (the units are hashed on threads of their own at both ends)."""
    import hashlib
    import hmac

    key, unit = secrets.token_bytes(32), frames.PAYLOAD_CHUNK
    data = secrets.token_bytes(2 * unit + 777)
    for pieces in ([data], [data[:1000], data[1000 : unit + 5], data[unit + 5 :]], _reused_buffer(data, 3 << 20)):
        frame = _frame_bytes(key, data, pieces)
        header_length, payload_length = frames.PREFIX.unpack(frame[: frames.PREFIX.size])
        header = frame[frames.PREFIX.size : frames.PREFIX.size + header_length]
        assert payload_length == len(data) and frame[-frames.MAC_BYTES - len(data) : -frames.MAC_BYTES] == data
        digests = b"".join(hashlib.sha256(data[at : at + unit]).digest() for at in range(0, len(data), unit))
        signed = (0).to_bytes(8, "big") + frame[: frames.PREFIX.size] + header + digests
        assert frame[-frames.MAC_BYTES :] == hmac.new(key, signed, "sha256").digest()


def _read_frame(tmp_path, key: bytes, frame: bytes):
    import io

    return frames.FrameReader(io.BytesIO(frame), key, tmp_path, len(frame), len(frame)).read()


def test_a_payload_changed_in_one_unit_or_with_two_units_swapped_is_tampering(tmp_path):
    key, unit = secrets.token_bytes(32), frames.PAYLOAD_CHUNK
    data = secrets.token_bytes(unit) + secrets.token_bytes(unit)
    frame = _frame_bytes(key, data, [data])
    start = len(frame) - frames.MAC_BYTES - len(data)
    flipped = bytearray(frame)
    flipped[start + unit + 12345] ^= 1
    swapped = frame[:start] + data[unit:] + data[:unit] + frame[-frames.MAC_BYTES :]
    for name, sent in (("as sent", frame), ("a bit flipped", bytes(flipped)), ("units swapped", swapped)):
        folder = tmp_path / name
        folder.mkdir()
        if sent is frame:
            assert _read_frame(folder, key, sent).payload.read_bytes() == data
            continue
        with pytest.raises(decoding.ProtocolError) as refused:
            _read_frame(folder, key, sent)
        assert refused.value.reason == "tampering", name


@pytest.mark.parametrize("rewritten", [False, True])
def test_a_timed_output_rewritten_in_the_kept_outputs_file_loses_its_speed_points_as_tampering(tmp_path, rewritten):
    """judge_bench: the right output of vector_add's benchmark, put in the file as the harness puts
    it, is judged on its speed; the same bytes with one element rewritten after the fingerprint
    are `tampering` (a timed call's output replaced after it was timed), not a wrong result."""
    import torch

    from grader.assignment import cases
    from grader.assignment.loading import load_assignments
    from grader.judging.verdicts import TaskResult, judge_bench

    assignment = load_assignments(["vector_add"])[0]
    part = assignment.parts[0]
    case, seed = part.benchmarks[0], 7
    out = cases.reference_output(assignment, part, cases.make_inputs(assignment, part, case, seed, "cpu"))
    out = out.to(cases.DTYPES[case.dtype]).contiguous()
    kept, said = _in_file(tmp_path, [out], size=out.numel() * out.element_size())
    if rewritten:
        os.pwrite(kept.fd, b"\x00\x00\x80\x3f", 4 * 12345)
    observed = reports.Observation(reports.Returned("tensor", "Tensor", "kept"))
    timings = reports.Timings([1.0] * 5, [0.0] * 5)
    report = reports.BenchReport(timings, timings, reports.Activity(), [reports.CallCheck(0, True)], kept=observed,
                                 kept_seed=seed)  # fmt: skip
    found = child_run.OutputFile(said[0].dtype, said[0].shape, None, kept, said[0].kept_at, said[0].fingerprint)
    verdict = judge_bench(assignment, part, case, TaskResult(report, outputs={"kept": found}), "cpu")
    if rewritten:
        assert verdict.reason == "tampering" and "replaced after it was timed" in verdict.message, verdict
    else:
        assert verdict.reason in ("ok", "too_slow"), verdict
    kept_file.close_under(tmp_path)
