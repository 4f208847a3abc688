"""What ran while student code had control: torch's profiler, on every thread, and on the GPU every kernel.

The profiler is process-wide where the dispatch modes of torch are per thread: with
`profile_all_threads` it records the torch ops of every thread (a thread the student starts
included, and ops run with torch's Python dispatch disabled), and on the GPU (CUPTI) every kernel,
from any thread, stream or library, each linked to the host call that launched it. A summary
keeps, per op, only the student's own calls (the outermost torch op of each call chain; what
torch runs inside it is torch's business, except under a view or a conversion, which are judged by
the ops they ran: ops.delegates), and per kernel the op that launched it, if any.

What runs inside an op is torch's only where torch put it there. Python code can run inside any
op (a dispatch mode's or a tensor subclass's handler, a finalizer the collector runs there), so
a computing op nested in one that computes nothing (an allocation, a view, a copy, a fill) is
the student's, and so is a kernel launched inside an op that launches none, or a kernel not of
torch's inside a fill or a copy (_covers, _launched_by);
a range (`record_function`) bears any name its opener gives it, and is never taken for an op.
Each launch belongs to the op the profiler linked it to (its external correlation id), not only
to the op whose time stamps hold it: the runtime's records are stamped on another clock.

Cost, measured on an H100 (torch 2.11, 2026-11-23): CUPTI's kernel records add about 5 us of GPU
time to every kernel (a 3.3 us add took 8.6 us), which would distort the timing of small kernels;
so kernels are recorded during correctness calls only, and the timed calls run under a host-only
profile (torch ops of every thread, no GPU cost) whose state looks the same from inside a call.

The session's records are read straight from the profiler's result (`read_events`), nested by
time on each thread as torch's own `function_events` nests them: that reading builds a Python
object of forty fields per record and took about 0.7 s per benchmark on an H100 machine (some
8,000 records, mostly the harness's own), inside the timing phase; this one keeps the six fields
judged here.
"""

from __future__ import annotations

from collections import Counter
import gc
import re
import secrets

import torch
from torch.autograd import DeviceType
from torch.autograd import profiler as autograd_profiler
from torch.autograd.profiler_util import _filter_name, _rewrite_name

from grader.judging import ops
from grader.messages.reports import Activity, KernelCount, OpCount

NOT_KERNELS = ("Memcpy", "Memset", "cudaMemcpy", "cudaMemset")
# A call of CUDA's runtime or driver API as the profiler names it (cudaLaunchKernel, cuLaunchKernelEx):
# its correlation id is CUPTI's, which its kernels carry. Every other host record (an op, a range,
# torch's own marks such as "PythonDispatchMode") numbers its ids in torch's own sequence, and the
# two sequences overlap: an id names a launch only on a runtime call. (torch 2.11's records do not
# say which kind they are; an op's name, a custom one's included, holds "::".)
RUNTIME_CALL = re.compile(r"cu(da)?[A-Z]\w*")
# Ops whose own kernels launch nothing on the GPU: a kernel tied to one of them was launched by
# other code that ran inside it (see _covers), and answers for itself.
LAUNCH_NOTHING = ("allocation", "view", "metadata")
OWN_KERNELS_ONLY = ("fill", "movement")  # ops whose kernels are torch's own (TORCH_KERNELS in their names)
TORCH_KERNELS = "at::native::"


def _config():
    return torch._C._profiler._ExperimentalConfig(profile_all_threads=True)


def harness_name() -> str:
    """A name for the harness's ranges in one session, unknown to student code until it runs:
    ops inside such a range are the harness's own, so a range of that name is not forgeable."""
    return f"grader::harness:{secrets.token_hex(8)}"


class Session:
    """A profiler session; `kernels` adds the GPU's kernel records (CUPTI). `lost` is set when the
    session did not survive the call: student code stopped the profiler, or swapped in its own."""

    def __init__(self, kernels: bool):
        self.harness = harness_name()
        self.profile = autograd_profiler.profile(use_kineto=True, use_device="cuda" if kernels else None,
                                                 experimental_config=_config())  # fmt: skip
        self.lost = False

    def __enter__(self) -> Session:
        self.profile.__enter__()
        with autograd_profiler.record_function(self.harness):
            pass  # a mark: a session swapped in by student code does not hold it
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.profile.__exit__(*exc)
            self.events = read_events(self.profile.kineto_results)
        except (RuntimeError, AssertionError, AttributeError):
            self.lost, self.events = True, []
        self.lost = self.lost or not any(e.name == self.harness for e in self.events)


class Event:
    """One record of a session: a torch op, a range or a runtime call on a host thread (times in
    ns), or on the GPU a kernel, whose `id` is the correlation id of the host call that launched it.
    A runtime call's or a kernel's `linked` is the id of the op or range it ran in, as the profiler
    tied them (0: none, and for every op and range); `annotation` marks a range (`record_function`),
    which any code may open under any name: never an op."""

    __slots__ = ("name", "id", "thread", "start", "end", "device_type", "linked", "annotation", "cpu_parent",
                 "cpu_children")  # fmt: skip

    def __init__(self, name: str, id: int, thread: int, start: int, end: int, device_type, linked: int = 0,
                 annotation: bool = False):  # fmt: skip
        self.name, self.id, self.thread, self.start, self.end = name, id, thread, start, end
        self.device_type, self.linked, self.annotation = device_type, linked, annotation
        self.cpu_parent: Event | None = None
        self.cpu_children: list[Event] = []


