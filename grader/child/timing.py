"""The one timing protocol (GPU only): student and torch reference, interleaved, with CUDA events.

Each step is on its own line below, with the reason for it:
- warm up both functions first, so compilation and autotuning stay out of the numbers;
- give every timed call FRESH inputs, drawn from a seed this process picks at random right then:
  no output can be cached across calls, none precomputed, and no student code knows in advance
  which inputs come or which call is kept;
- before every timed call, read a buffer twice the size of the L2 cache, so no call finds its
  inputs already on chip (a real workload reads them from HBM). Read, not write: a written
  buffer leaves the L2 full of dirty lines, and their write-back to HBM would be charged to
  the next timed call (up to an L2's worth of extra traffic, 23% more at 256 MB of traffic);
- interleave student and reference (A B B A ...), so clock and thermal drift hit both alike;
- time each call with CUDA events on the current stream, the stretch between them held behind a
  gate until the host has launched all of it (gate.py), so that neither launch overhead nor a
  host that lost its core is counted; where no witness records the process, a busy wait of the
  GPU in front of the stretch instead (the gate would let a side stream work unseen); and time
  it with a synchronized host clock too: work hidden on another stream shows as host time that
  the events did not see;
- bring the GPU up to speed before the first benchmark of a process (an idle GPU's clocks take
  time to rise), and take a round again, at most twice, where its samples cannot grade
  (steadiness.py): torch's own timings disturbed (something else used the GPU), the student's
  disturbed while torch's were not, or host time the events did not see;
- read a call's output only after a device-wide synchronize, so work left running on another
  stream is finished (or shows as hidden time) before anything is checked;
- check EVERY timed call's output against the reference's output on the same inputs (a loose,
  cheap check: a call that skipped part of the work fails it), and keep one call's output, chosen
  at random after the fact, for the parent's full check against its float64 reference;
- record the torch ops of every thread all along (the harness's own in ranges of its own), so
  a call that hands its work to torch while timed is seen; the profile is host-only: it costs the
  GPU nothing, and the launch overhead it adds is outside the events;
- use the clocks, events and synchronization captured below when the grader was imported,
  before any student code ran: rebinding `torch.cuda.Event.elapsed_time` or `time.perf_counter`
  changes no measurement (and the child reports it as tampering: snapshot.HarnessSnapshot);
- a fixed number of repetitions; report medians and spread; a result close to a tier edge is
  measured once more and the samples pooled.
"""

from __future__ import annotations

import math
import secrets
from contextlib import nullcontext
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch.autograd.profiler import record_function

from grader.child import marks
from grader.child.gate import Gate
from grader.messages.reports import CallCheck, Timings
from grader.judging import steadiness
from grader.assignment.spec import Performance, Tolerance

SPIN_CYCLES = 1_000_000  # about half a millisecond of GPU clock: longer than most launches (where no gate holds)
SETTLE_S = 0.25  # of busy GPU at most before a process's first benchmark: an idle GPU's clocks rise meanwhile
SETTLE_MIN_S = 0.05  # at least: a GPU already up to speed (the timed phase before just ended) settles this long
# Settled: the last SETTLED_BATCHES batches of the settle's work (about 30 ms on an H200) were, on
# average, no more than SETTLED_SPREAD faster than the batches before them.
SETTLED_BATCHES, SETTLED_SPREAD = 16, 0.01
ROUND_ATTEMPTS = 3  # a round whose samples cannot grade (steadiness.py) is taken again, twice at most
CHECK_SLACK = 4.0  # the timed-call check compares two roundings of the answer: each may use the tolerance

# The harness's own references, taken at import, before any student code runs.
_Event = torch.cuda.Event
_record = torch.cuda.Event.record
_elapsed_ms = torch.cuda.Event.elapsed_time
_event_synchronize = torch.cuda.Event.synchronize
_synchronize = torch.cuda.synchronize
_current_stream = torch.cuda.current_stream
_spin = torch.cuda._sleep
_perf_counter = time.perf_counter
now = _perf_counter  # the harness's clock, for its own account of where a benchmark's time went


