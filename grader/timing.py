"""The one timing protocol (GPU only): student and torch reference, interleaved, with CUDA events.

Each step is on its own line below, with the reason for it:
- warm up both functions first, so compilation and autotuning stay out of the numbers;
- before every timed call, read a buffer twice the size of the L2 cache, so no call finds its
  inputs already on chip (a real workload reads them from HBM). Read, not write: a written
  buffer leaves the L2 full of dirty lines, and their write-back to HBM would be charged to
  the next timed call (up to an L2's worth of extra traffic, 23% more at 256 MB of traffic);
- rotate through a pool of input sets, for the same reason;
- interleave student and reference (A B B A ...), so clock and thermal drift hit both alike;
- time each call with CUDA events on the current stream, with the GPU kept busy while the host
  launches it (so launch overhead is not counted), and also with a synchronized host clock:
  work hidden on another stream shows as host time that the events did not see;
- read a call's output only after a device-wide synchronize, so work left running on another
  stream is finished (or shows as hidden time) before anything is checked;
- use the clocks, events and synchronization captured below when the grader was imported,
  before any student code ran: rebinding `torch.cuda.Event.elapsed_time` or `time.perf_counter`
  changes no measurement (and the child reports it as tampering: monitor.HarnessSnapshot);
- a fixed number of repetitions; report medians and spread; a result close to a tier edge is
  measured once more and the samples pooled.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

from grader.spec import Performance

SPIN_CYCLES = 1_000_000  # about half a millisecond of GPU clock: longer than any launch overhead

# The harness's own references, taken at import, before any student code runs.
_Event = torch.cuda.Event
_record = torch.cuda.Event.record
_elapsed_ms = torch.cuda.Event.elapsed_time
_event_synchronize = torch.cuda.Event.synchronize
_synchronize = torch.cuda.synchronize
_current_stream = torch.cuda.current_stream
_spin = torch.cuda._sleep
_perf_counter = time.perf_counter


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


def _timed_call(fn: Callable, inputs: dict, flush: torch.Tensor) -> tuple[float, float, object]:
    _synchronize()  # a clean start: nothing of the previous call is still running
    # The events go on the stream that is current now, named explicitly: a call that switches
    # the current stream cannot move its own end event.
    stream = _current_stream()
    begin, start, end = (_Event(enable_timing=True) for _ in range(3))
    wall_start = _perf_counter()
    _record(begin, stream)
    flush.sum()  # evict the L2 by reading: the next call reads its inputs from HBM
    # Keep the GPU busy while the host launches the call, so the events time the kernels and
    # not the host's launch overhead (tens of microseconds for a Python-side Triton launch).
    _spin(SPIN_CYCLES)
    _record(start, stream)
    out = fn(**inputs)
    _record(end, stream)
    _synchronize()  # device-wide: everything the call launched, on any stream, is done
    wall_ms = (_perf_counter() - wall_start) * 1e3
    # Host time the timed stream cannot account for: work hidden on another stream shows here.
    hidden_ms = wall_ms - _elapsed_ms(begin, end)
    return _elapsed_ms(start, end), hidden_ms, out


def _rounds(student, baseline, pool, repetitions, flush, samples, keep_at) -> object:
    kept = None
    for rep in range(repetitions):
        inputs = pool[rep % len(pool)]
        order = (("student", student), ("baseline", baseline))
        for who, fn in order if rep % 2 == 0 else reversed(order):
            event_ms, hidden_ms, out = _timed_call(fn, inputs, flush)
            samples[who]["event_ms"].append(event_ms)
            samples[who]["hidden_ms"].append(hidden_ms)
            if who == "student" and rep == keep_at:
                kept = out
    return kept


def summary(times: list[float]) -> dict:
    ordered = sorted(times)
    return {"median": statistics.median(ordered), "min": ordered[0], "max": ordered[-1],
            "p10": ordered[len(ordered) // 10], "p90": ordered[(9 * len(ordered)) // 10]}


def measure(student: Callable, baseline: Callable, pool: list[dict], perf: Performance, keep_at: int) -> dict:
    """Raw samples of both functions, and the student's output from timed repetition `keep_at`."""
    device = next(iter(pool[0].values())).device
    for fn in (student, baseline):  # warm-up: compile, autotune, allocate
        for inputs in pool[:2]:
            fn(**inputs)
    _synchronize()
    flush = l2_flush_buffer(device)
    samples = {who: {"event_ms": [], "hidden_ms": []} for who in ("student", "baseline")}
    kept = _rounds(student, baseline, pool, perf.repetitions, flush, samples, keep_at)
    ratio = statistics.median(samples["baseline"]["event_ms"]) / statistics.median(samples["student"]["event_ms"])
    remeasured = perf.is_borderline(ratio)
    if remeasured:
        _rounds(student, baseline, pool, perf.repetitions, flush, samples, -1)
    return {"samples": samples, "remeasured": remeasured, "kept": kept, "keep_pool_index": keep_at % len(pool)}
