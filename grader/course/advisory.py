"""A class graded on the CPU tier: advice, never grades.

Without a GPU nothing is timed (speed is `no_gpu`), CUDA C parts are compile-checked and never
run, and bfloat16 cases are left to the GPU: a working CUDA kernel earns 0 there. Such a
batch says so in every output: each student's report and results.json, a `tier` column in
grades.csv, the top of the class page and the terminal. Its points are not exported to Canvas
unless the TA asks (`batch --advisory`), and then under columns of their own, named as advisory,
so that Canvas makes new columns beside the real assignments' and never fills those.
"""

from __future__ import annotations

TIER_COLUMN = "tier"  # grades.csv's column, on the CPU tier only
TIER_CELL = "CPU (advisory)"
STUDENT_NOTE = ("Graded on the CPU tier, without a GPU: this is advice, not your grade. Speed and CUDA C "
                "parts are not graded here; the course's grade comes from a GPU.")  # fmt: skip
CLASS_WARNING = ("This class was graded on the CPU tier (no GPU): its points are advice, not grades. Nothing was "
                 "timed and no CUDA C part ran, so those points show as not graded (0). Grade on a GPU for the "
                 "grades that count.")  # fmt: skip
CANVAS_REFUSED = ("canvas.csv was not written: this batch graded on the CPU tier, whose points are advice, not "
                  "grades (no speed, no CUDA C run). Grade on a GPU to export grades, or pass --advisory to export "
                  "these points anyway, under columns marked advisory.")  # fmt: skip


def is_advisory(devices: set[str]) -> bool:
    """Whether grades made on these devices are advice: any of them was graded without a GPU."""
    return any(device != "cuda" for device in devices)


def canvas_header(assignment: str) -> str:
    """An advisory column's header: a name of its own, so Canvas makes a new column for it and
    leaves the assignment's own column as it was."""
    return f"{assignment} (CPU tier, advisory)"
