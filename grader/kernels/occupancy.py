"""How many blocks of a kernel fit on one SM of the grading GPU at once, and which resource decides.

An SM runs as many blocks of a kernel at the same time as its registers, its shared memory, its
warp slots and its block slots all allow; the smallest of the four is the kernel's occupancy, and
the warps it keeps resident are what hides the latency of memory. The rules are those of the CUDA
Occupancy Calculator, as CUDA 13.0 ships them in `cuda_occupancy.h`
(cudaOccMaxActiveBlocksPerMultiprocessor, for the default shared-memory carveout and no
partitioned global caching), with the figures of compute capability 9.0 (H100, H200) from that
header and from the CUDA C++ Programming Guide's table of technical specifications:

- registers are allocated per warp, in units of 256 (a thread's count times 32, rounded up), from
  each of the SM's 4 sub-partitions (65536 / 4 registers each): the warps per sub-partition that
  fit, times 4, over the block's warps. A block asking for more than 65536 registers (its warps
  rounded up to a multiple of 4, as the hardware checks it), or a thread for more than 255, does
  not launch;
- shared memory is allocated per block in units of 128 bytes, the block's own (static plus
  dynamic) plus 1 KiB that the driver reserves for every block (compute capability 8.0 and
  later), out of 228 KiB per SM; one block may have at most 227 KiB of its own;
- at most 64 warps (2048 threads) and 32 blocks per SM; at most 1024 threads per block.

The CPU tier works this out for kernels it never ran; `tests/test_occupancy.py` checks it against
figures of the header's own code, and on a GPU against the driver's occupancy API.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The resources, in the order a tie is named.
RESOURCES = ("registers", "shared memory", "warps", "blocks")


@dataclass(frozen=True)
class SmLimits:
    """One SM of a GPU, in the occupancy calculator's terms."""

    name: str
    registers: int = 65536  # 32-bit registers per SM (and the most one block may have)
    register_unit: int = 256  # registers are allocated per warp in units of this many
    max_registers_per_thread: int = 255
    sub_partitions: int = 4  # each holds a quarter of the registers and its own warps
    shared_bytes: int = 233472  # 228 KiB per SM, the largest carveout (the driver's default for occupancy)
    shared_per_block: int = 232448  # 227 KiB of a block's own, opted in (Triton opts in above 48 KiB)
    shared_unit: int = 128  # shared memory is allocated per block in units of this many bytes
    reserved_shared: int = 1024  # the driver's per block, from compute capability 8.0 on
    max_warps: int = 64  # 2048 threads
    max_blocks: int = 32
    max_threads_per_block: int = 1024
    warp_size: int = 32


SM90 = SmLimits("sm_90 (H100, H200)")


@dataclass
class Occupancy:
    """What fits on one SM: blocks and warps at once, and each resource's own limit in blocks."""

    blocks: int  # blocks of this kernel resident on one SM at once (0: it cannot launch)
    warps: int  # their warps
    max_warps: int  # the SM's warp slots
    limits: dict[str, int] = field(default_factory=dict)  # resource -> blocks it alone would allow
    limited_by: list[str] = field(default_factory=list)  # the resources at the minimum
    why_none: str = ""  # when blocks is 0: what a block asks for beyond the SM's means

    @property
    def share(self) -> float:
        return self.warps / self.max_warps

    def as_metrics(self) -> dict:
        return {"blocks_per_sm": self.blocks, "warps_per_sm": self.warps, "max_warps_per_sm": self.max_warps,
                "share": round(self.share, 4), "limited_by": self.limited_by, "limits": self.limits,
                **({"why_none": self.why_none} if self.why_none else {})}  # fmt: skip


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def register_limit(registers: int, warps: int, sm: SmLimits = SM90) -> tuple[int, str]:
    """Blocks per SM that the registers allow (cudaOccMaxBlocksPerSMRegsLimit), and why 0."""
    if registers > sm.max_registers_per_thread:
        return 0, f"{registers} registers per thread, more than the {sm.max_registers_per_thread} a thread may have"
    per_warp = _round_up(registers * sm.warp_size, sm.register_unit)
    # The hardware checks a block's registers as if its warps filled every sub-partition alike.
    assumed = per_warp * _round_up(warps, sm.sub_partitions)
    if assumed > sm.registers or per_warp * warps > sm.registers:
        return 0, f"{per_warp * warps} registers per block, more than the {sm.registers} an SM has"
    if per_warp == 0:
        return sm.max_blocks, ""
    warps_per_sub_partition = (sm.registers // sm.sub_partitions) // per_warp
    return warps_per_sub_partition * sm.sub_partitions // warps, ""


def shared_limit(shared_bytes: int, sm: SmLimits = SM90) -> tuple[int, str]:
    """Blocks per SM that shared memory allows (cudaOccMaxBlocksPerSMSmemLimit, default carveout)."""
    if shared_bytes > sm.shared_per_block:
        return 0, f"{shared_bytes} bytes of shared memory per block, more than the {sm.shared_per_block} a block may have"
    allocated = _round_up(shared_bytes + sm.reserved_shared, sm.shared_unit)
    return sm.shared_bytes // allocated, ""


def occupancy(registers: int, threads: int, shared_bytes: int, sm: SmLimits = SM90) -> Occupancy:
    """The occupancy of a kernel using `registers` per thread and `shared_bytes` of its own shared
    memory per block (static plus dynamic, without the driver's reserve), launched in blocks of
    `threads` threads."""
    warps = -(-threads // sm.warp_size)
    if threads < 1 or threads > sm.max_threads_per_block:
        reason = f"{threads} threads per block: a block has 1 to {sm.max_threads_per_block}"
        return Occupancy(0, 0, sm.max_warps, why_none=reason)
    by_registers, why_registers = register_limit(registers, warps, sm)
    by_shared, why_shared = shared_limit(shared_bytes, sm)
    limits = {"registers": by_registers, "shared memory": by_shared, "warps": sm.max_warps // warps,
              "blocks": sm.max_blocks}  # fmt: skip
    blocks = min(limits.values())
    limited_by = [name for name in RESOURCES if limits[name] == blocks]
    return Occupancy(blocks, blocks * warps, sm.max_warps, limits, limited_by, why_registers or why_shared)


def warps_allowed_by_registers(registers: int, sm: SmLimits = SM90) -> int:
    """Warps per SM that the registers alone allow, whatever the block size (blocks of whole
    groups of 4 warps): the bound a kernel's register count sets before its launch is known."""
    per_warp = _round_up(registers * sm.warp_size, sm.register_unit)
    if registers > sm.max_registers_per_thread:
        return 0
    return sm.max_warps if per_warp == 0 else min(sm.max_warps, (sm.registers // sm.sub_partitions) // per_warp * sm.sub_partitions)
