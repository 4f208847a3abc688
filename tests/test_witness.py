"""The grader's witness, the parent's side (grader/witness): its lines read as untrusted text, the
windows between the harness's marks, and each verdict it gives, on records written here the way
witness.c writes them. The library itself runs on the GPU tier only (tests/test_witness_gpu.py)."""

from __future__ import annotations

import os
import threading
from dataclasses import replace

import pytest

from grader.messages.reports import Activity, BenchReport, Timings
from grader.assignment.loading import load_assignment
from grader.assignment.spec import REPO_ROOT
from grader.witness import judge
from grader.witness.stream import Reader, Witnessed, parse_line
from grader.witness.windows import CLOSE, MARK_BASE, windows

pytestmark = pytest.mark.student

STUDENT, BASELINE, IMPORT = 0x51, 0x52, 0x54
HARNESS_THREAD, OTHER_THREAD = 11, 22
ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >"
       "(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)")
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int)"


class Script:
    """Witness lines for a made-up child: marks, kernels and copies at host and GPU times (ns)."""

    def __init__(self):
        self.lines = ["I 100 100"]
        self.correlation = 0
        self.clock = 1_000_000

    def _api(self, thread: int = HARNESS_THREAD, domain: str = "D") -> int:
        self.correlation += 1
        self.clock += 1000
        self.lines.append(f"A {self.clock} {self.clock + 100} {thread} {self.correlation} {domain} 1")
        return self.correlation

    def mark(self, value: int, number: int) -> None:
        correlation = self._api()
        self.lines.append(f"S {self.clock + 5000} {self.clock + 6000} 7 {correlation} {value} {MARK_BASE + number}")

    def kernel(self, name: str, thread: int = HARNESS_THREAD, gpu: tuple[int, int] | None = None) -> None:
        correlation = self._api(thread, "R")
        start, end = gpu or (self.clock + 7000, self.clock + 9000)
        self.lines.append(f"K {start} {end} 7 {correlation} 4 128 16 0 0 0 {name}")

    def copy(self, kind: int, nbytes: int) -> None:
        correlation = self._api(domain="R")
        self.lines.append(f"C {self.clock + 7000} {self.clock + 8000} 7 {correlation} {kind} {nbytes}")

    def call(self, number: int, *kernels: str, role: int = STUDENT) -> None:
        self.mark(role, number)
        for name in kernels:
            self.kernel(name)
        self.mark(CLOSE, number)

    def flush(self) -> None:
        self.lines.append(f"F {self.lines.count('F') + 1}")

    def read(self) -> Witnessed:
        found, names = Witnessed(), {}
        for line in self.lines:
            parse_line(line, found, names)
        return found


@pytest.fixture(scope="module")
def add_part():
    return load_assignment(REPO_ROOT / "assignments" / "vector_add").parts[0]


def one_case(script: Script, claimed: list[int]):
    shares = judge.for_tasks(script.read(), ["add:case:0"])
    return shares["add:case:0"], Activity(windows=claimed)


def test_the_students_own_kernel_and_torchs_fills_pass(add_part):
    script = Script()
    script.call(1, FILL, "add_kernel")
    script.call(2, "add_kernel")
    script.flush()
    witness, activity = one_case(script, [1, 2])
    assert judge.case(add_part, witness, activity, {"add_kernel"}) is None


def test_a_library_or_torch_computing_in_a_call_is_forbidden(add_part):
    script = Script()
    script.call(1, ADD, "add_kernel")
    script.flush()
    witness, activity = one_case(script, [1])
    verdict = judge.case(add_part, witness, activity, {"add_kernel"})
    assert verdict.reason == "forbidden_op" and "CUDAFunctor_add" in verdict.message
    # A kernel of the student's named after torch's does not make torch's kernel theirs: torch's
    # kernels live in its namespaces, which no Triton kernel's name can hold.
    verdict = judge.case(add_part, witness, activity, {"add_kernel", "vectorized_elementwise_kernel"})
    assert verdict.reason == "forbidden_op"


def test_an_op_the_part_allows_may_launch_its_kernel():
    bias = next(p for p in load_assignment(REPO_ROOT / "assignments" / "gelu").parts if p.name == "bias_gelu_scale")
    script = Script()
    script.call(1, "bias_gelu_kernel", ADD)
    script.flush()
    witness, activity = one_case(script, [1])
    assert judge.case(bias, witness, activity, {"bias_gelu_kernel"}) is None


