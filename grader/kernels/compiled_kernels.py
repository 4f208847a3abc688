"""What the compiler made of each kernel a student launched, as the report and results.json show it.

Per kernel: registers and spilled bytes per thread, shared memory per block, warps, pipelining
stages, and the occupancy these allow on the grading GPU (occupancy.py); where the part's
assignment.toml says its lesson is about it (`teaches`), what the code is made of (tensor-core
instructions, 128-bit loads, shared-memory bank conflicts: ptx.py); and a one-line reading where
one applies. The figures come from the child (child/resources.py: the Triton kernels a call
launched, on both tiers) or from the build (cuda_resources.py: a CUDA C part's kernels).

Advice only: nothing here changes a verdict or a score. The child's figures are untrusted like
everything it sends, and a submission that lied about its registers would only mislead itself.
"""

from __future__ import annotations

import dataclasses

from grader.kernels import occupancy
from grader.messages.reports import Activity, KernelResources
from grader.judging.numerics import Verdict

SM = occupancy.SM90
GPU = "an H100 or H200 SM"
# Each reading's code, and the part's `teaches` entry it needs (None: always read).
READINGS = {"spills": None, "occupancy": None, "no_launch": None, "no_tensor_cores": "tensor_cores",
            "narrow_loads": "vector_loads", "bank_conflicts": "bank_conflicts"}  # fmt: skip


def launched(activity: Activity | None) -> list[KernelResources]:
    """The kernels a task's calls launched: on the GPU tier as the launch hook saw them; on the CPU
    tier as compiled for the GPU, leaving out configs that only an autotuner's trials launched."""
    if activity is None:
        return []
    if activity.resources:
        return _distinct(activity.resources)
    targets = [t for t in activity.targets if t.resources is not None]
    picked = [t for t in targets if not t.autotuned] or targets
    return _distinct([t.resources for t in picked])


def _distinct(found: list[KernelResources]) -> list[KernelResources]:
    seen: dict[tuple, KernelResources] = {}
    for resources in found:
        seen.setdefault(tuple(vars(resources).values()), resources)
    return list(seen.values())


def attach(verdict: Verdict, kernels: list[KernelResources], teaches: tuple[str, ...]) -> Verdict:
    """The verdict with each kernel's description under `kernels` in its metrics."""
    if not kernels:
        return verdict
    described = [describe(k, teaches) for k in kernels]
    return dataclasses.replace(verdict, metrics={**verdict.metrics, "kernels": described})


