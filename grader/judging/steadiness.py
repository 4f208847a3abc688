"""Whether a round of timings can grade, told from its own samples.

The timing child times the student and torch interleaved (child/timing.py) and takes a round
again where these rules say it cannot grade; the parent, which sees every sample of the round
that was kept, reads the same rules from those samples and says so where it still could not.
Used by both: the child to decide, the parent to check what it was sent.

- Torch's kernels run in steady times: on an H100 (2026-11-25, 38 benchmarks of every
  assignment), a round's slowest reference timing was within 1.1x of its fastest in most
  benchmarks, with a single outlier of up to 2.4x in a few. Many slow reference timings in one
  round mean something else used the GPU (another process, a GPU coming out of idle).
- A student's kernel timed behind the gate (child/gate.py) is as steady as torch's: many samples
  at twice the student's fastest mean the round was disturbed for the student alone (a pause of
  the host while its call was launched, where no gate held the stream), and the median of such a
  set is no measurement. A student's call that really varies keeps varying in every retake: its
  last round grades, and the report shows the spread.
- Host time the events did not see (the host's wait from the end of the launches to the end of
  a device-wide synchronize, beyond the events' stretch): a side stream's work outlasting the
  timed stream shows there, and so does a host that lost its core. It only asks for a retake; it
  takes points only where no witness recorded the child and it held in every round
  (judging/speed.py).
"""

from __future__ import annotations

import statistics

DISTURBED_FACTOR = 2.0  # a timing this many times its round's fastest was disturbed
DISTURBED_SHARE = 0.1  # more disturbed timings than this share: the round was disturbed
HIDDEN_MS = 0.25  # host-visible time the events did not see, beyond the reference's own
# ... or this share of the event time, if more. An honest call's host-only time is a constant
# (recording events, waking from the synchronize), the reference's own: it does not grow with
# the kernel, so a share above this means work the events never saw.
HIDDEN_SHARE = 0.5


def disturbed_count(samples_ms: list[float]) -> int:
    """How many of `samples_ms` took DISTURBED_FACTOR times the fastest of them or longer."""
    if not samples_ms:
        return 0
    fastest = min(samples_ms)
    return sum(1 for ms in samples_ms if ms >= DISTURBED_FACTOR * fastest)


def disturbed(samples_ms: list[float]) -> bool:
    return disturbed_count(samples_ms) > DISTURBED_SHARE * len(samples_ms)


def hidden_ms(student_hidden: list[float], baseline_hidden: list[float], student_ms: list[float]) -> float | None:
    """The student's host time beyond the events, per call, where it is more than an honest
    call's (beyond the reference's own, and more than HIDDEN_MS or HIDDEN_SHARE of the event
    time); None where it is not."""
    if not (student_hidden and baseline_hidden and student_ms):
        return None
    hidden = statistics.median(student_hidden) - statistics.median(baseline_hidden)
    return hidden if hidden > max(HIDDEN_MS, HIDDEN_SHARE * statistics.median(student_ms)) else None


def retake_reasons(student_ms: list[float], baseline_ms: list[float], student_hidden: list[float],
                   baseline_hidden: list[float]) -> list[str]:  # fmt: skip
    """Why a round cannot grade: "reference" (torch's timings disturbed), "student" (the
    student's disturbed while torch's were not), "hidden" (host time the events did not see)."""
    reasons = []
    if disturbed(baseline_ms):
        reasons.append("reference")
    elif disturbed(student_ms):
        reasons.append("student")
    if hidden_ms(student_hidden, baseline_hidden, student_ms) is not None:
        reasons.append("hidden")
    return reasons
