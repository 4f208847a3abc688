"""Fences around a timed call: two kernels of the harness that hold every SM of the GPU.

The CUDA events of timing.py see only the timed stream. Work that a call puts on a stream of its
own runs beside it, unseen by them: while the harness keeps the GPU busy so that the host's launch
is not timed, or after the call's end event. Two fences close that:

- before the call, every program of `_before_call` takes its place on the GPU, reads its share
  of the L2 flush buffer (so the call finds nothing of its inputs in the L2), and waits until
  WAIT_NS after the first program arrived. Together the programs fill every SM's thread slots
  (fill_grid), so no other kernel, on any stream, finds room to run meanwhile; a program that
  arrived late found a place held by something else (`late_us`: the latest arrival's lag);
- after the call, every program of `_after_call` takes its place and waits until all have: the
  last of them arrives only once nothing else holds any SM, that is once everything the call
  launched, on any stream, has finished (`device_ms`: from the first fence's end to that moment,
  by the GPU's global timer, against the events' time of the same call).

Both are launched by the harness alone, compiled before any student code runs, from a cache
folder of their own (never the compilers' cache that student code can write to), and through
the compiled kernels' own launchers (never the launch path that hooks.py logs for student code).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import globaltimer

WAIT_NS = 500_000  # longer than any launch overhead (tens of microseconds for a Python-side Triton launch)
LIMIT_NS = 2_000_000_000  # the fence after a call stops waiting after 2 s: a stuck call shows as device time
WARPS = 8  # per program: 256 threads, eight programs fill an SM's 2048 thread slots on an H100 or H200
FLUSH_BLOCK = 1024  # int32 elements per load: 4 per thread, one 16-byte load each
# Slots of the per-call record (int64): the first and the last arrival at the fence before the
# call, the end of its wait, the last arrival at the fence after it, and that fence's count.
FIRST, LAST, OPENED, CLOSED, COUNT = (tl.constexpr(slot) for slot in range(5))
SLOTS = 5
NEVER = 2**63 - 1


@triton.jit
def _before_call(
    record_ptr,  # the call's record: int64 slots FIRST, LAST, OPENED
    flush_ptr,  # int32 buffer at least twice the size of the L2 cache, `share` elements per program
    share,  # elements of it each program reads, a multiple of BLOCK
    keep,  # always 0 at run time: a store the compiler cannot remove keeps the flush's loads
    wait_ns,  # how long the GPU stays held, counted from the first program's arrival
    BLOCK: tl.constexpr,
):
    arrived = globaltimer()
    # The first program's arrival sets the common deadline; every program notes its own too, so
    # the latest arrival tells whether something else held a place on the GPU meanwhile.
    first = tl.minimum(tl.atomic_min(record_ptr + FIRST, arrived), arrived)
    tl.atomic_max(record_ptr + LAST, arrived)
    # Read this program's share of a buffer twice the L2's size: the call reads its inputs from HBM.
    # Whole blocks, aligned and unmasked, so each thread reads 16 bytes at a time.
    begin = tl.multiple_of(tl.program_id(0).to(tl.int64) * share, BLOCK)
    total = tl.zeros([BLOCK], dtype=tl.int32)
    for offset in range(begin, begin + share, BLOCK):
        offsets = tl.multiple_of(offset, BLOCK) + tl.arange(0, BLOCK)
        total += tl.load(flush_ptr + offsets)
    if keep != 0:
        tl.store(flush_ptr + begin + tl.arange(0, BLOCK), total)
    # Hold the place until the deadline: the host launches the call meanwhile.
    deadline = first + wait_ns
    now = globaltimer()
    while now < deadline:
        now = globaltimer()
    tl.atomic_max(record_ptr + OPENED, now)


@triton.jit
def _after_call(
    record_ptr,  # the call's record: int64 slots CLOSED, COUNT
    programs,  # the grid's size
    limit_ns,  # stop waiting after this long: the host's clock then shows what held the GPU
):
    arrived = globaltimer()
    tl.atomic_max(record_ptr + CLOSED, arrived)
    # Wait until every program of this fence holds its place: until then something else holds one.
    count = tl.atomic_add(record_ptr + COUNT, 1) + 1
    now = arrived
    while (count < programs) & (now - arrived < limit_ns):
        count = tl.atomic_add(record_ptr + COUNT, 0)
        now = globaltimer()


@dataclass
class Reading:
    late_us: float  # how long after the first program of the fence before the call the last one found a place
    device_ms: float  # from the end of that fence to the moment the fence after the call held the whole GPU


class Fences:
    """The two fences for one device, compiled and ready, with a record per call (reset by `arm`)."""

    def __init__(self, device: torch.device):
        properties = torch.cuda.get_device_properties(device)
        l2_bytes = getattr(properties, "L2_cache_size", 64 << 20)
        self.programs = fill_grid(properties)
        # Each program's share of a buffer twice the L2's size, in whole loads.
        self.share = triton.cdiv(triton.cdiv(2 * l2_bytes // 4, self.programs), FLUSH_BLOCK) * FLUSH_BLOCK
        self.flush = torch.zeros(self.programs * self.share, dtype=torch.int32, device=device)
        self.record = torch.zeros(SLOTS, dtype=torch.int64, device=device)
        self.fresh = torch.tensor([NEVER, 0, 0, 0, 0], dtype=torch.int64, device=device)
        before, after = _compiled_privately(self, properties)
        for kernel in (before, after):
            _check_fill(kernel, properties, self.programs)
        self._before, self._after = _Launch(before, self.programs), _Launch(after, self.programs)

    def arm(self) -> None:
        """A fresh record for the next call (on the current stream, before anything of the call)."""
        self.record.copy_(self.fresh)

    def before(self, stream: int) -> None:
        self._before(stream, self.record, self.flush, self.share, 0, WAIT_NS, FLUSH_BLOCK)

    def after(self, stream: int) -> None:
        self._after(stream, self.record, self.programs, LIMIT_NS)

    def read(self) -> Reading:
        """The record of the last call; read once the GPU is synchronized."""
        first, last, opened, closed, _ = self.record.tolist()
        return Reading(late_us=(last - first) / 1e3, device_ms=(closed - opened) / 1e6)


class _Launch:
    """One compiled kernel's launch, through the C function of its launcher, taken as it was
    compiled: no Python method that student code could rebind later (Triton's launcher class, the
    compiled kernel's attributes) and no launch hook of Triton's knobs is on the way. The argument
    order is that of Triton 3.6's launcher (the pinned stack); a Triton whose launcher differs
    launches through the compiled kernel's public `kernel[grid](...)` instead."""

    def __init__(self, kernel, programs: int):
        launcher = kernel.run
        try:
            scratch = launcher.global_scratch_size or launcher.profile_scratch_size
            self.launch = launcher.launch
            self.fixed = (kernel.function, launcher.launch_cooperative_grid, launcher.launch_pdl, None, None,
                          kernel.packed_metadata, None, None, None)  # fmt: skip
        except AttributeError:
            scratch, self.launch = True, None
        self.grid = (programs, 1, 1)
        self.public = kernel[self.grid] if scratch else None

    def __call__(self, stream: int, *args) -> None:
        if self.public is not None:
            self.public(*args, stream=stream)
        else:
            self.launch(*self.grid, stream, *self.fixed, *args)


def fill_grid(properties) -> int:
    """Programs of WARPS warps that, all resident at once, fill every SM's thread slots."""
    per_sm = properties.max_threads_per_multi_processor // (WARPS * 32)
    return properties.multi_processor_count * per_sm


def _check_fill(kernel, properties, programs: int) -> None:
    """The fences work only if every program fits on the GPU at once: registers and shared memory
    must not be what limits them. A grader fault where they are (a GPU unlike an H100 or H200)."""
    per_sm = programs // properties.multi_processor_count
    registers = kernel.n_regs * WARPS * 32 * per_sm
    shared = kernel.metadata.shared * per_sm
    if registers > _registers_per_sm(properties) or shared > properties.shared_memory_per_multiprocessor:
        raise RuntimeError(f"the timing fence {kernel.name} cannot fill an SM of {properties.name}: {per_sm} programs "
                           f"need {registers} registers and {shared} bytes of shared memory")  # fmt: skip


def _registers_per_sm(properties) -> int:
    """32-bit registers per SM: torch's figure where its build has it, else the CUDA driver's per
    block, through Triton (65536 on both, from Volta to Hopper)."""
    found = getattr(properties, "regs_per_multiprocessor", None)
    if found:
        return found
    return triton.runtime.driver.active.utils.get_device_properties(torch.cuda.current_device())["max_num_regs"]


def _compiled_privately(fences: Fences, properties):
    """Both kernels, compiled into a cache folder of this process's own: a kernel planted in the
    shared compilers' cache under their key by an earlier grading is never loaded. Registers are
    capped at what lets a full SM's threads hold them all at once."""
    previous = os.environ.get("TRITON_CACHE_DIR")
    options = {"num_warps": WARPS, "maxnreg": _registers_per_sm(properties) // properties.max_threads_per_multi_processor}
    with tempfile.TemporaryDirectory(prefix="fences-") as private:
        os.environ["TRITON_CACHE_DIR"] = private
        try:
            before = _before_call.warmup(fences.record, fences.flush, fences.share, 0, WAIT_NS, BLOCK=FLUSH_BLOCK,
                                         grid=(1,), **options)  # fmt: skip
            after = _after_call.warmup(fences.record, fences.programs, LIMIT_NS, grid=(1,), **options)
            for kernel in (before, after):
                kernel._init_handles()  # loads the binary and builds the launcher now, from the private folder
        finally:
            if previous is None:
                os.environ.pop("TRITON_CACHE_DIR", None)
            else:
                os.environ["TRITON_CACHE_DIR"] = previous
    return before, after
