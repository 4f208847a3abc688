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

import ast
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.assignment.toml_table import SpecError, Table

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


def _case(table: Table) -> Case:
    shape = table.get("shape", list, "a list of positive integers")
    if not shape or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
        raise table.fail("shape", "a list of positive integers")
    case = Case(
        shape=tuple(shape),
        dtype=table.choice("dtype", DTYPES),
        layout=table.choice("layout", LAYOUTS, "contiguous"),
        tier=table.choice("tier", TIERS, "both"),
        hidden=table.flag(HIDDEN),
    )
    table.finish()
    return case


def _case_from_line(text: str, path: Path, where: str) -> Case:
    """One case on one line: "float16 1x1x1x64 gpu" is the table {shape = [1, 1, 1, 64], dtype =
    "float16", tier = "gpu"}, with layout and tier defaulting as they do there. A word may not
    repeat, so "strided contiguous" or "cpu gpu" fails rather than letting the last word win."""
    words = text.split()
    rest = words[2:]
    layouts, tiers = [w for w in rest if w in LAYOUTS], [w for w in rest if w in TIERS]
    hidden = rest.count(HIDDEN)
    head_ok = len(words) >= 2 and words[0] in DTYPES and re.fullmatch(r"[1-9]\d*(x[1-9]\d*)*", words[1])
    rest_ok = len(layouts) <= 1 and len(tiers) <= 1 and hidden <= 1 and len(layouts) + len(tiers) + hidden == len(rest)
    if not (head_ok and rest_ok):
        raise SpecError(f"{path}: [{where}] case {text!r}: expected a line {CASE_LINE}")
    shape = tuple(int(d) for d in words[1].split("x"))
    return Case(shape=shape, dtype=words[0], layout=(layouts or ["contiguous"])[0], tier=(tiers or ["both"])[0],
                hidden=bool(hidden))


def _cases(table: Table, key: str, default: Any = ...) -> tuple[Case, ...]:
    """A part's cases (or benchmarks), in order: each a line (see _case_from_line) or a table."""
    items = table.get(key, list, "a list of cases, each a line such as \"float32 129x515 strided\" or a table", default)
    cases = []
    for index, item in enumerate(items):
        where = table.within(f"{key}[{index}]")
        if isinstance(item, str):
            cases.append(_case_from_line(item, table.path, where))
        elif isinstance(item, dict):
            cases.append(_case(Table(item, table.path, where)))
        else:
            raise SpecError(f"{table.path}: [{where}] case {item!r}: expected a line {CASE_LINE} or a table")
    return tuple(cases)


def _tolerances(table: Table) -> dict[str, Tolerance]:
    result = {}
    for dtype in list(table.data):
        if dtype not in DTYPES:
            raise table.fail(dtype, f"a dtype table named one of {', '.join(DTYPES)}")
        sub = table.table(dtype)
        result[dtype] = Tolerance(rtol=sub.positive("rtol"), atol=sub.positive("atol"), norm=sub.positive("norm"))
        sub.finish()
    return result


def _performance(table: Table) -> Performance:
    tiers = table.get("tiers", list, "a list of [ratio, share] pairs, best first")
    ok = tiers and all(
        isinstance(t, list) and len(t) == 2 and all(isinstance(v, (int, float)) for v in t) and 0 < t[1] <= 1
        for t in tiers
    )
    if not ok or [t[0] for t in tiers] != sorted((t[0] for t in tiers), reverse=True):
        raise table.fail("tiers", "a list of [ratio, share] pairs with share in (0, 1], best ratio first")
    perf = Performance(
        repetitions=table.positive("repetitions", int),
        tiers=tuple((float(r), float(s)) for r, s in tiers),
        borderline=table.positive("borderline", (int, float), 0.05),
    )
    table.finish()
    return perf