def test_work_sent_to_the_host_is_forbidden(add_part):
    script = Script()
    script.mark(STUDENT, 1)
    script.copy(2, 40_000)  # x to the host
    script.copy(1, 40_000)  # the sum back
    script.kernel("empty_kernel")
    script.mark(CLOSE, 1)
    script.flush()
    witness, activity = one_case(script, [1])
    verdict = judge.case(add_part, witness, activity, {"empty_kernel"})
    assert verdict.reason == "forbidden_op" and "40000 bytes" in verdict.message
    # A scalar read (`float(t)`) is no work done on the host.
    small = Script()
    small.mark(STUDENT, 1)
    small.copy(2, 8)
    small.kernel("add_kernel")
    small.mark(CLOSE, 1)
    small.flush()
    witness, activity = one_case(small, [1])
    assert judge.case(add_part, witness, activity, {"add_kernel"}) is None


def test_a_call_without_a_kernel_of_the_students_launched_nothing(add_part):
    script = Script()
    script.call(1, "add_kernel")
    script.call(2, FILL)  # the second call returned something it never computed
    script.flush()
    witness, activity = one_case(script, [1, 2])
    verdict = judge.case(add_part, witness, activity, {"add_kernel"})
    assert verdict.reason == "no_kernel_launched" and "call 2 of 2" in verdict.message


def test_windows_the_report_does_not_claim_are_tampering(add_part):
    script = Script()
    script.call(1, "add_kernel")
    script.call(2, ADD)
    script.flush()
    witness, _ = one_case(script, [1, 2])
    verdict = judge.case(add_part, witness, Activity(windows=[1]), {"add_kernel"})
    assert verdict.reason == "tampering" and "does not account for" in verdict.message
    verdict = judge.case(add_part, witness, Activity(windows=[1, 2, 3]), {"add_kernel"})
    assert verdict.reason == "tampering" and "never saw" in verdict.message


def test_broken_marks_and_foreign_lines_are_tampering(add_part):
    script = Script()
    script.mark(STUDENT, 1)
    script.kernel("add_kernel")
    script.mark(STUDENT, 2)  # opened inside another: forged, or a harness that was rewritten
    script.mark(CLOSE, 2)
    script.mark(CLOSE, 1)
    script.lines.append("K not a kernel line")
    script.flush()
    witness, activity = one_case(script, [1, 2])
    verdict = judge.case(add_part, witness, activity, {"add_kernel"})
    assert verdict.reason == "tampering" and "overlap" in verdict.message and "were not the witness's" in verdict.message


def test_gpu_work_a_thread_starts_outside_every_call_is_tampering(add_part):
    script = Script()
    script.call(1, "add_kernel")
    script.kernel(ADD, thread=OTHER_THREAD)  # after the call returned, from a thread of the student's
    script.kernel(FILL)  # the harness's own work between calls is its business
    script.flush()
    witness, activity = one_case(script, [1])
    verdict = judge.case(add_part, witness, activity, {"add_kernel"})
    assert verdict.reason == "tampering" and "outside every call" in verdict.message


def test_each_task_gets_the_windows_before_its_flush(add_part):
    script = Script()
    script.call(1, "add_kernel")
    script.flush()
    script.call(2, ADD)
    script.flush()
    shares = judge.for_tasks(script.read(), ["first", "second"])
    assert [w.number for w in shares["first"].windows] == [1] and [w.number for w in shares["second"].windows] == [2]
    assert judge.case(add_part, shares["first"], Activity(windows=[1]), {"add_kernel"}) is None
    assert judge.case(add_part, shares["second"], Activity(windows=[2]), {"add_kernel"}).reason == "forbidden_op"


def bench_script(student_ns: int, escaped: bool = False) -> Script:
    script = Script()
    number = 0
    for _ in range(3):
        for role, name, length in ((STUDENT, "add_kernel", student_ns), (BASELINE, ADD, 10_000)):
            number += 1
            script.mark(role, number)
            start = script.clock + 6000 + 1000
            gpu = (start - 50_000, start) if escaped and role == STUDENT else (start, start + length)
            script.kernel(name, gpu=gpu)
            script.clock = max(script.clock, start + length)
            script.mark(CLOSE, number)
    script.flush()
    return script


