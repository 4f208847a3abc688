"""solutions/ graded twice on one GPU, every assignment at once: caches cold, then warm.

    python tools/warm_parity.py --pass cold      # an empty cache: everything compiles and autotunes
    python tools/warm_parity.py --pass warm      # again, finding what the cold pass compiled
    python tools/warm_parity.py --compare [--json FILE]

Each pass runs `python -m grader grade --submission solutions --device cuda` with the compilers'
cache (compile_cache.py) under --dir (default warm-parity/), keeps results.json and its wall time;
a pass may run alone (one device command each). The comparison says:

- each pass's wall time (the throughput issue asks for at most 120 s);
- whether both earned every point;
- every timed benchmark's ratio in both passes, and the largest move (at most 3%).

Exit status 0 when all three hold, 1 when one does not, 2 when a pass is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from batch_parity import test_ratios

REPO = Path(__file__).resolve().parents[1]
LIMIT_S = 120.0


def grade(folder: Path, which: str, device: str) -> float:
    out, cache = folder / which, folder / "cache"
    shutil.rmtree(out, ignore_errors=True)
    if which == "cold":
        shutil.rmtree(cache, ignore_errors=True)
    out.mkdir(parents=True)
    command = [sys.executable, "-m", "grader", "grade", "--submission", str(REPO / "solutions"), "--device", device,
               "--json", str(out / "results.json"), "--html", str(out / "report.html")]  # fmt: skip
    started = time.monotonic()
    if subprocess.run(command, cwd=REPO, check=False, env={**os.environ, "XDG_CACHE_HOME": str(cache)}).returncode:
        raise SystemExit(f"the grading did not run: {' '.join(command)}")
    seconds = time.monotonic() - started
    (out / "wall.json").write_text(json.dumps({"seconds": seconds}))
    return seconds


def compare(folder: Path) -> tuple[dict, bool]:
    passes = {}
    for which in ("cold", "warm"):
        results = json.loads((folder / which / "results.json").read_text())
        passes[which] = {
            "wall_s": json.loads((folder / which / "wall.json").read_text())["seconds"],
            "every_point": all(t["score"] == t["max_score"] for t in results["tests"]),
            "score": results["score"],
            "phases": results["extra_data"].get("phases", ""),
        }  # fmt: skip
    cold, warm = (test_ratios(folder / which / "results.json") for which in ("cold", "warm"))
    table = [{"benchmark": name, "cold": cold[name], "warm": warm.get(name),
              "moved": warm[name] / cold[name] - 1 if name in warm else None} for name in sorted(cold)]  # fmt: skip
    worst = max((abs(row["moved"]) for row in table if row["moved"] is not None), default=0.0)
    complete = set(cold) == set(warm)
    summary = {"passes": passes, "largest_ratio_move": worst, "timed_in_both": complete, "ratios": table}
    holds = (passes["warm"]["wall_s"] <= LIMIT_S and all(p["every_point"] for p in passes.values())
             and complete and worst <= 0.03)  # fmt: skip
    return summary, holds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=REPO / "warm-parity")
    parser.add_argument("--pass", dest="which", choices=("cold", "warm"))
    parser.add_argument("--compare", action="store_true")
    parser.add_argument("--device", default="cuda", help="cpu tries the passes out where there is no GPU")
    parser.add_argument("--json", type=Path, help="write the comparison here")
    args = parser.parse_args()
    if args.which:
        print(f"{args.which} pass: {grade(args.dir, args.which, args.device):.1f} s")
    if not args.compare:
        return 0
    if not all((args.dir / which / "wall.json").exists() for which in ("cold", "warm")):
        print("the comparison needs both passes")
        return 2
    summary, holds = compare(args.dir)
    for row in summary["ratios"]:
        moved = f"{row['moved']:+.1%}" if row["moved"] is not None else "not timed"
        print(f"  {row['benchmark']:64s} {row['cold']:.3f} {row['warm'] or 0:.3f} {moved}")
    for which, found in summary["passes"].items():
        print(f"{which}: {found['wall_s']:.1f} s, score {found['score']}, every point: {found['every_point']}")
        print(f"  {found['phases']}")
    print(f"largest ratio move {summary['largest_ratio_move']:.1%}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
