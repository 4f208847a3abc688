"""Whether a round of timings was disturbed, told from the torch reference's own timings.

The timing child times the student and torch interleaved (child/timing.py). Torch's kernels run
in steady times: on an H100 (2026-11-25, 38 benchmarks of every assignment), a round's slowest
reference timing was within 1.1x of its fastest in most benchmarks, with a single outlier of up to
2.4x in a few. Many slow reference timings in one round mean something else used the GPU (another
process, a GPU coming out of idle) and may have slowed the student's timings too: the child takes
such a round again, and the parent, which sees every sample, says so where the last one was too.
Used by both: the child to decide, the parent to check what it was sent.
"""

from __future__ import annotations

DISTURBED_FACTOR = 2.0  # a reference timing this many times its round's fastest was disturbed
DISTURBED_SHARE = 0.1  # more disturbed reference timings than this share: the round was disturbed


def disturbed_count(reference_ms: list[float]) -> int:
    """How many of `reference_ms` took DISTURBED_FACTOR times the fastest of them or longer."""
    if not reference_ms:
        return 0
    fastest = min(reference_ms)
    return sum(1 for ms in reference_ms if ms >= DISTURBED_FACTOR * fastest)


def disturbed(reference_ms: list[float]) -> bool:
    return disturbed_count(reference_ms) > DISTURBED_SHARE * len(reference_ms)