def read_events(result) -> list[Event]:
    """A session's records, in order of their start, each host record linked to the one it ran in.
    The same records, names and nesting as torch's `function_events`: its bookkeeping records
    left out, a range that ends on another thread than it began (async) never a parent, an op's
    only child of its own name folded into it. Python's cycle collector waits meanwhile: in a
    process holding torch, each of its passes over the new records cost more than the reading."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _read(result)
    finally:
        if collecting:
            gc.enable()


def _read(result) -> list[Event]:
    names: dict[str, str] = {}
    found, nested = [], []
    ranges: dict[int, Event] = {}  # an op's or a range's correlation id -> its record
    for record in result.events():
        raw = record.name()
        if _filter_name(raw) or record.is_hidden_event():
            continue
        name = names.get(raw)
        if name is None:
            name = names[raw] = _rewrite_name(raw, with_wildcard=True)
        event = Event(name, record.correlation_id(), record.start_thread_id(), record.start_ns(), record.end_ns(),
                      record.device_type(), record.linked_correlation_id(), record.is_user_annotation())  # fmt: skip
        found.append(event)
        if event.device_type == DeviceType.CPU and not record.is_async() and record.end_thread_id() == event.thread:
            nested.append(event)
            if not event.linked and (event.annotation or name.startswith("aten::")):
                ranges[event.id] = event  # what a runtime call may be linked to (its id is the op's)
    _nest(nested)
    _link(nested, ranges)
    repeated = _fold_repeats(nested)
    found = [e for e in found if id(e) not in repeated]
    found.sort(key=lambda e: (e.start, -e.end))
    return found


def _nest(host: list[Event]) -> None:
    """Each record's parent: on its thread, the innermost record whose time holds its own."""
    host.sort(key=lambda e: (e.thread, e.start, -e.end))
    open_: list[Event] = []
    thread = None
    for event in host:
        if event.thread != thread:
            open_, thread = [], event.thread
        while open_ and (event.start >= open_[-1].end or event.end > open_[-1].end):
            open_.pop()
        if open_:
            event.cpu_parent = open_[-1]
            open_[-1].cpu_children.append(event)
        open_.append(event)


def _link(host: list[Event], ranges: dict[int, Event]) -> None:
    """Each runtime call under the op or range the profiler linked it to, where that differs from
    the time nesting: the runtime's records are stamped on another clock, converted, and a launch
    inside a short op (the autotuner's `zero_` of its L2-flush buffer, a few microseconds) was seen
    to fall outside it. torch's own `function_events` ties kernels to ops the same way."""
    for event in host:
        op = ranges.get(event.linked) if event.linked else None
        if op is None or op is event.cpu_parent or op.thread != event.thread:
            continue
        if event.cpu_parent is not None:
            event.cpu_parent.cpu_children.remove(event)
        event.cpu_parent = op
        op.cpu_children.append(event)


def _fold_repeats(host: list[Event]) -> set[int]:
    """A record that is its parent's only child, of the same name (an op calling its own overload),
    folded into the parent, as torch folds it; the ids of the records folded away."""
    folded = set()
    for event in host:  # parents before their children
        parent = event.cpu_parent
        if (parent is not None and parent.name == event.name and len(parent.cpu_children) == 1
                and parent.annotation == event.annotation):  # fmt: skip
            parent.cpu_children = event.cpu_children
            for child in event.cpu_children:
                child.cpu_parent = parent
            folded.add(id(event))
    return folded


def _ancestors(event):
    parent = event.cpu_parent
    while parent is not None:
        yield parent
        parent = parent.cpu_parent


def _in_harness(event, harness: str) -> bool:
    return any(a.name.startswith(harness) for a in _ancestors(event))


def _harness_windows(events, harness: str) -> tuple[int | None, list[tuple[float, float]]]:
    """The harness's thread and the times its ranges were open."""
    ranges = [e for e in events if e.name == harness and e.device_type == DeviceType.CPU]
    return (ranges[0].thread if ranges else None), [(e.start, e.end) for e in ranges]


def _during(event, windows) -> bool:
    """An op of another thread than the harness's that ran while a harness range was open. (A
    student's thread timed to the reference's call would pass as the harness's: its work would
    still have to reach the student's output, through the student's own call, which is judged.)"""
    thread, spans = windows
    start = event.start
    return thread is not None and event.thread != thread and any(a <= start <= b for a, b in spans)


def _is_runtime_call(event) -> bool:
    """A host record of a call into CUDA (RUNTIME_CALL), whose id its kernels carry; a range
    (`record_function`) may bear such a name too, and is none."""
    return event.device_type == DeviceType.CPU and not event.annotation and RUNTIME_CALL.fullmatch(event.name) is not None


def _judged(event) -> bool:
    return event.name.startswith("aten::") and not event.annotation and not ops.delegates(event.name)


