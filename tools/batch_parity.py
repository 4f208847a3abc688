"""A class of 20 graded twice on one GPU: one grading at a time, then with workers sharing the GPU.

    python tools/batch_parity.py --pass serial            # python -m grader batch --workers 1
    python tools/batch_parity.py --pass shared --workers 4
    python tools/batch_parity.py --compare                # both passes' outputs, side by side

The class is built under --dir (default batch-parity/) from this repository, for one assignment
(vector_add by default, or gelu): copies of the solution (each student's a line apart, so each has a
submission hash of its own), the starter, the known-wrong and hostile submissions named below
(tests/submissions, their edits made), a slow one and an autotuned one (edits of the solution
written here), and the public kernel of tests/corpus. Each pass grades it with
`python -m grader batch --device cuda` into a fresh folder and keeps its wall time; a pass may run
alone (one device command each). When both passes are there, the comparison says:

- the speed-up of the shared pass over the serial one (the issue asks for at least 3x);
- whether grades.csv is the same, student by student;
- every timed benchmark's ratio to its baseline in both passes, and the largest move (at most 3%);
- from the shared pass's hold log (kept beside its folder), how long it would have taken with no gap
  between its timed phases (`no_gap_bound`): the best speed-up any schedule could give it on one GPU.

Exit status 0 when the first three hold, 1 when one does not, 2 when a pass is missing.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from conftest import known_wrong  # noqa: E402  (the known-wrong submissions' edits, as the tests make them)

KNOWN_WRONG = {
    "vector_add": ["no_tail_mask", "tail_block_copy_paste", "returns_input", "caches_by_shape", "stack_and_sum",
                   "torch_in_kernel_body", "segfault"],
    "gelu": ["no_tail_mask", "erf_gelu", "tanh_overflow", "torch_gelu", "unfused_chain", "two_kernels",
             "cuda_no_tail"],
}  # fmt: skip
CORPUS = {"vector_add": "triton_tutorial_vector_add", "gelu": "attorch_gelu"}
SOLUTION_COPIES = 8
STARTERS = 2

# Two honest students written as edits of the solution: small blocks (correct, slow) and an
# autotuned launch (correct; its first call times every config).
VARIANTS = {
    "vector_add": {
        "slow_small_blocks": [("    block_size = 1024\n", "    block_size = 32\n")],
        "autotuned": [
            ("def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n",
             "add_kernel_tuned = triton.autotune(\n"
             "    configs=[triton.Config({'BLOCK_SIZE': b}, num_warps=w) for b, w in ((512, 4), (1024, 4), (2048, 8), (4096, 8))],\n"
             "    key=['n_elements'],\n"
             ")(add_kernel)\n\n\n"
             "def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n"),
            ("    block_size = 1024\n    grid = (triton.cdiv(n_elements, block_size),)\n"
             "    add_kernel[grid](x, y, out, n_elements, BLOCK_SIZE=block_size)\n",
             "    grid = lambda meta: (triton.cdiv(n_elements, meta['BLOCK_SIZE']),)\n"
             "    add_kernel_tuned[grid](x, y, out, n_elements)\n"),
        ],
    },
    "gelu": {
        "slow_small_blocks": [("BLOCK_SIZE = 4096\n", "BLOCK_SIZE = 128\n")],
        "autotuned": [
            ("def gelu(x: torch.Tensor) -> torch.Tensor:\n",
             "gelu_kernel_tuned = triton.autotune(\n"
             "    configs=[triton.Config({'BLOCK_SIZE': b}, num_warps=w) for b, w in ((1024, 4), (2048, 8), (4096, 8), (8192, 16))],\n"
             "    key=['n_elements'],\n"
             ")(gelu_kernel)\n\n\n"
             "def gelu(x: torch.Tensor) -> torch.Tensor:\n"),
            ("    gelu_kernel[grid](x, out, n_elements, BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)\n",
             "    gelu_kernel_tuned[lambda meta: (triton.cdiv(n_elements, meta['BLOCK_SIZE']),)](x, out, n_elements)\n"),
        ],
    },
}  # fmt: skip


def edited(source: Path, destination: Path, edits: list[tuple[str, str]], first_line: str = "") -> None:
    """A copy of `source` with each (old, new) made in the one .py file that holds `old` once."""
    shutil.copytree(source, destination, ignore=shutil.ignore_patterns("__pycache__"))
    files = {path: path.read_text() for path in destination.glob("*.py")}
    for old, new in edits:
        holders = [path for path, text in files.items() if old in text]
        assert len(holders) == 1 and files[holders[0]].count(old) == 1, f"{source}: {old!r} is not found once"
        files[holders[0]] = files[holders[0]].replace(old, new)
    for path, text in files.items():
        path.write_text(first_line + text)


def build_class(folder: Path, assignment: str) -> list[str]:
    """Twenty students, one folder each, laid out like starter/; returns their names."""
    if folder.exists():
        return sorted(p.name for p in folder.iterdir())
    scratch = folder.parent / "known-wrong"
    solution = REPO / "solutions" / assignment
    for i in range(1, SOLUTION_COPIES + 1):
        edited(solution, folder / f"solution_{i:02d}" / assignment, [], f"# student {i}\n")
    for i in range(1, STARTERS + 1):
        edited(REPO / "starter" / assignment, folder / f"starter_{i:02d}" / assignment, [], f"# student {i}\n")
    for name in KNOWN_WRONG[assignment]:
        tree = known_wrong(REPO / "tests" / "submissions" / assignment / name, scratch)
        shutil.copytree(tree / assignment, folder / name / assignment)
    for name, edits in VARIANTS[assignment].items():
        edited(solution, folder / name / assignment, edits)
    shutil.copytree(REPO / "tests" / "corpus" / CORPUS[assignment] / assignment, folder / "corpus_tutorial" / assignment)
    shutil.rmtree(scratch, ignore_errors=True)
    return sorted(p.name for p in folder.iterdir())


def grade(folder: Path, out: Path, assignment: str, workers: int, device: str) -> float:
    """One pass, with caches cold: compiled kernels go to a cache of the pass's own, emptied first
    (a pass that found the other's would be faster for it)."""
    cache = out.with_name(f"{out.name}-cache")
    for stale in (out, cache):
        shutil.rmtree(stale, ignore_errors=True)
    command = [sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), "--assignment", assignment,
               "--device", device, "--workers", str(workers)]  # fmt: skip
    # The GPU lock's hold log (a pass that shares a GPU writes one), unless one was asked for elsewhere.
    holds = Path(os.environ.get("GRADER_GPU_LOCK_LOG") or out.with_name(f"{out.name}-holds.log"))
    holds.unlink(missing_ok=True)
    started, began = time.monotonic(), time.time()
    # Exit status 1 only says that some grading failed inside the grader: the comparison shows it.
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "GRADER_GPU_LOCK_LOG": str(holds)}
    if subprocess.run(command, cwd=REPO, check=False, env=env).returncode not in (0, 1):
        raise SystemExit(f"the batch did not run: {' '.join(command)}")
    seconds = time.monotonic() - started
    # The epoch times place the pass beside the GPU lock's hold log.
    walls = {"seconds": seconds, "workers": workers, "began": began, "ended": time.time(), "holds": str(holds)}
    (out / "wall.json").write_text(json.dumps(walls))
    return seconds


