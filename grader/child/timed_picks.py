"""Where a timing child's autotuner keeps its picks: apart from the correctness child's.

Triton keeps an autotuner's timings of its configs (TRITON_CACHE_AUTOTUNING) in the compilers'
cache of the grading (compile_cache.py), as `<kernel>.autotune.json` beside the compiled kernels,
and a later child with the same key reads them instead of timing the configs again. A correctness
child's timings are taken while other students' children use the GPU (correctness runs overlap on
a shared GPU, gpu_lock.py), so a timed phase must not reuse them: it would time whichever config
won by chance. Nor may it tune afresh in every grading: two configs within the autotuner's noise
of each other can differ by several percent in the grader's timing (fresh inputs, an evicted L2,
the whole entry point), so a regrade of the very same files would move its ratio by as much.

A timing child installs this cache manager (isolation.child_environment): it tunes in its
warm-up calls, with the GPU to itself, and keeps those picks under a name of their own in the
same folder, where the next timing child of the same files finds them. The compiled kernels
themselves are shared by both children, as before.
"""

from __future__ import annotations

from triton.runtime.cache import FileCacheManager

AUTOTUNE_SUFFIX = ".autotune.json"  # Triton's name for an autotuner's kept timings (runtime/autotuner.py)
TIMED_PREFIX = "timed-"


class TimedPicks(FileCacheManager):
    """Triton's file cache, with an autotuner's timings kept as timed-<kernel>.autotune.json."""

    def _make_path(self, filename: str) -> str:
        if filename.endswith(AUTOTUNE_SUFFIX) and "/" not in filename:
            filename = TIMED_PREFIX + filename
        return super()._make_path(filename)
