"""One grading's timeline from the GPU lock's hold log (GRADER_GPU_LOCK_LOG, gpu_lock.py): each hold
(when it was asked for, got, let go) and each mark (a grading's moments between holds: gpu_lock.note),
in seconds from the grading's start, with the sums that say where a GPU grading waited.

    tools/hold_timeline.py HOLDS_LOG --began EPOCH [--seconds WALL]
    tools/hold_timeline.py HOLDS_LOG --folder steady-grade/alone-2    (its began.json and wall.json)

Only the lines that began within the grading (from EPOCH to EPOCH + WALL, where given) are read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def lines_of(log: str, began: float, seconds: float | None = None) -> list[dict]:
    """The log's holds and marks that began within the grading, in the order they were asked for."""
    found = []
    for line in log.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 6:
            continue
        how, asked, got, released, pid, label = fields
        asked, got, released = float(asked) - began, float(got) - began, float(released) - began
        if asked < -0.001 or (seconds is not None and asked > seconds + 1.0):  # the log keeps milliseconds
            continue
        found.append({"how": how, "asked": asked, "got": got, "released": released, "pid": int(pid), "label": label})
    return sorted(found, key=lambda held: held["asked"])


def summary(held: list[dict]) -> dict:
    """The grading's first hold, its first timed phase, and the seconds of its timed phases
    (exclusive holds) and of their sendings."""
    holds = [h for h in held if h["how"] != "mark"]
    timed = [h for h in holds if h["how"] == "exclusive"]
    sent = [h for h in holds if h["label"].endswith(" sending")]
    first = min((h["got"] for h in holds), default=None)
    first_timed = min((h["got"] for h in timed), default=None)
    return {"first_hold_s": None if first is None else round(first, 2),
            "first_timed_s": None if first_timed is None else round(first_timed, 2),
            "timed_s": round(sum(h["released"] - h["got"] for h in timed), 2),
            "sendings_s": round(sum(h["released"] - h["got"] for h in sent), 2)}  # fmt: skip


def render(held: list[dict]) -> str:
    rows = []
    for h in held:
        if h["how"] == "mark":
            rows.append(f"{'mark':9} {h['asked']:7.2f} {'':31} {h['label']}")
        else:
            rows.append(f"{h['how']:9} {h['asked']:7.2f} got {h['got']:7.2f} end {h['released']:7.2f} "
                        f"({h['released'] - h['got']:5.2f} s) {h['label']}")  # fmt: skip
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--began", type=float, help="the grading's start, in seconds since the epoch")
    parser.add_argument("--seconds", type=float, help="the grading's wall time")
    parser.add_argument("--folder", type=Path, help="a tools/steady_grade.py grading's folder (began.json, wall.json)")
    args = parser.parse_args(argv)
    began, seconds = args.began, args.seconds
    if args.folder is not None:
        began = json.loads((args.folder / "began.json").read_text())["epoch"]
        seconds = json.loads((args.folder / "wall.json").read_text())["seconds"]
    if began is None:
        parser.error("give --began or --folder")
    held = lines_of(args.log.read_text(), began, seconds)
    print(render(held))
    print(json.dumps(summary(held)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
