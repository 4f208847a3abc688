"""What crosses the process boundary between the grader (the parent) and the child that runs student code.

Parent to child: one `Job` as JSON on the child's standard input, read once and closed, so no file
or command-line argument holds it. Child to parent: signed frames on a pipe (`FrameWriter`,
`FrameReader`). Each frame is

    4 bytes: header length | 8 bytes: payload length | header (JSON) | payload | 32 bytes: HMAC-SHA256

where the HMAC covers a sequence number, both lengths, the header and the payload (the SHA-256 of
each 4 MB of it in turn, which both ends hash on several threads at once), under a key that only
the parent and the child's harness know (it arrives inside the Job). Student code shares the
child's process, so it can find the pipe; a frame it writes without the key fails the check and
the parent calls that `tampering`. The payload carries an output tensor's bytes, streamed straight
into a file the parent owns, never a path the child names.

Everything the parent reads is untrusted: `decode` builds the typed message or raises
ProtocolError, caps every string and list, and cleans every string of control sequences, so
nothing the child says can crash, hang or mislead the parent, the terminal or a report.

What the signature proves, and what it does not. The key never meets a name student code can
rebind (FrameWriter), so student code cannot sign a frame, nor rewrite one through a library the
writer would have looked up. But the harness that composes each message runs in the student's
process, after student code: a submission that replaces a function or class attribute of the
grader's own modules, or a Python builtin, and puts it back before the harness looks
(snapshot.HarnessSnapshot compares identities after every task), can change what the harness
says before it is signed. That is detected only when the change is still there at the check.
The parent's own check of every output's bytes against its reference does not depend on it.
"""

from __future__ import annotations

import _thread
import dataclasses
import hmac
import json
import os
import struct
import types
import typing
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from _hashlib import hmac_new as _hmac_new
from _hashlib import openssl_sha256 as _sha256
from json.encoder import c_make_encoder, encode_basestring_ascii
from typing import Any, BinaryIO, Iterable

from grader.judging.reasons import CHILD_FAILURES
from grader.reporting.text import printable

PREFIX = struct.Struct(">IQ")  # header length, payload length
MAC_BYTES = 32
MAX_HEADER_BYTES = 1 << 20
PAYLOAD_CHUNK = 1 << 22  # a payload's unit of hashing (its SHA-256 goes into the frame's HMAC), and the parent's reads
SENT_CHUNK = 1 << 24  # the child's pieces of a payload
DIGEST_THREADS = 4  # the parent's threads hashing a payload's units
READ_AHEAD = 8  # units the parent reads before the oldest is hashed and written
MAX_TEXT = 64 * 1024  # characters of one string from the child
MAX_ITEMS = 20_000  # entries of one list or dict from the child