def _covers(outer, inner) -> bool:
    """Whether `inner`, run inside `outer`, is `outer`'s business. An op that computes nothing
    (allocates, views, copies, fills) runs no op that computes; one found inside it ran from Python
    code that got in there (a dispatch mode's or a tensor subclass's handler, a finalizer the
    collector ran), which is the student's, and is judged as a call of its own."""
    return ops.category(outer.name) == "compute" or ops.category(inner.name) != "compute"


def _top_op(event):
    """The outermost torch op that `event` ran inside (itself included) and that covers it
    (`_covers`), or None; views and ops that only forward to another (ops.delegates) are seen
    through, to the ops they ran, and a range (`record_function`) is no op at all."""
    top = event if _judged(event) else None
    for ancestor in _ancestors(event):
        if _judged(ancestor) and (top is None or _covers(ancestor, top)):
            top = ancestor
    return top


def _inner_category(call) -> str:
    """The category (ops.category) of the op that a runtime call ran in directly, or "" for none."""
    inner = next((a for a in _ancestors(call) if a.name.startswith("aten::") and not a.annotation), None)
    return ops.category(inner.name) if inner is not None else ""


def _launched_by(op: str, inner: str, kernel: str) -> str:
    """The op a kernel is tied to, "" for none. An op that allocates, views or reads metadata
    launches nothing (LAUNCH_NOTHING), and a fill or a copy only torch's own kernels: a kernel of
    another name launched inside one came from code that ran inside it (a library's, called from a
    handler), and answers for itself."""
    if inner in LAUNCH_NOTHING or (inner in OWN_KERNELS_ONLY and TORCH_KERNELS not in kernel):
        return ""
    return op


def _where(event, where: dict[str, str]) -> str:
    """The student's line behind a top-level op: the dispatch mode saw it, or one of the ops it
    ran (`float(t)` is aten::item to the profiler, aten::_local_scalar_dense to the mode)."""
    pending = [event]
    while pending:
        current = pending.pop(0)
        if where.get(current.name):
            return where[current.name]
        pending.extend(current.cpu_children)
    return ""


def summarize(session: Session, excluded: Counter | None = None, where: dict[str, str] | None = None) -> Activity:
    """The student's ops and the kernels they ran, from one session's events. Ops inside the
    session's harness ranges are the harness's; `excluded` counts ops the interpreter ran for
    itself; `where` names the student's line that first ran an op (on the grader's thread)."""
    events, harness = session.events, session.harness
    windows = _harness_windows(events, harness)
    ops: Counter = Counter()
    threads: dict[str, set] = {}
    lines: dict[str, str] = {}
    # correlation id of a host launch call -> (the student op, the call, the category of the op it ran in)
    launchers: dict[int, tuple[str, str, str]] = {}
    for event in events:
        if event.device_type != DeviceType.CPU or event.name.startswith(harness) or _in_harness(event, harness):
            continue
        if _during(event, windows):
            continue  # another thread working for the harness (autograd's engine runs a backward on its own)
        top = _top_op(event)
        if top is event:
            ops[event.name] += 1
            threads.setdefault(event.name, set()).add(event.thread)
            lines[event.name] = lines.get(event.name) or _where(event, where or {})
        if _is_runtime_call(event):  # remember who launched through it
            launchers[event.id] = (top.name if top is not None else "", event.name, _inner_category(event))
    for name, count in (excluded or Counter()).items():
        ops[name] -= min(count, ops[name])
    return Activity(
        ops=[OpCount(name, n, len(threads.get(name, ())), lines.get(name, "")) for name, n in sorted(ops.items()) if n > 0],
        kernels=_kernels(events, launchers, harness),
        profiler_lost=session.lost,
    )


def _kernels(events, launchers: dict[int, tuple[str, str, str]], harness: str) -> list[KernelCount]:
    """The GPU's kernels with the student op that launched each ("" for none: Triton, a .cu, a
    library); the harness's own launches (inside its ranges) are left out."""
    harness_ids = {e.id for e in events if _is_runtime_call(e) and _in_harness(e, harness)}
    counts: Counter = Counter()
    ran: set[int] = set()  # correlation ids that a kernel record already carried
    for event in events:
        if event.device_type != DeviceType.CUDA or event.name.startswith(NOT_KERNELS) or event.id in harness_ids:
            continue
        if event.name.startswith("grader::"):
            continue  # the GPU's copy of a host range, not a kernel
        unlaunched = event.id not in launchers
        op, call, inner = launchers.get(event.id, ("", "", ""))
        op = _launched_by(op, inner, event.name)
        # A replayed graph's kernels carry the id of the cudaGraphLaunch, or (CUPTI does both, on an
        # H100 with torch 2.11, for whole replays at a time) the id of the launch that was captured:
        # one launch runs its kernel once, so a second record of one id is a replay.
        graph = call.startswith(("cudaGraphLaunch", "cuGraphLaunch")) or event.id in ran
        ran.add(event.id)
        counts[(event.name, op, graph, unlaunched)] += 1
    return [KernelCount(name, n, *rest) for (name, *rest), n in sorted(counts.items())]
