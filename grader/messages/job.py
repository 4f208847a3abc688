"""What goes into the child: one `Job` (the assignment, the submission's copy, the device, the key
that signs every frame back) and its tasks, as a line of JSON on the child's standard input, read
once and closed (decoding.job_json, decoding.read_job), so no file or command-line argument holds
it. A timing child started ahead reads its tasks as a second line (Job.ahead)."""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.messages.specializations import Specialization


def task_id(part: str, kind: str, index: int) -> str:
    """A task's name in the job and in every message about it: its part, its kind, its index."""
    return f"{part}:{kind}:{index}"


@dataclass(frozen=True)
class Task:
    id: str
    part: str
    kind: str  # "case", "bench" or "probe"; a precompile child's "record" or "compile" (Job.precompile)
    index: int
    seed: int
    repeats: int = 1  # runs of a case on the same inputs, which must agree bit for bit
    max_output_bytes: int = 1 << 20  # an output larger than this is described, not sent


@dataclass(frozen=True)
class Input:
    """One keyword argument of a call, laid out without its data (assignment/input_layouts.py): a
    tensor's shape, strides, storage offset, dtype and whether it requires grad, or a plain value
    as specializations.written writes it (`kind` "tensor" for a tensor)."""

    name: str
    kind: str
    text: str = ""
    shape: list[int] = field(default_factory=list)
    stride: list[int] = field(default_factory=list)
    offset: int = 0
    dtype: str = ""  # torch's name of it: "float32", "int64"
    grad: bool = False


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
    # A precompile child (running/precompile.py): the tier whose launches it records ("record"
    # tasks) or compiles ("compile" tasks, each the specialization of its index in `compiles`),
    # running on the CPU whatever that tier; "" for a child that grades.
    precompile: str = ""
    compiles: list[Specialization] = field(default_factory=list)
    # A recording child's shapes (running/precompile.py): per part, the inputs of each call it makes, in
    # cases.launched_on's order, so that it need not run the inputs' code on torch's meta device.
    layouts: dict[str, list[list[Input]]] = field(default_factory=dict)
    # A timing child started ahead of its tasks (isolation.start_ahead): `tasks` are every benchmark
    # it may be given, for its start's warm-up; the ones it runs follow as a second line, once the
    # parent knows which parts passed their correctness cases.
    ahead: bool = False
    # A timing child's kept outputs' file (messages/kept_file.py), by the number the child knows it
    # (-1: none, and they go through the channel), and the seed of their fingerprints' weights.
    kept_fd: int = -1
    kept_seed: int = 0
