"""Tampering and borrowed work: the harness's objects rebound, results cached or aliased, work
hidden from the timer, kernels that are not the student's.

The hostile submissions under submissions/ prove each check end to end (test_wrong_submissions.py,
test_hostile.py, and test_gpu.py on a GPU); these tests pin down the pieces: the snapshot that
names a rebound object, the parent's verdicts on typed reports, the kernel allow-list, and, on a
GPU, that a rebound timer changes no measurement while work on a side stream still shows.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import statistics
import time

import pytest
import torch

from conftest import SUBMISSIONS, grade, requires_gpu
from grader.assignment import cases
from grader.judging import integrity, steadiness
from grader.judging import verdicts as judging
from grader.child import timing
from grader.child.snapshot import HarnessSnapshot
from grader.running.child_run import OutputFile
from grader.judging.verdicts import TaskResult
from grader.messages.reports import Activity, CaseReport, Failure, Followup, KernelCount, KernelLoads, LaunchCount, Observation, Returned  # fmt: skip
from grader.assignment.loading import load_assignment
from grader.assignment.spec import REPO_ROOT, Performance, Tolerance

ASSIGNMENT = load_assignment(REPO_ROOT / "assignments" / "vector_add")
PART = ASSIGNMENT.parts[0]
CASE_INDEX = 1  # 97 float16 values: a CPU-tier case
CASE = PART.cases[CASE_INDEX]
SEED = 12345
OWN = Activity(launches=[LaunchCount("add_kernel", "vector_add.py", True, 2)])


def test_snapshot_names_each_rebound_object_and_forgets_restored_ones(monkeypatch):
    snapshot = HarnessSnapshot.take()
    assert snapshot.changed() == []
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 1e-3)
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    monkeypatch.setattr(judging, "tampering", lambda metrics: None)
    assert snapshot.changed() == ["grader.judging.verdicts.tampering", "time.perf_counter", "torch.cuda.Event.elapsed_time"]
    monkeypatch.undo()
    assert snapshot.changed() == []


def test_timing_holds_its_own_clocks(monkeypatch):
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    assert timing._perf_counter() > 0.0, "timing must keep the clock it found at import"


def _inputs(seed: int = SEED) -> dict:
    return cases.make_inputs(ASSIGNMENT, PART, CASE, seed, "cpu")


def _right(seed: int = SEED) -> torch.Tensor:
    return cases.reference_output(ASSIGNMENT, PART, _inputs(seed)).to(cases.DTYPES[CASE.dtype])


def _saved(tmp_path, outputs: dict, name: str, out: torch.Tensor, **seen) -> Observation:
    path = tmp_path / f"{name}.bin"
    path.write_bytes(out.contiguous().view(torch.uint8).numpy().tobytes())
    outputs[name] = OutputFile(str(out.dtype).removeprefix("torch."), list(out.shape), path)
    return Observation(Returned("tensor", "Tensor", name), **seen)


def _judge(report, outputs=None, activity=None) -> judging.Verdict:
    return judging.judge_case(ASSIGNMENT, PART, CASE, SEED, TaskResult(report, activity, outputs or {}), "cpu")


def _with_followup(tmp_path, second: torch.Tensor, **seen):
    outputs: dict = {}
    followup = Followup(SEED + 1, _saved(tmp_path, outputs, "second", second), **seen)
    first = _saved(tmp_path, outputs, "first", _right())
    return CaseReport(first, OWN, calls=2, followup=followup), outputs


def test_an_honest_second_call_passes(tmp_path):
    verdict = _judge(*_with_followup(tmp_path, _right(SEED + 1)))
    assert verdict.ok, verdict.message


def test_the_first_output_again_on_new_inputs_is_a_cached_result(tmp_path):
    verdict = _judge(*_with_followup(tmp_path, _right(), same_as_first=True, reuses_first_output=True))
    assert verdict.reason == "tampering" and "cached (by shape or by data_ptr())" in verdict.message


def test_a_right_output_in_the_first_output_s_memory_is_tampering(tmp_path):
    verdict = _judge(*_with_followup(tmp_path, _right(SEED + 1), reuses_first_output=True))
    assert verdict.reason == "tampering" and "memory of the first call's output" in verdict.message


def test_a_wrong_second_output_that_is_not_the_first_keeps_its_own_reason(tmp_path):
    verdict = _judge(*_with_followup(tmp_path, torch.zeros_like(_right())))
    assert verdict.reason == "wrong_result" and verdict.message.startswith("on a second call")


@pytest.mark.parametrize("rewritten", ["first", "second", None])
def test_a_case_output_rewritten_in_the_childs_memory_file_is_tampering(tmp_path, rewritten):
    """On the GPU tier a case's outputs cross in the parent's memory file (sending.Outputs.put), each
    with the fingerprint the harness took before its bytes left the GPU: bytes rewritten there
    afterwards (by student code left running in the child) are tampering, whichever output it was,
    and not a wrong result; untouched, the case is judged on its numbers."""
    from grader.messages import kept_file

    file = kept_file.KeptFile(tmp_path)
    file.bound(1 << 12)
    file.seed = 4242
    outputs, said = {}, {}
    for name, seed in (("first", SEED), ("second", SEED + 1)):
        flat = _right(seed).contiguous().view(torch.uint8).reshape(-1)
        [at] = kept_file.Putter(file.fd).put_all([flat]) if name == "first" else [flat.numel()]
        if name == "second":
            os.pwrite(file.fd, flat.numpy().tobytes(), at)
        outputs[name] = OutputFile(CASE.dtype, list(CASE.shape), None, file, at, kept_file.fingerprint(flat, file.seed))
        said[name] = Observation(Returned("tensor", "Tensor", name))
    if rewritten:
        os.pwrite(file.fd, b"\x00\x7c", outputs[rewritten].kept_at)  # float16 infinity, once the harness put it
    verdict = _judge(CaseReport(said["first"], OWN, calls=2, followup=Followup(SEED + 1, said["second"])), outputs)
    kept_file.close_under(tmp_path)
    assert (verdict.reason, "rewrote the file" in verdict.message) == (("tampering", True) if rewritten else ("ok", False))


def test_an_output_that_is_an_input_is_tampering_unless_the_input_changed(tmp_path):
    outputs: dict = {}
    aliased = _saved(tmp_path, outputs, "first", _inputs()["x"], aliases=["x"])
    assert _judge(CaseReport(aliased, OWN), outputs).reason == "tampering"
    changed = _saved(tmp_path, outputs, "first", _right(), aliases=["x"], modified_inputs=["x"])
    assert _judge(CaseReport(changed, OWN), outputs).reason == "input_modified"


def test_a_rebound_harness_object_outranks_every_other_verdict():
    patched = Activity(patched=["torch.cuda.Event.elapsed_time"], patched_at_import=True)
    verdict = _judge(Failure("crash", "RuntimeError"), activity=patched)
    assert verdict.reason == "tampering"
    assert "torch.cuda.Event.elapsed_time was replaced while your file was imported" in verdict.message


def test_what_the_guard_refused_is_tampering_even_when_the_call_then_crashed():
    refused = Activity(refused=["ctypes (ctypes.dlopen) (vector_add.py, line 12)"])
    verdict = _judge(Failure("crash", "PermissionError: the grader refuses ctypes"), activity=refused)
    assert verdict.reason == "tampering" and "ctypes.dlopen" in verdict.message and "line 12" in verdict.message


def test_a_lost_profiler_is_tampering(tmp_path):
    outputs: dict = {}
    report = CaseReport(_saved(tmp_path, outputs, "first", _right()), Activity(launches=OWN.launches, profiler_lost=True))
    assert _judge(report, outputs).reason == "tampering"


def test_a_tensor_subclass_as_the_result_is_tampering():
    verdict = _judge(CaseReport(Observation(Returned("subclass", "LazySum")), OWN))
    assert verdict.reason == "tampering" and "LazySum" in verdict.message


def test_an_output_too_large_to_send_is_judged_by_its_shape():
    outputs = {"first": OutputFile("float16", [10_000_000], None)}
    verdict = _judge(CaseReport(Observation(Returned("tensor", "Tensor", "first")), OWN), outputs)
    assert verdict.reason == "wrong_shape"


@pytest.mark.parametrize("demangled, base", [("void tiled<4>(float*)", "tiled"),
                                             ("scale_kernel(float const*, float*, long long)", "scale_kernel"),
                                             ("void ns::gemm<float, 128>(float const*, int)", "ns::gemm"),
                                             ("add_kernel", "add_kernel"),
                                             # cu++filt's spelling of SGEMM_CUDA's kernels on the GPU image
                                             ("void sgemm_shared_mem_block<(int)32>(int, int, float, const float *)",
                                              "sgemm_shared_mem_block"),
                                             ("void sgemm2DBlocktiling<(int)64, (int)64, (int)8>(int)", "sgemm2DBlocktiling")])  # fmt: skip
def test_kernel_names_compare_without_templates_and_parameters(demangled, base):
    assert integrity.kernel_base(demangled) == base


def test_a_library_kernel_is_foreign_and_a_name_borrowed_for_it_does_not_help():
    cublas = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x64x32_kernel"
    mine = Activity(launches=[LaunchCount("k", "mine.py", True, 1)], kernels=[KernelCount("k", 1)])
    assert integrity.foreign_kernels(mine, set()) == []
    with_cublas = Activity(launches=mine.launches, kernels=[KernelCount("k", 1), KernelCount(cublas, 1)])
    assert integrity.foreign_kernels(with_cublas, set()) == [cublas]
    # A Triton kernel of the student's named like the library's, launched once: the library's runs are extra.
    borrowed = Activity(launches=[LaunchCount(cublas, "mine.py", True, 1)], kernels=[KernelCount(cublas, 3)])
    assert integrity.foreign_kernels(borrowed, set()) == [cublas]
    by_an_op = Activity(kernels=[KernelCount("void at::native::fill_kernel<float>(...)", 1, "aten::zeros")])
    assert integrity.foreign_kernels(by_an_op, set()) == []
    assert integrity.foreign_kernels(Activity(kernels=[KernelCount("void tiled<4>(float*)", 2)]), {"tiled"}) == []


def test_runs_beyond_the_students_launches_are_counted_in_the_verdict():
    extra = Activity(launches=[LaunchCount("k", "mine.py", True, 2)],
                     kernels=[KernelCount("k", 5), KernelCount("k", 40, graph=True)])
    verdict = integrity.integrity(PART, extra, "cuda", 1)
    assert verdict.reason == "forbidden_op"
    assert "k (ran 5 times outside a CUDA graph and 40 times in one; your code launched it 2 times)" in verdict.message
    assert verdict.metrics == {"kernels": ["k"], "launched": {"k": 2}}


def _event(name: str, id: int, cuda: bool = False):
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    return SimpleNamespace(name=name, id=id, device_type=DeviceType.CUDA if cuda else DeviceType.CPU, cpu_parent=None,
                           annotation=False)


def test_a_second_record_of_one_launch_is_a_graph_replay():
    """CUPTI tags some replays of a captured launch with the capture's id, not the replay's
    (seen on an H100, torch 2.11): one launch runs its kernel once, so the rest are replays."""
    from grader.child.activity import _kernels

    events = [_event("cuLaunchKernelEx", 1), _event("k", 1, cuda=True),  # an eager launch
              _event("cuLaunchKernelEx", 2),  # captured into a graph: runs nothing then
              _event("cudaGraphLaunch", 3), _event("k", 3, cuda=True),  # a replay, tagged as such
              _event("k", 2, cuda=True), _event("k", 2, cuda=True), _event("k", 2, cuda=True)]  # replays, tagged as the capture
    launchers = {e.id: ("", e.name, "") for e in events if e.device_type.name == "CPU"}
    assert {(k.name, k.count, k.graph) for k in _kernels(events, launchers, "grader::harness")} == {("k", 2, False), ("k", 3, True)}


def _session(records):
    """A finished session of `records`, (name, id, start, end, kind[, linked]) on one host thread,
    kinds as the profiler names them ("cpu_op", "user_annotation", "cuda_runtime", "kernel"), read
    by activity.read_events as it reads the profiler's own (with the methods torch 2.11's records have)."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from grader.child import activity

    def record(name, key, start, end, kind, linked=0):
        device = DeviceType.CUDA if kind == "kernel" else DeviceType.CPU
        return SimpleNamespace(name=lambda: name, is_hidden_event=lambda: False, correlation_id=lambda: key,
                               start_thread_id=lambda: 7, end_thread_id=lambda: 7, start_ns=lambda: start,
                               end_ns=lambda: end, device_type=lambda: device,
                               is_user_annotation=lambda: kind == "user_annotation",
                               linked_correlation_id=lambda: linked, is_async=lambda: False)  # fmt: skip

    result = SimpleNamespace(events=lambda: [record(*r) for r in records])
    return SimpleNamespace(events=activity.read_events(result), harness="grader::harness:00", lost=False)


FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int> >"  # torch's, as CUPTI names it


def test_a_launch_belongs_to_the_op_the_profiler_linked_it_to_whatever_its_time_stamps():
    """The runtime's records are stamped on another clock: a launch inside a short op may fall
    just outside it. The profiler's link decides, as in torch's own reading."""
    from grader.child.activity import summarize

    records = [("aten::zero_", 1, 100, 110, "cpu_op"), ("aten::fill_", 2, 102, 109, "cpu_op"),
               ("cudaLaunchKernel", 50, 109, 112, "cuda_runtime", 2),  # ends after its op, by the stamps
               (FILL, 50, 200, 300, "kernel")]  # fmt: skip
    activity = summarize(_session(records))
    assert [(k.name, k.op) for k in activity.kernels] == [(FILL, "aten::zero_")]
    unlinked = summarize(_session([r[:5] for r in records]))  # no link: the time nesting alone
    assert [(k.name, k.op) for k in unlinked.kernels] == [(FILL, "")]


def test_a_kernel_is_tied_to_its_launch_not_to_a_host_record_that_shares_its_id():
    """A kernel carries the id CUPTI gave the runtime call that launched it; torch numbers its ops,
    ranges and marks (the "PythonDispatchMode" of a dispatch mode's handler) in a sequence of its
    own, and the two overlap. Seen on an H200 (torch 2.11, a class of 20 graded side by side): the
    autotuner's zero_ launched FillFunctor as launch 4020, and a PythonDispatchMode mark numbered
    4020 came later, inside an allocation: the kernel was tied to that mark, found inside an
    allocation, and an honest autotuned kernel was forbidden_op. Nor may a student's launch be
    taken for the harness's because one of the harness's ops shares its id."""
    from grader.child.activity import summarize

    records = [("aten::zero_", 1, 100, 110, "cpu_op"), ("aten::fill_", 2, 102, 109, "cpu_op"),
               ("cudaLaunchKernel", 40, 103, 105, "cuda_runtime", 2), (FILL, 40, 200, 300, "kernel"),
               ("aten::empty", 39, 400, 500, "cpu_op"), ("PythonDispatchMode", 40, 401, 499, "cpu_op"),
               ("grader::harness:00", 3, 600, 700, "user_annotation"), ("aten::empty", 41, 610, 620, "cpu_op"),
               ("cuLaunchKernelEx", 41, 800, 810, "cuda_driver"), ("gemm", 41, 900, 1000, "kernel")]  # fmt: skip
    activity = summarize(_session(records))
    assert {k.name: (k.op, k.unlaunched) for k in activity.kernels} == {FILL: ("aten::zero_", False),
                                                                         "gemm": ("", False)}  # fmt: skip
    assert integrity.foreign_kernels(activity, set()) == ["gemm"]