def bench_report(event_ms: float) -> BenchReport:
    return BenchReport(Timings([event_ms] * 3, [0.0] * 3, [1, 3, 5]), Timings([0.01] * 3, [0.0] * 3, [2, 4, 6]),
                       Activity(windows=[1, 3, 5]))  # fmt: skip


def test_timed_calls_pass_where_the_events_tell_the_witnesss_ratio(add_part):
    shares = judge.for_tasks(bench_script(20_000).read(), ["bench"])
    report = bench_report(0.02)
    assert judge.bench(add_part, shares["bench"], report, {"add_kernel"}) is None
    assert report.student.event_ms == [0.02] * 3, "the events still time"
    # The witness's clock may run at another rate than the events' (twice theirs on an H200): only
    # the ratio is compared, so the same calls on a clock twice as fast pass too.
    doubled = bench_report(0.01)
    doubled.baseline.event_ms = [0.005] * 3
    assert judge.bench(add_part, shares["bench"], doubled, {"add_kernel"}) is None


def test_events_that_make_the_student_faster_than_the_witness_saw_are_tampering(add_part):
    shares = judge.for_tasks(bench_script(200_000).read(), ["bench"])  # the witness: 0.2 ms against torch's 0.01
    verdict = judge.bench(add_part, shares["bench"], bench_report(0.01), {"add_kernel"})
    assert verdict.reason == "tampering" and "CUDA events put the student" in verdict.message


def test_timed_work_outside_its_window_is_tampering(add_part):
    shares = judge.for_tasks(bench_script(20_000, escaped=True).read(), ["bench"])
    verdict = judge.bench(add_part, shares["bench"], bench_report(0.02), {"add_kernel"})
    assert verdict.reason == "tampering" and "outside the stretch" in verdict.message


def test_samples_must_be_the_windows_of_their_role(add_part):
    shares = judge.for_tasks(bench_script(20_000).read(), ["bench"])
    report = bench_report(0.02)
    report.student = replace(report.student, windows=[2, 4, 6])  # the reference's calls passed off as the student's
    verdict = judge.bench(add_part, shares["bench"], report, {"add_kernel"})
    assert verdict.reason == "tampering"


def test_the_reader_keeps_what_parses_and_drains_the_rest():
    read_end, write_end = os.pipe()
    reader = Reader(read_end)
    reader.start()
    lines = ["I 5 5", "K 1 2 7 1 4 128 16 0 0 0 add_kernel", "K 1 2 x", "\x1b[31m", "X dropped 3 records", "F 1"]
    writer = threading.Thread(target=lambda: (os.write(write_end, ("\n".join(lines) + "\n").encode()), os.close(write_end)))
    writer.start()
    found = reader.result(timeout=30)
    writer.join()
    assert found.started and len(found.kernels) == 1 and found.kernels[0].name == "add_kernel"
    assert found.garbled == 2 and found.problems == ["dropped 3 records"] and found.flushes == [(1, 0, 0)]


def test_own_kernels_are_read_from_the_students_source(tmp_path):
    (tmp_path / "k.py").write_text(
        "import triton\nfrom triton import jit\n"
        "@triton.jit\ndef a(x):\n    pass\n"
        "@triton.autotune(configs=[], key=[])\n@triton.jit(do_not_specialize=['x'])\ndef b(x):\n    pass\n"
        "@jit\ndef c(x):\n    pass\n"
        "def d(x):\n    pass\n"
        "e = triton.jit(d)\n"
        "def not_a_kernel():\n    pass\n"
    )
    (tmp_path / "broken.py").write_text("def (:\n")
    assert judge.own_triton_kernels(tmp_path) == {"a", "b", "c", "d"}


def test_a_small_output_sent_round_the_host_is_forbidden_and_a_scalar_read_is_not(add_part):
    def one(copies):
        script = Script()
        script.mark(STUDENT, 1)
        for kind, nbytes in copies:
            script.copy(kind, nbytes)
        script.kernel("add_kernel")
        script.mark(CLOSE, 1)
        script.flush()
        witness, activity = one_case(script, [1])
        return judge.case(add_part, witness, activity, {"add_kernel"}, output_bytes=4)

    assert one([(2, 4), (2, 4), (1, 4)]).reason == "forbidden_op"  # x and y there, the sum back: one element
    assert one([(2, 4)]) is None  # `float(x[0])`
