"""Nsight Compute's speed-of-light summary of each profiled kernel, read from its CSV.

`ncu --section SpeedOfLight` measures, for each kernel, how busy the GPU's units were as a share of
what they can sustain: the SMs (compute), and memory as a whole and by level (DRAM, L2, L1). A
kernel near the peak of one unit is bound by it (the roofline); one far from every peak waits on
latency (too little work in flight: see its occupancy). The report names the busiest unit and
says which of these it is. `ncu --import REPORT --csv --page raw --print-units base` writes one
header row of metric names, one row of units, then a row per kernel; the names are Nsight
Compute's own (its Metrics Reference and the SpeedOfLight section file).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

DURATION = "gpu__time_duration.sum"
COMPUTE = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
# Memory by level, busiest first in a tie; older versions call DRAM's gpu__dram_throughput.
LEVELS = {"DRAM": ("dram__throughput.avg.pct_of_peak_sustained_elapsed",
                   "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
          "L2": ("lts__throughput.avg.pct_of_peak_sustained_elapsed",),
          "L1": ("l1tex__throughput.avg.pct_of_peak_sustained_active",
                 "l1tex__throughput.avg.pct_of_peak_sustained_elapsed")}  # fmt: skip
# Asked for besides the section, so that each is in the CSV whatever the section holds in a version.
METRICS = (DURATION, COMPUTE, MEMORY, *(names[0] for names in LEVELS.values()))
BOUND = 60.0  # percent of a unit's peak from which the kernel is read as bound by it
NEAR_PEAK = 80.0
_TO_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}


@dataclass
class KernelProfile:
    kernel: str
    duration_ns: float | None
    compute_pct: float | None  # SM throughput, % of peak
    memory_pct: float | None  # memory throughput (the busiest memory unit), % of peak
    levels: dict[str, float]  # memory level -> % of its peak
    block: str = ""
    grid: str = ""

    @property
    def limit(self) -> str:
        """The busiest unit: "compute", or the memory level ("DRAM", "L2", "L1"), or "" unknown."""
        if self.compute_pct is None and self.memory_pct is None:
            return ""
        if (self.compute_pct or 0.0) > self._memory_busiest:
            return "compute"
        return max(self.levels, key=lambda level: self.levels[level]) if self.levels else "memory"

    @property
    def _memory_busiest(self) -> float:
        """The busiest memory unit's share of its peak: a level's own figure can pass the section's
        memory throughput (on an H200 a row-wise kernel's L2 read 86% where memory throughput read 54%)."""
        return max([self.memory_pct or 0.0, *self.levels.values()])

    @property
    def busiest(self) -> float:
        """The busiest unit's share of its peak, compute or memory."""
        return max(self.compute_pct or 0.0, self._memory_busiest)

    @property
    def verdict(self) -> str:
        """The reading in a few words, for a narrow table: near the roofline, some headroom, latency-bound."""
        if self.busiest >= NEAR_PEAK:
            return "near the roofline"
        return "some headroom" if self.busiest >= BOUND else "latency-bound"

    @property
    def reading(self) -> str:
        unit = "the SMs" if self.limit == "compute" else f"{self.limit} bandwidth" if self.limit else "no unit"
        if self.verdict == "near the roofline":
            return f"bound by {unit}, at {self.busiest:.0f}% of its peak: near the roofline; only less work there makes it faster"
        if self.verdict == "some headroom":
            return f"bound by {unit}, at {self.busiest:.0f}% of its peak: some headroom left"
        return (f"no unit above {self.busiest:.0f}% of its peak: latency-bound, too little work in flight to keep the "
                "GPU busy (more warps per SM, more loads in flight per warp, or a larger grid)")

    def as_dict(self) -> dict:
        return {"kernel": self.kernel, "duration_ns": self.duration_ns, "compute_pct": self.compute_pct,
                "memory_pct": self.memory_pct, "levels": self.levels, "limit": self.limit, "reading": self.reading,
                "verdict": self.verdict, "block": self.block, "grid": self.grid}  # fmt: skip


def parse(text: str) -> list[KernelProfile]:
    """Every kernel row of `ncu --csv --page raw` output (lines before its header are ncu's notes)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, units = rows[0], rows[1] if len(rows) > 1 else []
    column = {name: index for index, name in enumerate(header)}
    unit = units[column[DURATION]] if DURATION in column and len(units) == len(header) else "nsecond"
    return [_kernel(dict(zip(header, row)), unit) for row in rows[2:]
            if len(row) == len(header) and row[column.get("Kernel Name", 0)]]  # fmt: skip


def _kernel(row: dict[str, str], unit: str) -> KernelProfile:
    """One kernel's row, by metric name; `unit` is the duration's."""

    def value(*names: str) -> float | None:
        return next((number for name in names if (number := _number(row.get(name, ""))) is not None), None)

    duration = value(DURATION)
    levels = {level: found for level, names in LEVELS.items() if (found := value(*names)) is not None}
    return KernelProfile(kernel=row.get("Kernel Name", ""),
                         duration_ns=duration * _TO_NS.get(unit, 1.0) if duration is not None else None,
                         compute_pct=value(COMPUTE), memory_pct=value(MEMORY), levels=levels,
                         block=row.get("Block Size", ""), grid=row.get("Grid Size", ""))  # fmt: skip


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None