def test_a_range_named_like_an_op_is_no_op():
    """`record_function("aten::empty_like")` around torch.add: the add is the student's op, and a
    range of that name around an op of that name hides nothing either."""
    from grader.child.activity import summarize

    ops = summarize(_session([("aten::empty_like", 1, 100, 200, "user_annotation"), ("aten::add", 2, 110, 190, "cpu_op"),
                              ("aten::add", 3, 300, 400, "user_annotation"), ("aten::add", 4, 310, 390, "cpu_op")])).ops  # fmt: skip
    assert [(o.name, o.count) for o in ops] == [("aten::add", 2)]


def test_a_computing_op_inside_one_that_computes_nothing_is_the_students():
    """Python code run inside torch's empty_like or clone (a dispatch mode's or a subclass's
    handler) ran torch.add there: the add is judged. What torch's ops run inside their own work
    (clone's copy_, matmul's mm) stays theirs."""
    from grader.child.activity import summarize

    records = [("aten::empty_like", 1, 100, 200, "cpu_op"), ("aten::empty_strided", 2, 101, 102, "cpu_op"),
               ("aten::add", 3, 110, 190, "cpu_op"),
               ("aten::clone", 4, 300, 400, "cpu_op"), ("aten::copy_", 5, 310, 390, "cpu_op"),
               ("aten::matmul", 6, 500, 600, "cpu_op"), ("aten::mm", 7, 510, 590, "cpu_op")]  # fmt: skip
    ops = summarize(_session(records)).ops
    assert [(o.name, o.count) for o in ops] == [("aten::add", 1), ("aten::clone", 1), ("aten::empty_like", 1),
                                                ("aten::matmul", 1)]  # fmt: skip


