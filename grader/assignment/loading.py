"""Reading assignments/<name>/assignment.toml into the typed tree of spec.py: every key checked for
its type (toml_table.py), a key nobody reads reported as unknown, parts inheriting from the
assignment, each named reference.py function checked to exist, and every error naming the file,
the table and the key."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path
from typing import Any

from grader.assignment.spec import (CASE_LINE, CUDA_FUNCTIONS, DTYPES, FUNCTIONS, HIDDEN, KERNELS, LAYOUTS, LOADS,
                                    REPO_ROOT, TEACHES, TIERS, Assignment, Case, Part, Performance, Shown, Tolerance)
from grader.assignment.toml_table import SpecError, Table


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
