"""The GPU held at the start of a timed call until the host has launched all of it (GPU tier).

A timed call is a stretch of the timed stream between two CUDA events. If the GPU reaches the
first event before the host has launched the call's kernels, it idles inside the stretch, and the
events charge the host's time to the student: Python's launch path (tens of microseconds for a
Triton kernel), and on a busy host whatever kept the process off its core. A fixed busy-wait in
front of the stretch hides the first and not the second: on an H200, one grading beside others
saw a fused row-wise kernel's samples spread from 0.011 to 0.947 ms while torch's stayed within 4%.

So the stretch waits behind a gate, as NVIDIA's nvbench times its benchmarks (its blocking
kernel): one program of one warp spins on a flag in pinned host memory until the host, having
launched the call and its end event, sets it. Then the GPU runs the stretch back to back, and
the events time the kernels and nothing of the host's.

Three things keep it honest:
- A call that waits for the GPU itself (`.item()`, a synchronize, a free of cached memory) would
  wait for the gate, and the gate for the call's return. The gate gives up after TIMEOUT_NS of
  the GPU's clock, says so in the flag's second word, and the benchmark is timed the old way from
  then on (a busy wait): the call's own waits are then its own time.
- Work hidden on another stream runs while the timed stream is held, where no event sees it: so
  the gate is used only where the grader's witness records the process (grader/witness), which
  sees every kernel's GPU time and calls one that ran outside its timed stretch tampering.
- The flag is the harness's own memory, set by the harness after the call returned; student code
  that sets it early only puts its own launch time back into its timings.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import globaltimer

TIMEOUT_NS = 50_000_000  # 50 ms of the GPU's clock: far beyond any launch, short beside a benchmark


@triton.jit
def _held(flag,  # *i32, pinned host memory: [open, gave up]
          timeout_ns):  # i64: how long to wait for the host at most
    began = globaltimer()
    # A volatile load reads the host's memory afresh each time round (no cached copy on the GPU).
    while (tl.load(flag, volatile=True) == 0) & (globaltimer() - began < timeout_ns):
        pass
    if tl.load(flag, volatile=True) == 0:
        tl.store(flag + 1, 1)  # the host never opened it: the stretch behind waited for the timeout


class Gate:
    """One gate per timing process; `hold` before a timed call's start event, `open` once the
    call and its end event are launched, `gave_up` after the device-wide synchronize."""

    def __init__(self):
        self._flag = torch.zeros(2, dtype=torch.int32, pin_memory=True)
        self._host = self._flag.numpy()  # the host's writes go straight to the pinned page
        self._kernel = _held  # held here: a name rebound in the module later changes nothing
        self._host[0] = 1
        self._kernel[(1,)](self._flag, TIMEOUT_NS, num_warps=1)  # compiled now, not inside a timed call
        torch.cuda.synchronize()

    def hold(self) -> None:
        self._host[0] = self._host[1] = 0
        self._kernel[(1,)](self._flag, TIMEOUT_NS, num_warps=1)

    def open(self) -> None:
        self._host[0] = 1

    def gave_up(self) -> bool:
        return bool(self._host[1])
