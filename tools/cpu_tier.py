"""The CPU tier's time for `solutions/`, against another commit's, on this machine.

    python tools/cpu_tier.py --against COMMIT [--rounds 2] [--dir cpu-tier]

Each commit's tree (`git archive`) grades its own `solutions/` with `grade` on the CPU tier,
every assignment, from cold: an empty HOME and XDG_CACHE_HOME of its own, so nothing compiled
before is found. The two take turns (COMMIT, HEAD, COMMIT, HEAD, ...) so that a machine that
grows busier or idler meanwhile weighs on both alike. Each grading leaves `<dir>/<label>-<k>/`
with its results.json, grade.log, began.json (the start and the load average then) and wall.json
(its seconds and exit status); the labels are the commits' short names. Then
`tools/measurements.py cpu-tier LABEL=<dir>/<label>-<k>/results.json ...` writes the table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _short(commit: str) -> str:
    return subprocess.run(["git", "rev-parse", "--short", commit], cwd=REPO, check=True, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


def _tree(commit: str, into: Path) -> Path:
    into.mkdir(parents=True)
    archive = subprocess.Popen(["git", "archive", commit], cwd=REPO, stdout=subprocess.PIPE)
    subprocess.run(["tar", "x", "-C", str(into)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"git archive {commit} failed")
    return into


def grade(tree: Path, out: Path) -> float:
    """One cold grading of `tree`'s solutions/ on the CPU tier; its wall seconds."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as home:
        began = time.time()
        (out / "began.json").write_text(json.dumps({"epoch": began, "load": os.getloadavg()[0]}))
        env = {**os.environ, "HOME": home, "XDG_CACHE_HOME": str(Path(home) / ".cache")}
        with open(out / "grade.log", "w") as log:
            done = subprocess.run([sys.executable, "-m", "grader", "grade", "--submission", "solutions", "--device", "cpu",
                                   "--json", str(out / "results.json"), "--html", os.devnull],
                                  cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        seconds = time.time() - began
    (out / "wall.json").write_text(json.dumps({"seconds": seconds, "exit": done.returncode}))
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the commit whose CPU tier HEAD's is compared with")
    parser.add_argument("--rounds", type=int, default=2, help="gradings of each commit, alternately")
    parser.add_argument("--dir", type=Path, default=Path("cpu-tier"), help="where each grading's files go")
    args = parser.parse_args(argv)
    labels = [_short(args.against), _short("HEAD")]
    with tempfile.TemporaryDirectory() as trees:
        found = {label: _tree(label, Path(trees) / label) for label in labels}
        for k in range(1, args.rounds + 1):
            for label in labels:
                seconds = grade(found[label], args.dir / f"{label}-{k}")
                print(f"{label}-{k}: {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