class ProtocolError(Exception):
    """The child sent something that is not a message of the grader's: `reason` says which verdict."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


# --- Parent to child ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    id: str
    part: str
    kind: str  # "case", "bench" or "probe"
    index: int
    seed: int
    repeats: int = 1  # runs of a case on the same inputs, which must agree bit for bit
    max_output_bytes: int = 1 << 20  # an output larger than this is described, not sent


@dataclass
class Job:
    assignment_dir: str
    submission_dir: str  # the submission's copy, as the child sees it
    device: str  # "cpu" or "cuda"
    channel_fd: int
    key: str  # hex: signs every frame the child sends
    tasks: list[Task]
    libraries: dict[str, str] = field(default_factory=dict)  # CUDA part -> the built library, as the child sees it
    gpu_memory_gib: float = 40.0
    # Where the parent opens the gate (one byte) once this child may use the GPU (gpu_lock.py):
    # the child waits there after its start, before any student code. -1: no gate.
    gate_fd: int = -1
    # Tests only: the child runs without its guard (child/guard.py, switches.py), standing for student
    # code in full control of the child's Python; the parent's witness must still hold the verdicts.
    unguarded: bool = False
    witness: bool = False  # the parent loads its witness into this child (grader/witness/; GPU tier only)


# --- Child to parent ----------------------------------------------------------------------------


@dataclass
class Imported:
    """On a shared GPU: the child has imported torch and Triton and waits at its gate before it
    starts CUDA (a context starting on the GPU would slow another student's timed kernels)."""


@dataclass
class Hello:
    sandbox: str  # what the child found around itself, in words


@dataclass
class Start:
    task: str


@dataclass
class Output:
    """Announces the payload of this frame: one tensor's bytes, row-major."""

    task: str
    name: str
    dtype: str
    shape: list[int]
    sent: bool = True  # False: larger than the task's max_output_bytes, so only its shape travels


@dataclass
class Returned:
    kind: str  # "tensor", "subclass" (a torch.Tensor subclass: never read) or "other"
    type_name: str
    output: str = ""  # the Output frame holding its bytes, for a tensor


@dataclass
class Observation:
    """What one call left behind, read after a device-wide synchronize."""

    returned: Returned
    modified_inputs: list[str] = field(default_factory=list)
    overrun: int = 0  # guard cells written around the allocation the output lives in
    aliases: list[str] = field(default_factory=list)  # inputs the output shares memory with


@dataclass
class OpCount:
    name: str  # "aten::add"
    count: int
    threads: int = 1  # how many threads ran it: more than one means a thread of the student's
    where: str = ""  # the student's line that first called it, on the grader's thread ("kernel.py, line 34: ...")


@dataclass
class LaunchCount:
    kernel: str
    file: str
    own: bool  # defined in the student's files
    count: int


@dataclass
class KernelCount:
    """A kernel the GPU ran during the call (seen by the profiler, from any thread or stream)."""

    name: str
    count: int
    op: str = ""  # the torch op that launched it; "" when no torch op did (Triton, a .cu, a library)
    graph: bool = False  # replayed from a CUDA graph (an autotuner's do_bench_cudagraph): not a launch of its own
    # No launch of it was recorded in the session: the profiler lost the runtime's record, so no op
    # and no call of the student's can be tied to it (seen on an H200 for 1 kernel in 60,420).
    unlaunched: bool = False


@dataclass
class KernelResources:
    """What one compiled kernel asks of an SM, and what its code is made of: the Triton kernels a
    call launched (child/resources.py, on both tiers) and the kernels of a CUDA C build
    (cuda_resources.py). The parent works out the occupancy and the readings (compiled_kernels.py)."""

    kernel: str
    file: str  # the file it is defined in (its name only)
    specialization: str = ""  # what it was compiled for: element types and constexprs ("fp16; BLOCK_M=64")
    registers: int = 0  # per thread
    spill_bytes: int = 0  # per thread: local memory that registers spilled to (ptxas's stack frame)
    shared_bytes: int = 0  # per block, its own (static and dynamic; not the driver's 1 KiB reserve)
    threads: int = 0  # per block; 0 where unknown (a CUDA kernel whose launch was not read)
    num_stages: int = 0  # Triton's software-pipelining stages (0: a CUDA kernel)
    sixteen_bit: bool = False  # it reads float16 or bfloat16 tensors
    tensor_core_ops: int = 0  # wgmma / mma / wmma instructions in its PTX
    global_loads: int = 0  # load instructions from global memory in its PTX
    wide_loads: int = 0  # of which 128-bit or wider per thread
    shared_accesses: int = 0  # shared-memory accesses whose lane addresses were followed (ptx.py)
    conflicted: int = 0  # of which conflict on banks
    worst_ways: int = 0  # turns the worst of those takes per warp
    worst_stride: int = 0  # bytes between neighbouring lanes' addresses in it (0: not constant)
    worst_kind: str = ""  # "load" or "store"
    worst_line: int = 0  # its source line, where the PTX says
    read: bool = True  # False: its compiled code could not be read


@dataclass
class TargetReport:
    """A kernel the CPU tier also compiled for the GPU target: what the GPU would say of it."""

    kernel: str
    where: str  # file and line of the kernel
    ok: bool
    error: str = ""
    shared_bytes: int = 0
    shared_limit: int = 0
    tf32_dots: int = 0  # float32 tl.dot that the GPU runs in TF32
    registers: int = 0
    spills: int = 0
    autotuned: bool = False  # launched by an autotuner with several configs (the GPU skips one that does not fit)
    skippable: bool = False  # its compile error is one the GPU's autotuner skips a config for (out of resources)
    missing_allocator: bool = False  # in-kernel tensor descriptors without triton.set_allocator
    resources: KernelResources | None = None  # what it asks of an SM and is made of, where it compiled


@dataclass
class KernelLoads:
    """How one compiled kernel loads its tiles, counted in the code generator's TTIR (child/loads.py)."""

    kernel: str
    file: str  # the file the kernel is defined in (its name only)
    read: bool = True  # False: the compiled kernel held no TTIR to count in
    block_pointers: int = 0  # tt.load of a block pointer (tl.make_block_ptr)
    descriptors: int = 0  # tt.descriptor_load / _gather (a tensor descriptor)
    pointer_tensors: int = 0  # tt.load of a tensor of pointers (pointer arithmetic)
    first_pointer_tensor: str = ""  # file and line of the first of those, where the TTIR says


@dataclass
class Activity:
    """Everything that ran while student code had control, by the profiler's and the hooks' account."""

    ops: list[OpCount] = field(default_factory=list)  # torch ops the student's code called, every thread
    launches: list[LaunchCount] = field(default_factory=list)  # Triton launches
    kernels: list[KernelCount] = field(default_factory=list)  # GPU tier only
    profiler_lost: bool = False  # the profiler was stopped or replaced during the call
    refused: list[str] = field(default_factory=list)  # what the guard refused (ctypes, frames, gc, ...)
    patched: list[str] = field(default_factory=list)  # harness objects found rebound
    patched_at_import: bool = False
    targets: list[TargetReport] = field(default_factory=list)  # CPU tier: compiled for the GPU too
    loads: list[KernelLoads] = field(default_factory=list)  # each launched kernel's loads, from its TTIR
    # The numbers of the witness's windows (child/marks.py) of the student's calls and imports this
    # account covers; the parent checks them against the windows the witness saw (witness/judge.py).
    windows: list[int] = field(default_factory=list)
    # GPU tier: each launched kernel's resources, the config an autotuner picked rather than those
    # it tried (the CPU tier's ride in `targets`)
    resources: list[KernelResources] = field(default_factory=list)


@dataclass
class Followup:
    """A second call, on new inputs of the same shape written into the same memory."""

    seed: int
    observation: Observation
    allocated_bytes: int = 0
    reuses_first_output: bool = False
    same_as_first: bool = False


@dataclass
class CaseReport:
    observation: Observation
    activity: Activity
    calls: int = 1  # student calls the activity covers
    unstable: int = 0  # elements that differed between repeated runs on the same inputs
    followup: Followup | None = None
    seconds: float = 0.0


@dataclass
class Timings:
    event_ms: list[float] = field(default_factory=list)
    hidden_ms: list[float] = field(default_factory=list)  # host time the events did not see
    windows: list[int] = field(default_factory=list)  # each sample's witness window, where one records the child


@dataclass
class CallCheck:
    """One timed call's output against the torch reference's output on the same inputs."""

    rep: int
    agrees: bool
    detail: str = ""


@dataclass
class BenchReport:
    student: Timings
    baseline: Timings
    activity: Activity
    checks: list[CallCheck] = field(default_factory=list)
    remeasured: bool = False
    disturbed_retakes: int = 0  # rounds taken again because torch's own timings said the GPU was disturbed
    kept: Observation | None = None  # one timed call's output, chosen after the fact
    kept_seed: int = 0  # the seed of that call's inputs
    copy_gbps: float = 0.0
    shown: Timings | None = None  # the part's shown baseline (spec.Shown), when it has one and it ran
    shown_error: str = ""  # why it did not
    device_name: str = ""


@dataclass
class ProbeReport:
    called: bool = True


@dataclass
class Failure:
    reason: str
    message: str
    fatal: bool = False  # a dead CUDA context: the parent goes on in a fresh process


Outcome = CaseReport | BenchReport | ProbeReport | Failure


@dataclass
class Done:
    task: str
    outcome: Outcome
    activity: Activity | None = None  # for a Failure: what ran before it


@dataclass
class Finished:
    # The most GPU memory torch's allocator held at the end of any task (what it reserved: the
    # tensors and its cache), as the child measured it; shown to the course staff, never graded.
    gpu_reserved_bytes: int = 0


MESSAGES = {cls.__name__: cls for cls in (Imported, Hello, Start, Output, Done, Finished)}
OUTCOMES = {cls.__name__: cls for cls in (CaseReport, BenchReport, ProbeReport, Failure)}
# Every dataclass defined here: what a message may hold.
_DATACLASSES = tuple(v for v in list(globals().values()) if isinstance(v, type) and dataclasses.is_dataclass(v))


# --- Encoding -----------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A message as JSON-ready data; a union member carries its class name under "type"."""
    if dataclasses.is_dataclass(value):
        data = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"type": type(value).__name__, **data} if type(value).__name__ in OUTCOMES else data
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def job_json(job: Job) -> bytes:
    return json.dumps(_plain(job)).encode()


