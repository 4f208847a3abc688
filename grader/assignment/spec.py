"""An assignment's grading data: `assignments/<name>/assignment.toml`, parsed into one typed tree.

Everything the grader needs to know about an assignment (files, entry points, shapes, dtypes,
tolerances, points, thresholds, timeouts) lives in that file, so adding an assignment never
touches the grader. A bad file fails loudly with its path, the key and what was expected.

The file is checked against its reference.py when it is loaded, not when grading first calls a
function: each part calls reference.py's `<part>_inputs`, `<part>_reference`, `<part>_baseline`
and `<part>_traffic` (a CUDA C part also `<part>_arguments` and `<part>_output_shape`) unless it
names others, and each name must be a top-level `def` there. A case is a line,
"DTYPE SHAPE [LAYOUT] [TIER] [hidden]" ("bfloat16 1823x781 strided gpu"), or a table of the same
keys. A `hidden` case (`hidden = true` in a table) is graded like any other, but the student's
report leaves out its inputs and diagnosis and its Gradescope test shows after the due date.

A Triton part may require how its kernels load: `loads = "block_pointers"` means every tile its
kernels load goes through `tl.make_block_ptr` or a tensor descriptor, never a tensor of pointers
(judged from each launched kernel's TTIR, integrity.required_loads); `"any"`, the default, asks nothing.

A part may name what its lesson reads in its compiled kernels: `teaches = ["tensor_cores"]` (its
products on tensor cores), `"vector_loads"` (128-bit loads), `"bank_conflicts"` (shared-memory
accesses that conflict on banks); the report then says what the kernels' code shows of each
(advice, never graded: compiled_kernels.py).

A timed part may show a second baseline beside the graded one: `shown = { label = "torch.compile",
function = "relu_chain", compiled = true }` times that reference.py function too (here through
torch.compile, compiled during the warm-up calls), and the report gives the student's speed
against it, not graded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


REPO_ROOT = Path(__file__).resolve().parents[2]
DTYPES = ("float32", "float16", "bfloat16", "float64")
LAYOUTS = ("contiguous", "strided")
TIERS = ("cpu", "gpu", "both")
KERNELS = ("triton", "cuda", "none")
LOADS = ("any", "block_pointers")  # what a part requires of its kernels' loads
# What a part's lesson is about in its compiled kernels, read from their code and shown as advice
# (compiled_kernels.py): tensor-core instructions, 128-bit loads, shared-memory bank conflicts.
TEACHES = ("tensor_cores", "vector_loads", "bank_conflicts")
# The functions of reference.py a part calls (by default `<part name>_<key>`), and those a CUDA C
# part calls besides.
FUNCTIONS = ("inputs", "reference", "baseline", "traffic")
CUDA_FUNCTIONS = ("arguments", "output_shape")
HIDDEN = "hidden"  # the word that marks a case hidden until the deadline
CASE_LINE = f"\"DTYPE SHAPE [LAYOUT] [TIER] [hidden]\" (DTYPE one of {', '.join(DTYPES)}; SHAPE positive integers joined by x, as in 129x515; LAYOUT one of {', '.join(LAYOUTS)}; TIER one of {', '.join(TIERS)}; hidden: shown to students only after the deadline)"  # fmt: skip


@dataclass(frozen=True)
class Tolerance:
    rtol: float  # elementwise: |out - ref| <= atol + rtol * |ref|
    atol: float
    norm: float  # norm-wise: ||out - ref|| / ||ref|| <= norm


@dataclass(frozen=True)
class Case:
    shape: tuple[int, ...]
    dtype: str
    layout: str = "contiguous"
    tier: str = "both"
    hidden: bool = False  # inputs and diagnosis kept from the student until the deadline (hidden.py)

    def runs_on(self, device: str) -> bool:
        return self.tier == "both" or self.tier == ("gpu" if device == "cuda" else "cpu")

    @property
    def label(self) -> str:
        dims = "x".join(str(d) for d in self.shape)
        suffix = ", strided rows" if self.layout == "strided" else ""
        return f"{self.dtype} {dims}{suffix}"


@dataclass(frozen=True)
class Performance:
    repetitions: int
    tiers: tuple[tuple[float, float], ...]  # (speed ratio at least, share of points), best first
    borderline: float = 0.05  # a ratio this close (relative) to a tier edge is measured again

    def credit_for(self, ratio: float) -> float:
        return next((share for edge, share in self.tiers if ratio >= edge), 0.0)

    def is_borderline(self, ratio: float) -> bool:
        return any(abs(ratio - edge) <= self.borderline * edge for edge, _ in self.tiers)


@dataclass(frozen=True)
class Shown:
    """A baseline timed beside the graded one and shown, never graded."""

    label: str  # how the report names it ("torch.compile")
    function: str  # reference.py's (**inputs) -> output, called like the baseline
    compiled: bool = False  # timed as torch.compile(function), compiled during the warm-up calls


@dataclass(frozen=True)
class Part:
    name: str
    file: str
    entry: str
    # Functions of reference.py, `<name>_inputs` and so on where assignment.toml names none.
    inputs: str
    reference: str
    baseline: str
    traffic: str
    # Torch ops that compute which the part allows beyond allocation, views and copies (ops.py):
    # an allow-list, so any other op that computes is `forbidden_op`.
    allowed_ops: tuple[str, ...]
    kernel: str  # "triton": a Triton kernel of the student's must run; "cuda": a .cu built with nvcc
    correctness_points: float
    performance_points: float
    tolerance: dict[str, Tolerance]
    cases: tuple[Case, ...]
    performance: Performance | None
    benchmarks: tuple[Case, ...]
    arguments: str | None = None  # cuda: reference.py's (out, **inputs) -> the launcher's arguments
    output_shape: str | None = None  # cuda: reference.py's (**inputs) -> the output's shape
    not_implemented_code: int = -1  # cuda: what an untouched stub's launcher returns
    repeats: int = 1  # GPU tier: runs of each case on the same inputs, which must agree bit for bit
    max_kernels: int | None = None  # a fused part: at most this many kernel launches and no aten compute
    # At its peak, the inputs plus what the call allocates stay within this many times the bytes
    # of the inputs and the output (an attention that stores its N x N scores does not).
    peak_memory: float | None = None
    bonus: bool = False  # extra credit: its points add to the score, not to the points possible
    # "block_pointers": every tile the part's kernels load goes through a block pointer or a tensor
    # descriptor (forbidden_op otherwise); "any": no requirement.
    loads: str = "any"
    shown: Shown | None = None
    teaches: tuple[str, ...] = ()  # of TEACHES: what the report reads from its compiled kernels

    @property
    def is_cuda(self) -> bool:
        return self.kernel == "cuda"

    def tolerance_for(self, dtype: str) -> Tolerance:
        return self.tolerance[dtype]


@dataclass(frozen=True)
class Assignment:
    name: str
    directory: Path
    title: str
    seed: int
    cpu_timeout_s: float
    gpu_timeout_s: float
    parts: tuple[Part, ...]
    # Limits of each child process (isolation.py): resident host memory of all its processes
    # together, how many processes it may run at once, and the GPU memory torch may allocate.
    host_memory_gib: float = 16.0
    max_processes: int = 16
    gpu_memory_gib: float = 40.0
    scratch_gib: float = 1.0  # the child's private /tmp (Triton's cache lives there), counted as host memory

    @property
    def reference_path(self) -> Path:
        return self.directory / "reference.py"

    def timeout_for(self, device: str) -> float:
        return self.gpu_timeout_s if device == "cuda" else self.cpu_timeout_s

    def points_possible(self, bonus: bool = False) -> float:
        """Every part's points, the bonus parts' only with `bonus` (the most a student can earn)."""
        return sum(p.correctness_points + p.performance_points for p in self.parts if bonus or not p.bonus)
