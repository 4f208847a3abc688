"""Is the GPU grade the same every time? solutions/ graded alone, again and again, then several
gradings at once on one GPU with half the host's cores kept busy, and every timed ratio compared.

    python tools/steady_grade.py alone --runs 3 [--first K]           # every assignment, one grading after another
    python tools/steady_grade.py together --rounds 3 --gradings 4 \\
        --assignment gelu --assignment softmax --busy 0.5            # K gradings at once, R times
    python tools/steady_grade.py beside --cold flash_attention \
        --assignment gelu --assignment softmax [--niceness 0]         # graded again and again beside a cold grading
    python tools/steady_grade.py compare --json steady.json           # the figures, and whether they hold

Each grading is `python -m grader grade --submission solutions --device cuda`, a process of its own
started by its own shell, as a student's `make grade` in a terminal is: they share the GPU through
the machine's lock alone (grader/running/gpu_lock.py). Everything goes under --dir (default
steady-grade/): `alone-K/` and `together-R-K/`, each with results.json and wall.json, and
`busy.json` (how many cores spun, and for how long). `beside` grades the assignments again and
again while one grading of `--cold` compiles everything from an empty cache of its own on every
core (its precompile pass, its correctness child): `cold-nN/` and `beside-nN-K/`, where N is the
compilers' nice value (GRADER_COMPILER_NICENESS; 0 shows what the default of 10 buys). The comparison says, per grading, its points
and wall time and what it lost, and for every timed benchmark the median of its ratio over the
alone gradings and the largest move of any grading from it: at most 3% for the gradings alone and
5% for those together, with every point in each (issue 51's bar). Exit status 0 when that holds,
1 when not, 2 when nothing was graded.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ALONE_MOVE, TOGETHER_MOVE = 0.03, 0.05


def _command(out: Path, assignments: list[str]) -> list[str]:
    command = [sys.executable, "-m", "grader", "grade", "--submission", str(REPO / "solutions"), "--device", "cuda",
               "--json", str(out / "results.json"), "--html", str(out / "report.html")]  # fmt: skip
    return command + [flag for name in assignments for flag in ("--assignment", name)]


def _start(out: Path, assignments: list[str], env: dict | None = None) -> subprocess.Popen:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / "began.json").write_text(json.dumps({"epoch": time.time()}))
    log = open(out / "grade.log", "w")
    return subprocess.Popen(_command(out, assignments), cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, env={**os.environ, **(env or {})})  # fmt: skip


def _finish(process: subprocess.Popen, out: Path, report: Path | None = None) -> None:
    """Wait for a grading; its figures go to `report`/steady.jsonl at once, where a report folder is
    named (a device command stopped at its time limit keeps what finished before)."""
    process.wait()
    began = json.loads((out / "began.json").read_text())["epoch"]
    (out / "wall.json").write_text(json.dumps({"seconds": time.time() - began, "exit": process.returncode}))
    if report is not None and (out / "results.json").exists():
        report.mkdir(parents=True, exist_ok=True)
        with open(report / "steady.jsonl", "a") as lines:
            lines.write(json.dumps(_grading(out)) + "\n")


def _spin(until: float) -> None:
    while time.time() < until:
        pass


def alone(folder: Path, runs: int, assignments: list[str], first: int = 1, report: Path | None = None) -> None:
    for k in range(first, first + runs):
        out = folder / f"alone-{k}"
        _finish(_start(out, assignments), out, report)
        print(f"alone {k}: {json.loads((out / 'wall.json').read_text())['seconds']:.1f} s", flush=True)


def together(folder: Path, rounds: int, gradings: int, assignments: list[str], busy: float,
             report: Path | None = None) -> None:  # fmt: skip
    """`gradings` at once, `rounds` times, with `busy` of the cores spinning throughout."""
    cores = max(1, int((os.cpu_count() or 2) * busy)) if busy else 0
    spinners = [multiprocessing.Process(target=_spin, args=(time.time() + 3600,), daemon=True) for _ in range(cores)]
    began = time.time()
    for spinner in spinners:
        spinner.start()
    try:
        for r in range(1, rounds + 1):
            outs = [folder / f"together-{r}-{k}" for k in range(1, gradings + 1)]
            started = [(_start(out, assignments), out) for out in outs]
            for process, out in started:
                _finish(process, out, report)
            print(f"round {r}: {max(json.loads((o / 'wall.json').read_text())['seconds'] for o in outs):.1f} s",
                  flush=True)  # fmt: skip
    finally:
        for spinner in spinners:
            spinner.terminate()
    (folder / "busy.json").write_text(json.dumps({"cores": cores, "of": os.cpu_count(), "seconds": time.time() - began}))


def beside(folder: Path, cold: str, assignments: list[str], niceness: int | None, report: Path | None = None) -> None:
    """`assignments` graded one after another, as long as one grading of `cold` runs from an empty
    cache (its own XDG_CACHE_HOME) with the compilers at `niceness`."""
    nice = {"GRADER_COMPILER_NICENESS": str(niceness)} if niceness is not None else {}
    tag = f"n{niceness if niceness is not None else 'default'}"
    with tempfile.TemporaryDirectory() as cache:
        out = folder / f"cold-{tag}"
        compiling = _start(out, [cold], {"XDG_CACHE_HOME": cache, **nice})
        k = 0
        while compiling.poll() is None:
            k += 1
            mine = folder / f"beside-{tag}-{k}"
            _finish(_start(mine, assignments, nice), mine, report)
            print(f"beside {tag} {k}: {json.loads((mine / 'wall.json').read_text())['seconds']:.1f} s", flush=True)
            if not (mine / "results.json").exists():  # it could not grade: say so once, not in a loop
                print((mine / "grade.log").read_text()[-2000:], flush=True)
                break
        _finish(compiling, out, report)
    print(f"cold {cold} ({tag}): {json.loads((out / 'wall.json').read_text())['seconds']:.1f} s", flush=True)


def _grading(out: Path) -> dict:
    results = json.loads((out / "results.json").read_text())
    lost = [{"test": t["name"], "lost": t["max_score"] - t["score"], "reason": t["extra_data"].get("reason"),
             "output": t["output"][:300]} for t in results["tests"] if t["score"] < t["max_score"]]  # fmt: skip
    ratios, retaken, gated = {}, {}, []
    for test in results["tests"]:
        metrics = test["extra_data"].get("metrics", {})
        if test["extra_data"].get("kind") == "performance" and "ratio" in metrics:
            ratios[test["name"]] = metrics["ratio"]
            gated.append(bool(metrics.get("gated")))
            if metrics.get("retaken"):
                retaken[test["name"]] = metrics["retaken"]
    wall = json.loads((out / "wall.json").read_text())
    return {"grading": out.name, "score": results["score"], "every_point": not lost, "lost": lost,
            "wall_s": round(wall["seconds"], 1), "ratios": ratios, "retaken": retaken,
            "gated": f"{sum(gated)} of {len(gated)}", "phases": results["extra_data"].get("phases", ""),
            "benchmarks": benchmark_seconds(results)}  # fmt: skip


def benchmark_seconds(results: dict) -> dict:
    """Per assignment, where its benchmarks' seconds went: in all (`seconds`, the timed phase's
    exclusive hold but for its child's start), the timed calls' own GPU time (`timed`: each sample's
    event time, the student's and torch's), and the child's account of the rest (`harness_s`)."""
    found: dict[str, dict] = {}
    for test in results["tests"]:
        metrics = test["extra_data"].get("metrics", {})
        if test["extra_data"].get("kind") != "performance" or "samples" not in metrics:
            continue
        mine = found.setdefault(test["extra_data"]["assignment"], {"benchmarks": 0, "seconds": 0.0, "timed": 0.0,
                                                                    "harness_s": {}})  # fmt: skip
        mine["benchmarks"] += 1
        mine["seconds"] += metrics.get("seconds") or 0.0
        mine["timed"] += metrics["samples"] * (metrics["student_ms"] + metrics["baseline_ms"]) / 1e3
        for name, seconds in (metrics.get("harness_s") or {}).items():
            mine["harness_s"][name] = mine["harness_s"].get(name, 0.0) + seconds
    return {name: {**figures, "seconds": round(figures["seconds"], 2), "timed": round(figures["timed"], 2),
                   "harness_s": {k: round(v, 2) for k, v in figures["harness_s"].items()}}
            for name, figures in sorted(found.items())}  # fmt: skip