def _check_functions(table: Table, part: Part, defined: frozenset[str]) -> None:
    """Every function the part calls is defined in reference.py: a misspelt or missing one fails
    here, naming the part, the key and what reference.py does define, not as an AttributeError
    in the middle of grading."""
    named = [(key, getattr(part, key)) for key in FUNCTIONS + CUDA_FUNCTIONS]
    if part.shown:
        named.append(("shown.function", part.shown.function))
    for key, name in named:
        if name is not None and name not in defined:
            public = ", ".join(sorted(n for n in defined if not n.startswith("_"))) or "no function"
            default = f" (a part that omits '{key}' calls '<part name>_{key}')" if "." not in key else ""
            raise SpecError(f"{table.path}: [{table.where}] key '{key}': reference.py defines no function {name!r}"
                            f"{default}; it defines {public}")  # fmt: skip


def _teaches(table: Table) -> tuple[str, ...]:
    expected = f"a list of what the part's kernels are read for, each one of {', '.join(TEACHES)}"
    found = table.get("teaches", list, expected, [])
    if not all(isinstance(item, str) and item in TEACHES for item in found):
        raise table.fail("teaches", expected)
    return tuple(found)


def _shown(table: Table) -> Shown:
    shown = Shown(label=table.get("label", str, "the name the report gives it"),
                  function=table.get("function", str, "a function name in reference.py"),
                  compiled=table.flag("compiled"))  # fmt: skip
    table.finish()
    return shown


def _part(table: Table, defined: frozenset[str]) -> Part:
    points = table.table("points")
    tolerance = _tolerances(table.table("tolerance"))
    cases = _cases(table, "cases")
    benchmarks = _cases(table, "benchmarks", [])
    performance = _performance(table.table("performance")) if "performance" in table.data else None
    part = Part(
        name=table.get("name", str, "a part name"),
        file=table.get("file", str, "a file name in the submission's assignment folder"),
        entry=table.get("entry", str, "the entry point's function name"),
        inputs=table.get("inputs", str, "a function name in reference.py"),
        reference=table.get("reference", str, "a function name in reference.py"),
        baseline=table.get("baseline", str, "a function name in reference.py"),
        traffic=table.get("traffic", str, "a function name in reference.py"),
        allowed_ops=tuple(table.get("allowed_ops", list, "a list of aten op names that the part allows", [])),
        kernel=table.choice("kernel", KERNELS, "triton"),
        correctness_points=points.positive("correctness"),
        performance_points=points.get("performance", (int, float), "a number of points", 0.0),
        tolerance=tolerance,
        cases=cases,
        performance=performance,
        benchmarks=benchmarks,
        arguments=table.get("arguments", str, "a function name in reference.py", None),
        output_shape=table.get("output_shape", str, "a function name in reference.py", None),
        not_implemented_code=table.get("not_implemented_code", int, "an integer return code", -1),
        repeats=table.positive("repeats", int, 1),
        max_kernels=table.positive("max_kernels", int, None),
        peak_memory=table.positive("peak_memory", (int, float), None),
        bonus=table.flag("bonus"),
        loads=table.choice("loads", LOADS, "any"),
        shown=_shown(table.table("shown")) if "shown" in table.data else None,
        teaches=_teaches(table),
    )
    points.finish()
    table.finish()
    if not cases:
        raise table.fail("cases", "at least one correctness case")
    if part.loads != "any" and part.kernel != "triton":
        raise table.fail("loads", f'"any" for kernel = "{part.kernel}": only Triton kernels are read for their loads')
    if part.is_cuda and not (part.arguments and part.output_shape):
        raise table.fail("arguments", "both 'arguments' and 'output_shape' (functions in reference.py) for kernel = \"cuda\"")
    _check_functions(table, part, defined)
    if benchmarks and performance is None:
        raise table.fail("performance", "a [parts.performance] table, since the part has benchmarks")
    if part.shown and not benchmarks:
        raise table.fail("shown", "no shown baseline, since the part has no benchmarks to time it on")
    for case in cases + benchmarks:
        if case.dtype not in tolerance:
            raise table.fail("tolerance", f"a [tolerance.{case.dtype}] table (a case uses {case.dtype})")
    return part


def _with_default_functions(table: Any) -> Any:
    """A part's table with each reference.py function it does not name named after the part
    (`rmsnorm_inputs` for a part "rmsnorm"), so a part names only the functions it shares with
    another part (a CUDA C part that calls the Triton part's `rmsnorm_inputs`, say)."""
    if not isinstance(table, dict) or not isinstance(table.get("name"), str):
        return table  # _part reports it
    keys = FUNCTIONS + (CUDA_FUNCTIONS if table.get("kernel") == "cuda" else ())
    return {**{key: f"{table['name']}_{key}" for key in keys}, **table}