def rows(out: Path) -> dict[str, list[str]]:
    with (out / "grades.csv").open() as file:
        return {row[0]: row[1:] for row in list(csv.reader(file))[1:]}


def test_ratios(results: Path) -> dict[str, float]:
    """Each timed benchmark's ratio to its baseline in one results.json, by test name."""
    found = {}
    for test in json.loads(results.read_text())["tests"]:
        metrics = test.get("extra_data", {}).get("metrics", {})
        if test["extra_data"].get("kind") == "performance" and "ratio" in metrics:
            found[test["name"]] = metrics["ratio"]
    return found


def ratios(out: Path) -> dict[tuple[str, str], float]:
    return {(results.parent.name, name): ratio for results in out.glob("*/results.json")
            for name, ratio in test_ratios(results).items()}  # fmt: skip


def waiting(out: Path) -> float:
    """Seconds the gradings of a pass spent waiting for the GPU's lock, from their phases lines."""
    total = 0.0
    for results in out.glob("*/results.json"):
        phases = json.loads(results.read_text()).get("extra_data", {}).get("phases", "")
        for piece in phases.replace(";", ",").split(","):
            if piece.split()[:1] == ["waiting"]:
                total += float(piece.split()[1])
    return total


def no_gap_bound(wall: dict) -> dict | None:
    """What a shared pass on one GPU would have taken with no gap between its timed phases, worked
    out from its hold log: a timed phase starts only when no correctness run holds the GPU, and no
    other starts until the child that ran it has sent its outputs and ended. So a pass lasts at
    least until its first timed phase, plus every timed phase's hold, plus every sending but the
    last, plus what came after the last timed phase (its sending, its judging, the batch's end).
    None where the pass kept no log, or timed nothing."""
    log = Path(wall["holds"]) if wall.get("holds") else None
    if log is None or not log.is_file():
        return None
    timed, sendings = [], []
    for line in log.read_text().splitlines():
        how, _asked, got, released, _pid, *label = line.split()
        if how == "exclusive":
            timed.append((float(got) - wall["began"], float(released) - wall["began"]))
        elif " ".join(label).endswith(" sending"):
            sendings.append((float(got), float(released) - float(got)))
    if not timed:
        return None
    timed.sort()
    sent = [seconds for _, seconds in sorted(sendings)[:-1]]
    parts = {"first_timed_s": timed[0][0], "timed_s": sum(end - start for start, end in timed),
             "sendings_but_the_last_s": sum(sent), "after_the_last_timed_s": wall["seconds"] - timed[-1][1]}  # fmt: skip
    return {**parts, "timed_phases": len(timed), "seconds": sum(parts.values())}