def compare(folder: Path, kept: Path | None = None) -> tuple[dict, bool]:
    """The figures of every grading under `folder`, or of the lines a report folder kept."""
    if kept is not None:
        kept = kept / "steady.jsonl" if kept.is_dir() else kept  # a report folder, or its lines
        gradings = [json.loads(line) for line in kept.read_text().splitlines() if line.strip()]
    else:
        gradings = [_grading(out) for out in sorted(folder.glob("*-*")) if (out / "results.json").exists()]
    if not gradings:
        raise SystemExit(2)
    alone_runs = [g for g in gradings if g["grading"].startswith("alone")]
    medians = {name: statistics.median(g["ratios"][name] for g in alone_runs if name in g["ratios"])
               for name in {n for g in alone_runs for n in g["ratios"]}}  # fmt: skip
    holds = True
    for g in gradings:
        moves = {name: ratio / medians[name] - 1 for name, ratio in g["ratios"].items() if name in medians}
        worst = max(moves, key=lambda name: abs(moves[name]), default=None)
        g["largest_move"] = {"benchmark": worst, "move": moves[worst]} if worst else None
        bar = ALONE_MOVE if g["grading"].startswith("alone") else TOGETHER_MOVE
        holds &= g["every_point"] and (worst is None or abs(moves[worst]) <= bar)
    busy = json.loads((folder / "busy.json").read_text()) if (folder / "busy.json").exists() else None
    return {"gradings": gradings, "alone_medians": medians, "busy": busy}, holds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("alone", "together", "beside", "compare"))
    parser.add_argument("--dir", type=Path, default=REPO / "steady-grade")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--first", type=int, default=1, help="the number of the first alone grading (alone-K)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gradings", type=int, default=4)
    parser.add_argument("--assignment", action="append", default=[])
    parser.add_argument("--busy", type=float, default=0.5, help="share of the cores kept spinning (together)")
    parser.add_argument("--cold", help="beside: the assignment graded from an empty cache meanwhile")
    parser.add_argument("--niceness", type=int, help="beside: the compilers' nice value (default: the grader's)")
    parser.add_argument("--json", type=Path, help="where compare writes its figures")
    parser.add_argument("--report", type=Path, help="a folder where each grading's figures are written as it ends")
    parser.add_argument("--kept", type=Path, help="compare the lines of a report folder's steady.jsonl (the folder or the file) instead")
    args = parser.parse_args()
    if args.what == "alone":
        alone(args.dir, args.runs, args.assignment, args.first, args.report)
    elif args.what == "beside":
        beside(args.dir, args.cold, args.assignment, args.niceness, args.report)
    elif args.what == "together":
        together(args.dir, args.rounds, args.gradings, args.assignment, args.busy, args.report)
    else:
        summary, holds = compare(args.dir, args.kept)
        text = json.dumps(summary, indent=1)
        if args.json:
            args.json.write_text(text)
        for g in summary["gradings"]:
            move = g["largest_move"]
            moved = f", largest move {move['move']:+.1%} ({move['benchmark']})" if move else ""
            print(f"{g['grading']}: {g['score']:g} points, every point: {g['every_point']}, {g['wall_s']} s{moved}")
            for lost in g["lost"]:
                print(f"   lost {lost['lost']:g} on {lost['test']}: {lost['reason']}: {lost['output'][:160]}")
        return 0 if holds else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