def _inherit(parts: Any, path: Path) -> Any:
    """The parts' tables with `like = "NAME"` resolved: such a part starts as a copy of the
    earlier part NAME, and each key it sets replaces that key whole (a `cases` list replaces the
    list, a `tolerance` table the table). Two parts that differ in a key or two (a causal variant
    of the same entry point, say) then share one list of cases and tolerances. A copy calls the
    reference.py functions of the part it copies, defaults included, unless it names others."""
    if not isinstance(parts, list):
        return parts  # Table.tables reports it
    named: dict[str, dict] = {}
    resolved = []
    for index, table in enumerate(parts):
        if isinstance(table, dict) and "like" in table:
            base = named.get(table["like"]) if isinstance(table["like"], str) else None
            if base is None:
                raise SpecError(f"{path}: [parts[{index}]] key 'like': expected the name of an earlier part, "
                                f"one of {sorted(named)}, got {table['like']!r}")  # fmt: skip
            table = {**base, **{key: value for key, value in table.items() if key != "like"}}
        else:
            table = _with_default_functions(table)
        if isinstance(table, dict) and isinstance(table.get("name"), str):
            named[table["name"]] = table
        resolved.append(table)
    return resolved


def _reference_functions(directory: Path, path: Path) -> frozenset[str]:
    """The names of reference.py's top-level functions, read from its syntax tree: importing it
    would run `import torch` (seconds) in every process that loads an assignment, and run the
    file's code before anything else has been checked."""
    reference = directory / "reference.py"
    try:
        tree = ast.parse(reference.read_bytes(), filename=str(reference))
    except FileNotFoundError as error:
        raise SpecError(f"{path}: the assignment has no reference.py beside it") from error
    except (OSError, SyntaxError, ValueError) as error:
        raise SpecError(f"{reference}: cannot be parsed: {error}") from error
    return frozenset(node.name for node in tree.body if isinstance(node, ast.FunctionDef))


def load_assignment(directory: Path) -> Assignment:
    path = directory / "assignment.toml"
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise SpecError(f"{path}: cannot be read as TOML: {error}") from error
    if "parts" in data:
        data["parts"] = _inherit(data["parts"], path)
    defined = _reference_functions(directory, path)
    root = Table(data, path, "")
    head = root.table("assignment")
    parts = tuple(_part(t, defined) for t in root.tables("parts"))
    assignment = Assignment(
        name=directory.name,
        directory=directory,
        title=head.get("title", str, "a title"),
        seed=head.get("seed", int, "an integer seed"),
        cpu_timeout_s=head.positive("cpu_timeout_s"),
        gpu_timeout_s=head.positive("gpu_timeout_s"),
        parts=parts,
        host_memory_gib=head.positive("host_memory_gib", (int, float), 16.0),
        max_processes=head.positive("max_processes", int, 16),
        gpu_memory_gib=head.positive("gpu_memory_gib", (int, float), 40.0),
        scratch_gib=head.positive("scratch_gib", (int, float), 1.0),
    )
    head.finish()
    root.finish()
    names = [p.name for p in parts]
    if len(set(names)) != len(names):
        raise SpecError(f"{path}: [parts] names must be unique, got {names}")
    return assignment


def assignment_names(root: Path = REPO_ROOT) -> list[str]:
    """Every assignment, found by glob: a folder of assignments/ holding an assignment.toml."""
    return sorted(p.parent.name for p in (root / "assignments").glob("*/assignment.toml"))


def load_assignments(names: list[str] | None = None, root: Path = REPO_ROOT) -> list[Assignment]:
    known = assignment_names(root)
    unknown = [n for n in names or [] if n not in known]
    if unknown:
        raise KeyError(f"unknown assignment(s): {', '.join(unknown)}; known: {', '.join(known)}")
    return [load_assignment(root / "assignments" / n) for n in (names or known)]