@dataclass
class Measured:
    student: Timings = field(default_factory=Timings)
    baseline: Timings = field(default_factory=Timings)
    checks: list[CallCheck] = field(default_factory=list)
    kept: object = None  # one timed output of the student's, kept by reservoir sampling
    kept_seed: int = 0
    seen: int = 0  # timed student calls so far (the reservoir's count)
    remeasured: bool = False
    disturbed_retakes: int = 0  # rounds taken again: torch's own timings in them were disturbed
    retaken: list[str] = field(default_factory=list)  # why each round was taken again (steadiness.retake_reasons)
    gate: Gate | None = None  # the stretch's gate, where one holds it (None: a busy wait in front of it)
    gated: bool = False  # the kept samples were timed behind the gate
    warmup_s: list[float] = field(default_factory=list)  # the warm-up's host seconds: the student's calls, torch's
    # The repetitions' host seconds by what they did (messages/reports.py HARNESS_PARTS): a benchmark
    # of tiny kernels spent about 10 ms a repetition beyond its timed calls' GPU time (2026-12-03).
    harness_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(("inputs", "calls", "checks"), 0.0))


def l2_flush_buffer(device: torch.device) -> torch.Tensor:
    l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20)
    return torch.empty(2 * l2_bytes // 4 + 1, dtype=torch.int32, device=device)


def copy_bandwidth(device: torch.device, nbytes: int = 1 << 30, repeats: int = 10) -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(repeats):
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        _record(start)
        dst.copy_(src)
        _record(end)
        _event_synchronize(end)
        times.append(_elapsed_ms(start, end))
    return 2 * nbytes / (statistics.median(times) * 1e-3) / 1e9


def _timed_call(call: Callable, fn: Callable, inputs: dict, flush: torch.Tensor, harness: str,
                gate: Gate | None = None):  # fmt: skip
    """One timed call: its events' time, the host time they did not see, its output, its window.
    `gate.gave_up()` says afterwards whether the call waited for the GPU while the gate held it."""
    _synchronize()  # a clean start: nothing of the previous call is still running
    # The events go on the stream that is current now, named explicitly: a call that switches
    # the current stream cannot move its own end event.
    stream = _current_stream()
    begin, start, end = (_Event(enable_timing=True) for _ in range(3))
    wall_start = _perf_counter()
    _record(begin, stream)
    with record_function(harness):
        flush.sum()  # evict the L2 by reading: the next call reads its inputs from HBM
        if gate is not None:
            gate.hold()  # the stretch waits until the host has launched all of it (gate.py)
        else:
            # Keep the GPU busy while the host launches the call, so the events time the kernels and
            # not the host's launch overhead (tens of microseconds for a Python-side Triton launch).
            _spin(SPIN_CYCLES)
    _record(start, stream)
    try:
        out = call(fn, **inputs)  # marked for the witness, where one records the process (marks.py)
        _record(end, stream)
    finally:
        if gate is not None:
            gate.open()  # after the end event's launch; and a call that raised leaves no stream held
    window = marks.current().last
    _synchronize()  # device-wide: everything the call launched, on any stream, is done
    wall_ms = (_perf_counter() - wall_start) * 1e3
    # Host time the timed stream cannot account for: work hidden on another stream shows here. The
    # wait at the gate is in both clocks (the GPU waits for the host's launches), so it cancels.
    return _elapsed_ms(start, end), wall_ms - _elapsed_ms(begin, end), out, window


def _comparable(value: object) -> torch.Tensor | None:
    if type(value) is torch.Tensor:
        return value
    if isinstance(value, (tuple, list)) and value and all(type(v) is torch.Tensor for v in value):
        return torch.stack([v.to(value[0].dtype) for v in value]) if len({v.shape for v in value}) == 1 else None
    return None


def agrees(out: object, expected: object, tolerance: Tolerance) -> tuple[bool, str]:
    """A cheap check of one timed output against the reference's output on the same inputs:
    norm-wise, since both are roundings of the answer (an unfused torch chain in bfloat16 rounds
    three times, and differs from a fused kernel on single elements near zero), with room for
    both errors; a call that skipped 1% of its work misses by far more."""
    mine, theirs = _comparable(out), _comparable(expected)
    if mine is None or theirs is None or mine.shape != theirs.shape:
        return False, "the output is not a tensor of the reference's shape"
    found = _norms(mine, theirs)
    if found is None:  # a NaN or an Inf on either side, or a sum past float32's range
        found = _finite_norms(mine, theirs)
        if found is None:
            return False, "NaN or Inf where torch's output on the same inputs is finite"
    difference, scale = found
    difference /= max(scale, 1e-30)
    allowed = CHECK_SLACK * tolerance.norm
    if difference > allowed:
        return False, f"relative difference {difference:.3g} from torch's output on the same inputs (at most {allowed:.3g})"
    return True, ""


def _norms(mine: torch.Tensor, theirs: torch.Tensor) -> tuple[float, float] | None:
    """The two norms in three passes over the outputs, summed in float32 (half types are read as
    such): the check follows every timed call, inside the phase that holds the GPU alone. Written
    with float64 copies and masks, it read an output's bytes about fourteen times over: 4.9 s of
    the 20.8 s of a warm grading's timed phases, on an H200 (2026-12-03). A float32 sum of squares
    is off by far less than CHECK_SLACK's room; None where a NaN, an Inf or an overflow leaves
    either norm not finite (then `_finite_norms` decides, exactly)."""
    if not (mine.is_floating_point() and theirs.is_floating_point()):
        return None
    wide = torch.float64 in (mine.dtype, theirs.dtype)
    sum_dtype = torch.float64 if wide else torch.float32
    norms = torch.stack([torch.linalg.vector_norm(mine - theirs, dtype=sum_dtype),
                         torch.linalg.vector_norm(theirs, dtype=sum_dtype)]).tolist()  # fmt: skip
    return (norms[0], norms[1]) if all(math.isfinite(n) for n in norms) else None


def _finite_norms(mine: torch.Tensor, theirs: torch.Tensor) -> tuple[float, float] | None:
    """Where torch's output is finite the student's must be; elsewhere nothing is compared. In
    float64, masks and not copies taken through a mask, and one wait for the GPU at the end.
    None where the student's output is not finite where torch's is."""
    unmatched = torch.isfinite(theirs).logical_not_()
    lost = torch.isfinite(mine).logical_or_(unmatched).logical_not_().any()
    scale = theirs.double().masked_fill_(unmatched, 0.0)
    difference = torch.linalg.vector_norm(mine.double().sub_(scale).masked_fill_(unmatched, 0.0))
    lost, difference, scale = torch.stack([lost.double(), difference, torch.linalg.vector_norm(scale)]).tolist()
    return None if lost else (difference, scale)


def _round(m: Measured, call, student, baseline, make_inputs, perf, tolerance, flush, harness, reps) -> None:
    spent = m.harness_s
    for rep in range(reps):
        seed = secrets.randbits(62)
        began = _perf_counter()
        with record_function(harness):
            inputs = make_inputs(seed)
            _synchronize()  # the inputs' own GPU time is theirs, not the first call's (which waits for it)
        spent["inputs"] += _perf_counter() - began
        began = _perf_counter()
        outs = {}
        order = (("student", student), ("baseline", baseline))
        for who, fn in order if rep % 2 == 0 else reversed(order):
            with record_function(harness) if who == "baseline" else nullcontext():
                event_ms, hidden_ms, outs[who], window = _timed_call(call if who == "student" else _plain, fn, inputs,
                                                                     flush, harness, m.gate)  # fmt: skip
            if m.gate is not None and m.gate.gave_up():
                m.gate = None  # the call waited for the GPU: the gate cannot time it (gate.py)
            timings = getattr(m, who)
            timings.event_ms.append(event_ms)
            timings.hidden_ms.append(hidden_ms)
            timings.windows.append(window)
        spent["calls"] += _perf_counter() - began
        began = _perf_counter()
        with record_function(harness):
            ok, detail = agrees(outs["student"], outs["baseline"], tolerance)
            m.checks.append(CallCheck(len(m.checks), ok, detail))
            m.seen += 1
            if secrets.randbelow(m.seen) == 0:  # reservoir sampling: each call equally likely, decided after it ran
                m.kept, m.kept_seed = outs["student"], seed
        del outs, inputs
        spent["checks"] += _perf_counter() - began


def _steady_round(m: Measured, call, student, baseline, make_inputs, perf, tolerance, flush, harness) -> None:
    """One round of `perf.repetitions`, taken again (up to ROUND_ATTEMPTS in all) while its samples
    cannot grade (steadiness.retake_reasons), or a gate gave up during it (the rest is timed
    without one, and a round is timed one way throughout)."""
    for attempt in range(ROUND_ATTEMPTS):
        kept, gated = len(m.baseline.event_ms), m.gate is not None
        _round(m, call, student, baseline, make_inputs, perf, tolerance, flush, harness, perf.repetitions)
        reasons = steadiness.retake_reasons(m.student.event_ms[kept:], m.baseline.event_ms[kept:],
                                            m.student.hidden_ms[kept:], m.baseline.hidden_ms[kept:])  # fmt: skip
        reasons += ["gate"] if gated and m.gate is None else []
        m.gated = m.gate is not None
        if not reasons or attempt == ROUND_ATTEMPTS - 1:
            return
        for timings in (m.student, m.baseline):
            del timings.event_ms[kept:], timings.hidden_ms[kept:], timings.windows[kept:]
        m.disturbed_retakes += "reference" in reasons
        m.retaken.append("+".join(reasons))
        with record_function(harness):
            settle(flush)


def settle(flush: torch.Tensor) -> float:
    """Keep the GPU busy (reading the flush buffer, waiting on the GPU's clock) until it is up to
    speed, so a GPU that idled has raised its clocks before anything is timed: for SETTLE_MIN_S at
    least, then until its batches of that work, each timed with events, stop getting faster
    (`_steady`); SETTLE_S at most. A batch's wait is counted in the GPU's clock cycles, so it takes
    longer while the clocks are low. An H200 left idle for 0.05 to 3 s ran its first batch 6-10%
    slower than at speed and the next ones within about 2% (tools/clock_ramp.py, 2026-12-04): it
    settled in 61-66 ms, where a fixed 0.25 s had taken 1.5 s of a grade's six timed phases. Gives
    its seconds."""
    began = _perf_counter()
    batches: list[float] = []
    while True:
        batches.append(settle_batch(flush))
        spent = _perf_counter() - began
        if spent >= SETTLE_S or (spent >= SETTLE_MIN_S and _steady(batches)):
            _synchronize()
            return spent


def _steady(batches: list[float]) -> bool:
    """The last SETTLED_BATCHES batches were, on average, at most SETTLED_SPREAD faster than those
    before them: a window, not the last few, so a slow rise of the clocks is not taken for a plateau."""
    if len(batches) < 2 * SETTLED_BATCHES:
        return False
    last = sum(batches[-SETTLED_BATCHES:])
    before = sum(batches[-2 * SETTLED_BATCHES:-SETTLED_BATCHES])
    return last >= (1 - SETTLED_SPREAD) * before


def settle_batch(flush: torch.Tensor) -> float:
    """One batch of the settle's work, timed with events: its milliseconds (1.87 on an H200 at speed)."""
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    _record(start)
    for _ in range(8):
        flush.sum()
        _spin(SPIN_CYCLES // 10)
    _record(end)
    _event_synchronize(end)
    return _elapsed_ms(start, end)


# This process's one gate (about 0.4 s on an H200, its launcher's gcc mostly): made in the timing
# child's start (`gate_ahead`), after the guard's install and before the exclusive hold; else at the
# first benchmark. Never before the guard's install: Triton loads every launcher under one module
# name, and the guard would take the gate's for the grader's and refuse each student kernel's
# launcher as making it again (measured on an H200: every Triton benchmark crashed).
_gates: list[Gate] = []


def _gate() -> Gate:
    if not _gates:
        _gates.append(Gate())
    return _gates[0]


def gate_ahead() -> None:
    """The gate made now, while the GPU is shared, where the witness records this process (the only
    place a gate is used); a gate that cannot be made now is tried again at the first benchmark."""
    if marks.current().recording:
        try:
            _gate()
        except Exception:  # noqa: BLE001 (the first benchmark makes it, and says why it cannot)
            pass


def _plain(fn: Callable, **inputs):
    """torch's reference, timed beside the student's call: marked too, so the witness times both."""
    with marks.current().window("baseline"):
        return fn(**inputs)


def _shown(fn: Callable, **inputs):
    """A shown baseline (torch.compile of the chain): marked as such, never judged as the student's."""
    with marks.current().window("shown"):
        return fn(**inputs)


def measure(call: Callable, student: Callable, baseline: Callable, make_inputs: Callable[[int], dict],
            perf: Performance, tolerance: Tolerance, harness: str) -> Measured:  # fmt: skip
    """Raw samples of both functions, a check of every timed output, and one output kept.
    `call(fn, **inputs)` is how the harness hands control to student code (the guard's boundary);
    `harness` names the profiler ranges that hold the harness's own torch work."""
    with record_function(harness):
        warm = make_inputs(secrets.randbits(62))
        device = next(v for v in warm.values() if isinstance(v, torch.Tensor)).device
    warmup = [0.0, 0.0]  # seconds, shown: where a timed phase's first benchmark spends its time
    for _ in range(2):  # warm-up: compile, autotune, allocate
        began = _perf_counter()
        call(student, **warm)
        _synchronize()
        warmup[0] += _perf_counter() - began
        began = _perf_counter()
        with record_function(harness):
            # Marked as the timed calls are: torch's autograd runs a backward's kernels on a thread of
            # its own, which the witness would otherwise find working outside every call.
            _plain(baseline, **warm)
        _synchronize()
        warmup[1] += _perf_counter() - began
    with record_function(harness):
        del warm
        flush = l2_flush_buffer(device)
        m = Measured(gate=_gate() if marks.current().recording else None, warmup_s=warmup)
    _steady_round(m, call, student, baseline, make_inputs, perf, tolerance, flush, harness)
    ratio = statistics.median(m.baseline.event_ms) / statistics.median(m.student.event_ms)
    if perf.is_borderline(ratio):
        m.remeasured = True
        _steady_round(m, call, student, baseline, make_inputs, perf, tolerance, flush, harness)
    return m


def shown_baseline(shown: Callable, compiled: bool, baseline: Callable, make_inputs: Callable[[int], dict],
                   perf: Performance, tolerance: Tolerance, harness: str) -> Timings:  # fmt: skip
    """The times of a baseline the report shows but does not grade (torch.compile of the chain the
    student fused), by the same protocol, interleaved with the graded baseline, after the student's
    own timing. Compiling happens in the warm-up calls, outside the numbers; each benchmark compiles
    afresh (no recompile limit, no guards left from another shape). A quarter of the repetitions and
    no second round: the figure is shown, never graded. It is measured once per machine, in a child
    that runs no student code (running/shown_figures.py)."""
    if compiled:
        import torch._dynamo

        torch._dynamo.reset()
        shown = torch.compile(shown, dynamic=False)
    brief = Performance(repetitions=max(5, perf.repetitions // 4), tiers=())
    return measure(_shown, shown, baseline, make_inputs, brief, tolerance, harness).student