def describe(kernel: KernelResources, teaches: tuple[str, ...] = ()) -> dict:
    """One kernel's figures, occupancy, facts and readings, as plain data for results.json."""
    figures = ("registers", "spill_bytes", "shared_bytes", "threads", "num_stages")
    kernel = dataclasses.replace(kernel, **{name: max(getattr(kernel, name), 0) for name in figures})  # sent by a child
    warps = -(-kernel.threads // SM.warp_size) if kernel.threads else 0
    found = {"kernel": kernel.kernel, "file": kernel.file, "specialization": kernel.specialization,
             "registers": kernel.registers, "spill_bytes": kernel.spill_bytes, "shared_bytes": kernel.shared_bytes,
             "threads": kernel.threads, "warps": warps, "stages": kernel.num_stages, "gpu": GPU}  # fmt: skip
    readings: list[dict] = []
    if kernel.threads:
        fits = occupancy.occupancy(kernel.registers, kernel.threads, kernel.shared_bytes, SM)
        found["occupancy"] = fits.as_metrics()
        readings += _occupancy_readings(kernel, fits, warps)
    else:  # a CUDA kernel whose launch was not read: the bounds that hold for any block
        found["occupancy"] = {"warps_by_registers": occupancy.warps_allowed_by_registers(kernel.registers, SM),
                              "blocks_by_shared": occupancy.shared_limit(kernel.shared_bytes, SM)[0],
                              "max_warps_per_sm": SM.max_warps}  # fmt: skip
    if kernel.spill_bytes:
        readings.append(_reading("spills", f"spills {kernel.spill_bytes} bytes per thread to local memory: the tile is "
                                 f"too large for the registers (at most {SM.max_registers_per_thread} a thread); a "
                                 "smaller tile, or more warps sharing it, keeps it in registers"))  # fmt: skip
    facts, code_readings = _made_of(kernel, teaches)
    found["made_of"] = facts
    found["readings"] = readings + code_readings
    return found


def _reading(code: str, text: str) -> dict:
    return {"code": code, "text": text}


def _occupancy_readings(kernel: KernelResources, fits: occupancy.Occupancy, warps: int) -> list[dict]:
    if fits.blocks == 0:
        return [_reading("no_launch", f"cannot run on {GPU}: {fits.why_none}")]
    if "blocks" in fits.limited_by and fits.warps < SM.max_warps:
        return [_reading("occupancy", f"blocks of {warps} warp{'s' * (warps != 1)}: an SM runs at most {SM.max_blocks} "
                         f"blocks at once, so {fits.warps} of its {SM.max_warps} warps; more warps per block fill it")]
    limits = [name for name in ("registers", "shared memory") if name in fits.limited_by]
    if fits.blocks == 1 and limits:
        why = " and ".join(f"{kernel.registers} registers per thread" if name == "registers" else
                           f"{kernel.shared_bytes + SM.reserved_shared} bytes of shared memory per block" for name in limits)  # fmt: skip
        return [_reading("occupancy", f"{why} limit{'s' * (len(limits) == 1)} you to one block per SM ({fits.warps} of "
                         f"its {SM.max_warps} warps): while that block waits at a barrier or for memory, nothing else "
                         "runs there")]  # fmt: skip
    return []


def _made_of(kernel: KernelResources, teaches: tuple[str, ...]) -> tuple[list[str], list[dict]]:
    """What the code is made of, for what the part teaches, and the readings it calls for."""
    facts: list[str] = []
    readings: list[dict] = []
    if not kernel.read:
        return facts, readings
    if "tensor_cores" in teaches:
        if kernel.tensor_core_ops:
            facts.append(f"tensor cores: {kernel.tensor_core_ops} mma instruction(s)")
        elif kernel.sixteen_bit:
            readings.append(_reading("no_tensor_cores", "no tensor-core instruction (wgmma, mma) in its code: its "
                                     "float16 and bfloat16 products run on the CUDA cores, many times slower; multiply "
                                     "tiles with tl.dot"))  # fmt: skip
        else:
            facts.append("no tensor cores: float32 products in full precision run on the CUDA cores")
    if "vector_loads" in teaches and kernel.global_loads:
        facts.append(f"128-bit loads: {kernel.wide_loads} of {kernel.global_loads}")
        if not kernel.wide_loads:
            readings.append(_reading("narrow_loads", "no 128-bit load in its code: each load instruction moves 4 bytes "
                                     "(or 8) per thread; float4 loads move 16, a quarter of the instructions for the "
                                     "same bytes"))  # fmt: skip
    if "bank_conflicts" in teaches and kernel.shared_accesses:
        if kernel.conflicted:
            where = f" at line {kernel.worst_line}" if kernel.worst_line else ""
            apart = f" (neighbouring lanes {kernel.worst_stride} bytes apart)" if kernel.worst_stride else ""
            readings.append(_reading("bank_conflicts", f"its shared-memory {kernel.worst_kind}s{where} conflict "
                                     f"{kernel.worst_ways}-way on banks{apart}: each warp's access takes "
                                     f"{kernel.worst_ways} turns; pad each row of the tile by one element"))  # fmt: skip
        facts.append(f"shared memory: {kernel.conflicted} of {kernel.shared_accesses} accesses conflict on banks")
    return facts, readings


def for_report(tests: list) -> dict[str, list[dict]]:
    """Per assignment, each distinct kernel of its tests' metrics once, with the parts and cases
    that launched it: the report's table of compiled kernels."""
    rows: dict[str, dict[tuple, dict]] = {}
    for test in tests:
        for kernel in test.metrics.get("kernels", ()) if isinstance(test.metrics, dict) else ():
            key = (test.part, kernel.get("kernel"), kernel.get("specialization"), kernel.get("threads"),
                   kernel.get("registers"), kernel.get("shared_bytes"))  # fmt: skip
            row = rows.setdefault(test.assignment, {}).setdefault(key, {**kernel, "part": test.part, "cases": []})
            if test.kind != "build":
                row["cases"].append(test.name.split(": ", 1)[-1])
    return {assignment: list(found.values()) for assignment, found in rows.items()}
