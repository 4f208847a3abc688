"""Where a timing child's repetitions spend their time, from py-spy's raw samples of a grading.

    py-spy record --subprocesses --idle --rate 250 --format raw -o spy.txt -- python -m grader grade ...
    python tools/spy_summary.py spy.txt

py-spy samples the grading and its children, sandboxed ones included (it reads their memory from
outside). This keeps the samples of the timing children's main threads inside a function of
grader/child/timing.py (`--inside`, `_round` by default: the repetitions) and counts them by the
frame just below it (make_inputs, _timed_call, agrees...) and by the innermost frame, so the
harness's own cost per repetition can be read part by part. With `--idle`, waits (a synchronize,
a lock) are counted where they wait.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

FRAME = re.compile(r"^(?P<name>[^ ]+) \((?P<file>[^:]+):(?P<line>\d+)\)$")
PROCESS = re.compile(r'process \d+:"[^"]*";?')  # a command line may hold ';' of its own (python -c)


def frames(stack: str) -> list[str]:
    """A raw line's frames, outermost first, without the process entries py-spy puts in front."""
    return [f for f in PROCESS.sub("", stack).split(";") if f and not f.startswith("thread ")]


def summarize(lines: list[str], inside: str) -> tuple[Counter, Counter, int]:
    below: Counter = Counter()
    leaves: Counter = Counter()
    total = 0
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if "grader.child.main" not in stack or not count.isdigit():
            continue
        found = frames(stack)
        names = [(FRAME.match(f) or FRAME.match("? (?:0)")).group("name") for f in found]
        if inside not in names:
            continue
        at = len(names) - 1 - names[::-1].index(inside)
        n = int(count)
        total += n
        below[found[at + 1] if at + 1 < len(found) else "(in it)"] += n
        leaves[found[-1]] += n
    return below, leaves, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("raw", type=Path)
    parser.add_argument("--inside", default="_round")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    below, leaves, total = summarize(args.raw.read_text(errors="replace").splitlines(), args.inside)
    print(f"{total} samples inside {args.inside}")
    for title, counts in ((f"by the frame below {args.inside}", below), ("by the innermost frame", leaves)):
        print(f"\n{title}:")
        for frame, n in counts.most_common(args.top):
            print(f"{n:7d} {100 * n / max(total, 1):5.1f}%  {frame}")


if __name__ == "__main__":
    main()
