"""What comes out of the child: each message it sends on its signed channel (frames.py), and what
the messages carry: a task's outputs, what ran during a call (its activity: ops, launches,
kernels, their resources and loads), timings, failures. Every one is untrusted data, built and
checked by decoding.decode before the parent reads it."""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.messages.specializations import Specialization


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
    # Where its bytes lie in the kept outputs' file (messages/kept_file.py) instead of this frame's
    # payload, and their fingerprint; -1: in the payload.
    kept_at: int = -1
    fingerprint: int = 0


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
    cached: bool = False  # Triton's cache held it already (the precompile pass's, an earlier grading's): only shown
    key: str = ""  # Triton's cache key of it


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


# Where a benchmark's host seconds went, as the timing child tells it (shown, never judged): the
# repetitions' fresh inputs, their timed calls (the L2 flush, the gate and the synchronizations
# around each), the checks of their outputs; the process's first benchmark's settling of the GPU;
# the profile's reading; a shown baseline's own timing.
HARNESS_PARTS = ("inputs", "calls", "checks", "first", "profile", "shown")


@dataclass
class BenchReport:
    student: Timings
    baseline: Timings
    activity: Activity
    checks: list[CallCheck] = field(default_factory=list)
    remeasured: bool = False
    disturbed_retakes: int = 0  # rounds taken again because torch's own timings said the GPU was disturbed
    retaken: list[str] = field(default_factory=list)  # why each round was taken again (steadiness.retake_reasons)
    gated: bool = False  # the kept samples were timed behind the gate (child/gate.py), not a busy wait
    kept: Observation | None = None  # one timed call's output, chosen after the fact
    kept_seed: int = 0  # the seed of that call's inputs
    copy_gbps: float = 0.0
    shown: Timings | None = None  # the part's shown baseline (spec.Shown), when it has one and it ran
    shown_error: str = ""  # why it did not
    device_name: str = ""
    warmup_s: list[float] = field(default_factory=list)  # the warm-up's seconds (the student's calls, torch's): shown
    harness_s: dict[str, float] = field(default_factory=dict)  # where the rest went, by HARNESS_PARTS: shown


@dataclass
class ProbeReport:
    called: bool = True


@dataclass
class Failure:
    reason: str
    message: str
    fatal: bool = False  # a dead CUDA context: the parent goes on in a fresh process


@dataclass
class Recorded:
    """A precompile child's account of one part (child/precompile.py): every launch its calls
    made, recorded and not run, as specializations (`part` is the parent's to set)."""

    specializations: list[Specialization] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)  # the shapes whose call raised, and what it raised


@dataclass
class Precompiled:
    """A precompile child's compile of one specialization for the GPU target: only counted, never
    trusted (whatever it says, the graded children compile what they do not find)."""

    compiled: bool
    cached: bool = False  # Triton's cache held it already
    seconds: float = 0.0
    key: str = ""  # Triton's cache key of it (the hash of its folder)


Outcome = CaseReport | BenchReport | ProbeReport | Failure | Recorded | Precompiled


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
OUTCOMES = {cls.__name__: cls for cls in (CaseReport, BenchReport, ProbeReport, Failure, Recorded, Precompiled)}