def compare(serial: Path, shared: Path) -> tuple[dict, bool]:
    walls = {name: json.loads((out / "wall.json").read_text()) for name, out in (("serial", serial), ("shared", shared))}
    speedup = walls["serial"]["seconds"] / walls["shared"]["seconds"]
    same_grades = rows(serial) == rows(shared)
    a, b = ratios(serial), ratios(shared)
    table = [{"student": s, "benchmark": t, "serial": a[(s, t)], "shared": b.get((s, t)),
              "moved": (b[(s, t)] / a[(s, t)] - 1) if (s, t) in b else None} for s, t in sorted(a)]  # fmt: skip
    moves = [abs(row["moved"]) for row in table if row["moved"] is not None]
    complete = set(a) == set(b)
    worst = max(moves, default=0.0)
    summary = {
        "walls": walls, "speedup": speedup, "same_grades_csv": same_grades, "timed_in_both": complete,
        "largest_ratio_move": worst, "waiting_s": {"serial": waiting(serial), "shared": waiting(shared)},
        "no_gap_bound": no_gap_bound(walls["shared"]), "ratios": table,
    }  # fmt: skip
    return summary, speedup >= 3.0 and same_grades and complete and worst <= 0.03


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=REPO / "batch-parity")
    parser.add_argument("--assignment", default="vector_add", choices=sorted(KNOWN_WRONG))
    parser.add_argument("--pass", dest="which", choices=("serial", "shared"))
    parser.add_argument("--workers", type=int, default=4, help="workers of the shared pass")
    parser.add_argument("--compare", action="store_true")
    parser.add_argument("--device", default="cuda", help="cpu tries the passes out where there is no GPU")
    parser.add_argument("--json", type=Path, help="write the comparison here")
    args = parser.parse_args()
    students = build_class(args.dir / "class", args.assignment)
    print(f"{len(students)} students: {', '.join(students)}")
    if args.which:
        workers = 1 if args.which == "serial" else args.workers
        seconds = grade(args.dir / "class", args.dir / args.which, args.assignment, workers, args.device)
        print(f"{args.which} pass (--workers {workers}): {seconds:.1f} s")
    if not args.compare:
        return 0
    if not all((args.dir / name / "wall.json").exists() for name in ("serial", "shared")):
        print("the comparison needs both passes")
        return 2
    summary, met = compare(args.dir / "serial", args.dir / "shared")
    for row in summary["ratios"]:
        moved = f"{row['moved']:+.1%}" if row["moved"] is not None else "not timed"
        shared = f"{row['shared']:.3f}" if row["shared"] is not None else "-"
        print(f"  {row['student']:24s} {row['benchmark']:48s} {row['serial']:.3f} {shared:>6s} {moved}")
    walls = summary["walls"]
    print(f"serial {walls['serial']['seconds']:.1f} s, shared ({walls['shared']['workers']} workers) "
          f"{walls['shared']['seconds']:.1f} s: {summary['speedup']:.2f}x; grades.csv the same: "
          f"{summary['same_grades_csv']}; largest ratio move {summary['largest_ratio_move']:.1%}; "
          f"waiting for the lock {summary['waiting_s']['shared']:.1f} s")  # fmt: skip
    bound = summary["no_gap_bound"]
    if bound:
        print(f"with no gap between its {bound['timed_phases']} timed phases (first at {bound['first_timed_s']:.1f} s, "
              f"{bound['timed_s']:.1f} s held alone, sendings {bound['sendings_but_the_last_s']:.1f} s, then "
              f"{bound['after_the_last_timed_s']:.1f} s) the shared pass would take {bound['seconds']:.1f} s: "
              f"{walls['serial']['seconds'] / bound['seconds']:.2f}x at best on one GPU")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