def test_a_kernel_launched_inside_an_allocation_or_a_copy_answers_for_itself():
    """An allocation launches nothing, and a copy or a fill only torch's own kernels: a library's
    kernel launched inside one (from a handler run inside the op) is not that op's, and must be
    the student's own to pass. The fill that torch (or the grader's own poisoning) runs inside an
    allocation, and a copy's own kernel, stay the ops'."""
    from grader.child.activity import summarize

    copy = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>"
    records = [("aten::empty_like", 1, 100, 200, "cpu_op"),
               ("cuLaunchKernel", 60, 110, 120, "cuda_driver", 1), ("gemm", 60, 1000, 1100, "kernel"),
               ("aten::fill_", 2, 130, 190, "cpu_op"),
               ("cudaLaunchKernel", 61, 140, 150, "cuda_runtime", 2), (FILL, 61, 1200, 1300, "kernel"),
               ("aten::copy_", 3, 300, 400, "cpu_op"),
               ("cudaLaunchKernel", 62, 310, 320, "cuda_runtime", 3), (copy, 62, 1400, 1500, "kernel"),
               ("cuLaunchKernel", 63, 330, 340, "cuda_driver", 3), ("sm90_xmma_gemm_f32f32", 63, 1600, 1700, "kernel")]  # fmt: skip
    activity = summarize(_session(records))
    assert {k.name: k.op for k in activity.kernels} == {"gemm": "", FILL: "aten::empty_like", copy: "aten::copy_",
                                                        "sm90_xmma_gemm_f32f32": ""}  # fmt: skip
    assert integrity.foreign_kernels(activity, set()) == ["gemm", "sm90_xmma_gemm_f32f32"]


