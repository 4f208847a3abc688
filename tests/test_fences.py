"""The fences around each timed call (grader/child/fences.py), checked without a GPU.

A fence holds the whole GPU only if all of its programs are resident at once: registers and
shared memory must not be what limits how many fit on an SM, only the SM's thread slots. Triton
compiles for an H100 or H200 on this machine, so the kernels' resources are checked here as the
GPU would see them. What the fences measure on a GPU (honest calls pass, work on a side stream
during the wait and a kernel started ahead are caught) is in test_integrity.py, under `-m gpu`.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import triton
from triton.compiler import ASTSource

from grader.child import fences, gpu_target

# What torch reports for an H100 or H200 (both: 132 SMs of 2048 threads and 65536 registers).
HOPPER = SimpleNamespace(name="NVIDIA H100 80GB HBM3", multi_processor_count=132, max_threads_per_multi_processor=2048,
                         regs_per_multiprocessor=65536, shared_memory_per_multiprocessor=233472)  # fmt: skip
ALIGNED = [["tt.divisibility", 16]]  # how Triton specializes a torch allocation's pointer and a multiple of 16


def _compiled(target: gpu_target.Target):
    """Both fences, specialized as their launch in the child specializes them."""
    options = {"num_warps": fences.WARPS, "maxnreg": 65536 // 2048}
    before = ASTSource(fences._before_call, {"record_ptr": "*i64", "flush_ptr": "*i32", "share": "i32", "keep": "i32",
                                             "wait_ns": "i32", "BLOCK": "constexpr"},
                       {"BLOCK": fences.FLUSH_BLOCK}, attrs={(0,): ALIGNED, (1,): ALIGNED, (2,): ALIGNED})  # fmt: skip
    after = ASTSource(fences._after_call, {"record_ptr": "*i64", "programs": "i32", "limit_ns": "i32"}, {},
                      attrs={(0,): ALIGNED})  # fmt: skip
    return [triton.compile(source, target=target.gpu_target(), options=options) for source in (before, after)]


@pytest.mark.parametrize("target", [gpu_target.H100, gpu_target.H200], ids=["H100", "H200"])
def test_every_program_of_a_fence_fits_on_the_gpu_at_once(target):
    programs = fences.fill_grid(HOPPER)
    assert programs == 132 * 2048 // (fences.WARPS * 32)
    for kernel in _compiled(target):
        registers, spills = gpu_target._resource_usage(kernel)
        assert spills == 0, f"{kernel.name} spills registers: its wait would read local memory"
        loaded = SimpleNamespace(name=kernel.name, n_regs=registers, metadata=kernel.metadata)
        fences._check_fill(loaded, HOPPER, programs)  # raises where the programs would not all fit


def test_a_fence_that_would_not_fill_the_gpu_is_refused_before_any_timing():
    greedy = SimpleNamespace(name="_before_call", n_regs=40, metadata=SimpleNamespace(shared=1024))
    with pytest.raises(RuntimeError, match="cannot fill an SM"):
        fences._check_fill(greedy, HOPPER, fences.fill_grid(HOPPER))


def test_the_flush_reads_whole_aligned_loads_through_16_byte_accesses():
    """The fence's read of the flush buffer is unmasked and aligned, so each thread loads 16 bytes
    at a time, as torch's own sum did: a flush of narrow loads would take longer than the wait."""
    ptx = _compiled(gpu_target.H100)[0].asm["ptx"]
    assert "ld.global.v4" in ptx and "ld.global.b32" not in ptx