def read_job(data: bytes) -> Job:
    """The child reads its job (trusted: the parent wrote it)."""
    return _build(Job, json.loads(data), "job")


def decode(header: bytes) -> Any:
    """One message from the child, typed and cleaned, or ProtocolError."""
    try:
        data = json.loads(header)
    except (ValueError, RecursionError) as error:
        raise ProtocolError("crash", f"a message from the child was not JSON ({error})") from None
    if not isinstance(data, dict) or data.get("type") not in MESSAGES:
        raise ProtocolError("tampering", "a message from the child names no known message type")
    return _build(MESSAGES[data["type"]], data.get("body"), data["type"])


def _fail(where: str, expected: str) -> ProtocolError:
    return ProtocolError("tampering", f"a message from the child is malformed at {where}: expected {expected}")


def _build(kind: Any, data: Any, where: str) -> Any:
    """`data` checked against the type `kind` (a dataclass, list[...], dict[str, ...], a union, a scalar)."""
    origin, arguments = typing.get_origin(kind), typing.get_args(kind)
    if origin in (types.UnionType, typing.Union):
        if data is None and type(None) in arguments:
            return None
        if isinstance(data, dict) and data.get("type") in OUTCOMES and OUTCOMES[data["type"]] in arguments:
            return _build(OUTCOMES[data["type"]], data, where)
        members = [a for a in arguments if a is not type(None)]
        if len(members) == 1:
            return _build(members[0], data, where)
        raise _fail(where, "one of " + ", ".join(a.__name__ for a in members))
    if origin is list:
        if not isinstance(data, list) or len(data) > MAX_ITEMS:
            raise _fail(where, f"a list of at most {MAX_ITEMS} items")
        return [_build(arguments[0], item, f"{where}[{i}]") for i, item in enumerate(data)]
    if origin is dict:
        if not isinstance(data, dict) or len(data) > MAX_ITEMS:
            raise _fail(where, f"a mapping of at most {MAX_ITEMS} entries")
        return {printable(str(k), 200): _build(arguments[1], v, f"{where}.{k}") for k, v in data.items()}
    if dataclasses.is_dataclass(kind):
        return _build_dataclass(kind, data, where)
    return _scalar(kind, data, where)