def test_a_kernel_whose_launch_was_not_recorded_is_marked_and_judged_with_a_second_run(tmp_path, monkeypatch):
    """The profiler lost one runtime record in 60,420 (H200, torch 2.11): the kernel of that launch
    is tied to no op. It is marked, the case runs once more in a fresh child, and only a kernel
    that is lost again is judged foreign, saying so."""
    from grader import grading
    from grader.child.activity import summarize

    records = [("aten::zero_", 1, 100, 200, "cpu_op"), ("FillFunctor<int>", 50, 300, 400, "kernel")]
    kernels = summarize(_session(records)).kernels
    assert [(k.name, k.op, k.unlaunched) for k in kernels] == [("FillFunctor<int>", "", True)]
    verdict = integrity.integrity(PART, Activity(kernels=kernels, launches=OWN.launches), "cuda", 1)
    assert verdict.reason == "forbidden_op" and "no launch of FillFunctor<int> was recorded" in verdict.message

    real, runs = grading.run_tasks, []

    def first_run_loses_a_launch(job, tasks, *args, **kwargs):
        results = real(job, tasks, *args, **kwargs)
        runs.append([t.id for t in tasks])
        if len(runs) == 1:
            for result in results.values():
                result.outcome.activity.kernels.append(kernels[0])
        return results

    monkeypatch.setattr(grading, "run_tasks", first_run_loses_a_launch)
    result = grade(REPO_ROOT / "solutions", ["vector_add"])
    assert len(runs) == 2 and runs[1] == runs[0], "every case that lost a launch ran again, once"
    assert all(t.passed for t in result.tests if t.graded), [t.reason for t in result.tests]


