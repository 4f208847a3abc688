"""How long an idle GPU takes to come up to speed: the figures behind the timing child's settle.

    python tools/clock_ramp.py [--idle 0.05 0.3 1 3] [--window-ms 400] [--json ramp.json]

For each idle time: the GPU is kept busy for a second, left idle that long, then given the settle's
own work (grader/child/timing.py `settle`: reads of the L2 flush buffer and short busy waits) in
batches, each timed with CUDA events, for --window-ms. A batch's time falls while the clocks rise;
the tool prints each idle time's batches and when they came within 2% of the last tenth's median
(the speed the GPU settled at). Then the same idle again, followed by the settle itself: how long
it took, and how far the batches right after it were from that settled speed (the settle's rule
checked against the real ramp: a settle that stopped early shows here as slower batches).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from grader.child import timing  # noqa: E402


def idled(flush: torch.Tensor, idle_s: float) -> None:
    """The GPU up to speed, then left idle for `idle_s`."""
    timing.settle(flush)
    timing.settle(flush)
    time.sleep(idle_s)


def ramp(flush: torch.Tensor, idle_s: float, window_ms: float) -> list[tuple[float, float]]:
    """(ms since the work began, the batch's ms) for each batch after `idle_s` of idling."""
    idled(flush, idle_s)
    began = time.perf_counter()
    found = []
    while (time.perf_counter() - began) * 1e3 < window_ms:
        ms = timing.settle_batch(flush)
        found.append(((time.perf_counter() - began) * 1e3, ms))
    return found


def at_speed(batches: list[tuple[float, float]]) -> float:
    """The speed the GPU settled at: the median ms of the last tenth of the batches."""
    return statistics.median(ms for _, ms in batches[-max(1, len(batches) // 10):])


def settled_at(batches: list[tuple[float, float]], within: float = 0.02) -> float:
    """The ms from which every batch is within `within` of the speed settled at."""
    tail, at = at_speed(batches), 0.0
    for when, ms in batches:
        if abs(ms - tail) > within * tail:
            at = when
    return at


def after_settle(flush: torch.Tensor, idle_s: float) -> tuple[float, float]:
    """The settle's seconds after `idle_s` of idling, and the median ms of 5 batches right after it."""
    idled(flush, idle_s)
    spent = timing.settle(flush)
    return spent, statistics.median(timing.settle_batch(flush) for _ in range(5))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=float, nargs="+", default=[0.05, 0.3, 1.0, 3.0])
    parser.add_argument("--window-ms", type=float, default=400.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    flush = timing.l2_flush_buffer(torch.device("cuda"))
    found = {}
    for idle in args.idle:
        batches = ramp(flush, idle, args.window_ms)
        speed = at_speed(batches)
        spent, after = after_settle(flush, idle)
        found[str(idle)] = {"batches": batches, "settled_from_ms": settled_at(batches), "batch_ms": speed,
                            "settle_s": spent, "after_settle_ms": after, "after_vs_settled": after / speed - 1}
        shown = " ".join(f"{ms:.3f}" for _, ms in batches[:12])
        print(f"idle {idle:5.2f} s: {len(batches)} batches, first {shown} ...; within 2% of {speed:.3f} ms from "
              f"{found[str(idle)]['settled_from_ms']:.0f} ms; the settle took {spent * 1e3:.0f} ms, the batches "
              f"after it {after:.3f} ms ({after / speed - 1:+.1%})")
    if args.json:
        figures = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "idle": found}
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