def _build_dataclass(kind: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise _fail(where, f"a {kind.__name__}")
    hints = typing.get_type_hints(kind)
    values = {}
    for f in dataclasses.fields(kind):
        if f.name in data:
            values[f.name] = _build(hints[f.name], data[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise _fail(f"{where}.{f.name}", "a value")
    if kind is Failure and values["reason"] not in CHILD_FAILURES:
        raise _fail(f"{where}.reason", "a reason a child may give for a failure")
    return kind(**values)


def _scalar(kind: Any, data: Any, where: str) -> Any:
    if kind is bool:
        if isinstance(data, bool):
            return data
    elif kind is int:
        if isinstance(data, int) and not isinstance(data, bool) and abs(data) < 1 << 62:
            return data
    elif kind is float:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
    elif kind is str:
        if isinstance(data, str):
            return printable(data, MAX_TEXT)
    raise _fail(where, getattr(kind, "__name__", str(kind)))


# --- Frames -------------------------------------------------------------------------------------


def _mac(key: bytes, seq: int, header: bytes, payload_length: int):
    mac = _hmac_new(key, digestmod="sha256")
    mac.update(seq.to_bytes(8, "big") + PREFIX.pack(len(header), payload_length) + header)
    return mac


def _unencodable(value: object) -> None:
    raise TypeError(f"a message holds a {type(value).__name__}, which the channel does not carry")


class FrameWriter:
    """The child's end: signs and writes each message, with an optional payload of raw bytes.

    It runs after student code did, in the same process, and student code can rebind any module's
    names: json's default encoder (to rewrite a message before it is signed), hmac's OpenSSL
    binding (to be handed the key at the next frame), dataclasses.fields. So what it relies on was
    taken when it was made, before any student code ran, and is not looked up by name again: the
    key lives only inside OpenSSL's HMAC state (each frame signs with a copy of it), the JSON
    encoder is json's C one, and the messages' names and fields, and the thread functions that sign
    a payload while it is written, are its own copies. (What it cannot stop is in this module's
    docstring.)"""

    def __init__(self, fd: int, key: bytes):
        self.fd, self.seq = fd, 0
        self._signer = _hmac_new(key, digestmod="sha256")
        self._encode = c_make_encoder(None, _unencodable, encode_basestring_ascii, None, ": ", ", ", False, False, True)
        self._names = {cls: name for name, cls in {**MESSAGES, **OUTCOMES}.items()}
        self._tagged = frozenset(OUTCOMES.values())
        self._fields = {cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in _DATACLASSES}
        self._threads = (_thread.start_new_thread, _thread.allocate_lock, _update_and_release)
        self._sha256 = _sha256

    def send(self, message: Any, payload: memoryview | bytes | Iterable = b"", length: int | None = None) -> None:
        """Sign and write one frame. `payload`: bytes, or pieces of bytes adding up to `length`,
        each asked for once the one before is signed and written (a producer may reuse its buffer)."""
        if length is None:
            view = memoryview(payload).cast("B")
            payload, length = (view[start : start + SENT_CHUNK] for start in range(0, len(view), SENT_CHUNK)), len(view)
        header = "".join(self._encode({"type": self._names[type(message)], "body": self._plain(message)}, 0)).encode()
        mac = self._signer.copy()
        mac.update(self.seq.to_bytes(8, "big") + PREFIX.pack(len(header), length) + header)
        self._write(PREFIX.pack(len(header), length) + header)
        left, units = length, []  # each unit's SHA-256, in order; the last may still be filling
        for piece in payload:
            piece = memoryview(piece).cast("B")
            if len(piece) > left:
                raise ValueError("a payload longer than its frame says")
            self._hash_and_write(units, length - left, piece)
            left -= len(piece)
        if left:
            raise ValueError("a payload shorter than its frame says")
        mac.update(b"".join(unit.digest() for unit in units))
        self._write(mac.digest())
        self.seq += 1

    def _hash_and_write(self, units: list, offset: int, piece: memoryview) -> None:
        """Hash a piece that starts `offset` bytes into the payload, each of its units (PAYLOAD_CHUNK
        bytes of the payload) on a thread of the writer's own, while writing it: each waits on
        OpenSSL or the kernel, not on Python. One HMAC over the whole payload, signed on one
        thread while written, had let a vector addition's 470 MB of kept outputs leave its child in
        0.38 s on an H200 alone and 0.63 s beside seven other gradings, bound by the hashing, while
        the next timed phase waited. Where no thread can start (a process limit that the student's
        threads used up), one after the other."""
        start_thread, new_lock, update = self._threads
        jobs, at = [], 0
        while at < len(piece):
            filled = (offset + at) % PAYLOAD_CHUNK
            if not filled:
                units.append(self._sha256())
            take = min(PAYLOAD_CHUNK - filled, len(piece) - at)
            jobs.append((units[-1], piece[at : at + take]))
            at += take
        hashed = []
        for unit, part in jobs:  # each unit has one part of this piece: no two threads share a hash
            done = new_lock()
            done.acquire()
            try:
                start_thread(update, (unit, part, done))
            except RuntimeError:
                unit.update(part)
                done.release()
            hashed.append(done)
        self._write(piece)
        for done in hashed:
            done.acquire()  # hashed too: the piece's buffer may be reused

    def _plain(self, value: Any) -> Any:
        """A message as JSON-ready data; a union member carries its class name under "type"."""
        kind = type(value)
        fields = self._fields.get(kind)
        if fields is not None:  # a message's own dataclass: its fields, read from the instance itself
            state = object.__getattribute__(value, "__dict__")
            data = {name: self._plain(state[name]) for name in fields}
            return {"type": self._names[kind], **data} if kind in self._tagged else data
        if kind is list or kind is tuple:
            return [self._plain(v) for v in value]
        if kind is dict:
            return {str(k): self._plain(v) for k, v in dict.items(value)}
        return value

    def _write(self, data: memoryview | bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]


@dataclass
class Frame:
    message: Any
    payload: Path | None = None  # where the parent wrote the payload's bytes
    payload_bytes: int = 0


class FrameReader:
    """The parent's end: reads, checks and decodes frames, writing payloads into `folder`.

    `payload_cap` bounds one payload and `budget` all of them together, so a child cannot make the
    parent fill its disk; every violation is a ProtocolError and ends the reading.
    """

    def __init__(self, stream: BinaryIO, key: bytes, folder: Path, payload_cap: int, budget: int):
        self.stream, self.key, self.folder = stream, key, folder
        self.payload_cap, self.budget, self.seq = payload_cap, budget, 0

    def _exactly(self, count: int) -> bytes:
        data = self.stream.read(count)
        if len(data) != count:
            raise EOFError
        return data

    def read(self) -> Frame:
        """The next frame; EOFError at a clean end of the stream."""
        prefix = self.stream.read(PREFIX.size)
        if not prefix:
            raise EOFError
        if len(prefix) != PREFIX.size:
            raise ProtocolError("crash", "the result channel ended in the middle of a message")
        header_length, payload_length = PREFIX.unpack(prefix)
        if header_length > MAX_HEADER_BYTES:
            raise ProtocolError("tampering", f"a message header of {header_length} bytes (at most {MAX_HEADER_BYTES})")
        if payload_length > min(self.payload_cap, self.budget):
            raise ProtocolError("tampering", f"a payload of {payload_length} bytes, more than the output can hold")
        try:
            header = self._exactly(header_length)
            mac = _mac(self.key, self.seq, header, payload_length)
            path = self._payload(payload_length, mac) if payload_length else None
            signature = self._exactly(MAC_BYTES)
        except EOFError:
            raise ProtocolError("crash", "the result channel ended in the middle of a message") from None
        if not hmac.compare_digest(signature, mac.digest()):
            raise ProtocolError("tampering", "a message on the result channel was not signed by the grader's harness: "
                                "something else in the process wrote to it")  # fmt: skip
        self.seq += 1
        self.budget -= payload_length
        return Frame(decode(header), path, payload_length)

    def _payload(self, length: int, mac) -> Path:
        """The payload's bytes, into a new file of the parent's. Reading the next units, hashing
        each on one of several threads and writing them in order go on at once (each waits on the
        kernel or OpenSSL, not on Python): one after another, 2.5 GB of kept outputs cost a timed
        phase 8 s on an H100 machine, while no other grading could time."""
        path = self.folder / f"payload-{self.seq}.bin"
        # O_EXCL: the parent's own new file, never one that something else placed there.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with (
            os.fdopen(fd, "wb", buffering=0) as file,
            ThreadPoolExecutor(DIGEST_THREADS, "digest") as hashers,
            ThreadPoolExecutor(1, "payload") as writer,
        ):
            digests: list = []
            written: list = []
            left = length
            while left:
                if len(written) >= READ_AHEAD:
                    written[-READ_AHEAD].result()  # memory for at most READ_AHEAD units in flight
                    digests[-READ_AHEAD].result()
                unit = memoryview(bytearray(min(left, PAYLOAD_CHUNK)))
                self._fill(unit)
                digests.append(hashers.submit(_digest, unit))
                written.append(writer.submit(_write_all, file, unit))
                left -= len(unit)
            for done in written:
                done.result()
            mac.update(b"".join(done.result() for done in digests))
        return path

    def _fill(self, chunk: memoryview) -> None:
        got = 0
        while got < len(chunk):
            read = self.stream.readinto(chunk[got:])
            if not read:
                raise EOFError
            got += read


def _update_and_release(unit, part: memoryview, done) -> None:
    try:
        unit.update(part)
    finally:
        done.release()


def _digest(unit: memoryview) -> bytes:
    return _sha256(unit).digest()


def _write_all(file, data: memoryview) -> None:
    while data:
        data = data[file.write(data) :]