def test_on_a_gpu_a_kernel_must_have_run_not_only_been_launched():
    logged_only = Activity(launches=[LaunchCount("k", "mine.py", True, 1)])
    assert integrity.integrity(PART, logged_only, "cpu", 1) is None
    assert integrity.integrity(PART, logged_only, "cuda", 1).reason == "no_kernel_launched"


def test_a_part_that_requires_block_pointers_judges_every_kernels_loads():
    """`loads = "block_pointers"`: a kernel that loads a tile through a tensor of pointers is
    forbidden_op, named with its line; so is a call whose kernels load no tile through either a
    block pointer or a descriptor, or a kernel whose TTIR could not be read."""
    part = dataclasses.replace(PART, loads="block_pointers")
    blocks, descriptors = KernelLoads("k", "mine.py", block_pointers=2), KernelLoads("d", "mine.py", descriptors=2)
    mixed = KernelLoads("p", "mine.py", block_pointers=1, pointer_tensors=1, first_pointer_tensor="mine.py, line 9")
    assert integrity.required_loads(PART, Activity(loads=[mixed])) is None, "a part that asks nothing"
    assert integrity.required_loads(part, Activity(loads=[blocks, descriptors])) is None
    verdict = integrity.required_loads(part, Activity(loads=[blocks, mixed]))
    assert verdict.reason == "forbidden_op" and verdict.metrics == {"pointer_loads": {"p": 1}}
    assert f"{part.entry} must load its input tiles through tl.make_block_ptr" in verdict.message
    assert "p (mine.py) loads 1 tile through a tensor of pointers, the first at mine.py, line 9" in verdict.message
    nothing = integrity.required_loads(part, Activity(loads=[KernelLoads("s", "mine.py")]))
    assert nothing.reason == "forbidden_op" and "(s) load no tile through either" in nothing.message
    negative = KernelLoads("u", "mine.py", block_pointers=2, pointer_tensors=-1)
    for unread in (KernelLoads("u", "mine.py", read=False), negative):
        verdict = integrity.required_loads(part, Activity(loads=[blocks, unread]))
        assert verdict.reason == "forbidden_op" and "u (mine.py) was compiled without the TTIR" in verdict.message


def _measure(student, n: int = 1 << 24):
    def make(seed: int) -> dict:
        generator = torch.Generator(device="cuda").manual_seed(seed)
        return {name: torch.randn(n, device="cuda", generator=generator) for name in ("x", "y")}

    perf = Performance(repetitions=10, tiers=((0.8, 1.0),))
    harness = f"grader::harness:{secrets.token_hex(4)}"
    return timing.measure(lambda fn, **kw: fn(**kw), student, lambda x, y: x + y, make, perf,
                          Tolerance(1e-5, 1e-9, 1e-6), harness)  # fmt: skip


@requires_gpu
@pytest.mark.gpu
def test_rebound_events_and_clocks_change_no_measurement(monkeypatch):
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 1e-3)
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    samples = _measure(lambda x, y: x + y).student
    # 16M float32 sums move 201 MB: tens of microseconds at the least, never the patched 1 us.
    assert statistics.median(samples.event_ms) > 0.01
    assert statistics.median(samples.hidden_ms) > -0.05, "the wall clock was the patched one"


@requires_gpu
@pytest.mark.gpu
def test_every_timed_call_is_checked_and_partial_work_shows():
    calls = []

    def every_other_call_partial(x, y):
        calls.append(1)
        out = x + y
        if len(calls) % 2 == 0:
            out[len(out) // 8 :] = 0  # 1/8 of the work on every other call
        return out

    measured = _measure(every_other_call_partial)
    assert len(measured.checks) == 10 and sum(not c.agrees for c in measured.checks) >= 4


@requires_gpu
@pytest.mark.gpu
def test_work_on_a_side_stream_shows_as_hidden_time():
    side = torch.cuda.Stream()

    def on_a_side_stream(x, y):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(30):  # about 2 ms of work the timed stream never sees
                out = x + y
        return out

    measured = _measure(on_a_side_stream)
    medians = {"student_hidden_ms": statistics.median(measured.student.hidden_ms),
               "baseline_hidden_ms": statistics.median(measured.baseline.hidden_ms),
               "student_ms": statistics.median(measured.student.event_ms), "bytes": 3 * 4 * (1 << 24),
               "copy_gbps": timing.copy_bandwidth(torch.device("cuda")),
               "hidden_beyond_ms": steadiness.hidden_ms(measured.student.hidden_ms, measured.baseline.hidden_ms,
                                                        measured.student.event_ms)}  # fmt: skip
    assert judging.tampering(medians) is not None
    assert "hidden" in measured.retaken[0], "a round whose host time the events did not see was not taken again"
    assert medians["student_hidden_ms"] > 1.0, "the synchronized wall clock saw the side stream's work"


@requires_gpu
@pytest.mark.gpu
def test_a_kernel_benchmarked_from_a_cuda_graph_is_not_foreign():
    """An autotuner's do_bench_cudagraph replays thousands of captured launches of a short kernel:
    none of those runs may count against the student's launches."""
    import triton
    import triton.language as tl
    import triton.testing

    from grader.child.activity import Session, summarize

    @triton.jit
    def add(x, y, out, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out + offsets, tl.load(x + offsets, mask=mask) + tl.load(y + offsets, mask=mask), mask=mask)

    x = torch.randn(1024, device="cuda")
    y, out = torch.randn_like(x), torch.empty_like(x)
    call = lambda: add[(1,)](x, y, out, 1024, BLOCK=1024)  # noqa: E731
    call()
    with Session(kernels=True) as session:
        for _ in range(3):
            triton.testing.do_bench_cudagraph(call, rep=100)
        torch.cuda.synchronize()
    kernels = [k for k in summarize(session).kernels if k.name == "add"]
    launches = sum(1 for e in session.events if e.name == "cuLaunchKernelEx")
    eager = sum(k.count for k in kernels if not k.graph)
    assert sum(k.count for k in kernels if k.graph) > 10 * launches / 2, kernels  # the replays were seen
    assert eager <= launches, f"{eager} runs outside a graph from {launches} launches: {kernels}"


@requires_gpu
@pytest.mark.gpu
def test_an_illegal_address_is_a_crash_that_names_the_cuda_error():
    result = grade(SUBMISSIONS / "vector_add" / "illegal_address", ["vector_add"], device="cuda")
    failed = [t for t in result.tests if t.kind == "correctness" and not t.passed]
    assert failed and all(t.reason == "crash" for t in failed)
    assert "illegal memory access" in failed[0].output, failed[0].output
