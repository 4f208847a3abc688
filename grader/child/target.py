"""The GPU the course grades on, as its CUDA driver describes it to Triton 3.6 (measured): what the
CPU tier compiles every kernel for (gpu_target.py) and what Triton's driver queries answer there
(interpreter.py)."""

from __future__ import annotations

from dataclasses import dataclass

from triton.backends.compiler import GPUTarget


@dataclass(frozen=True)
class Target:
    """A GPU the course grades on, in the figures its CUDA driver gives Triton 3.6 (measured)."""

    name: str
    mem_clock_khz: int
    mem_bus_width: int  # bits
    arch: int = 90  # compute capability 9.0, as Triton writes it
    warp_size: int = 32
    num_sms: int = 132
    max_num_regs: int = 65536  # 32-bit registers per block
    max_shared_mem: int = 232448  # bytes per block, opted in: 227 KiB of the SM's 228 KiB
    sm_clock_khz: int = 1980000

    def gpu_target(self) -> GPUTarget:
        return GPUTarget("cuda", self.arch, self.warp_size)

    def device_properties(self) -> dict[str, int]:
        """What `driver.active.utils.get_device_properties(device)` returns on that GPU."""
        return {
            "max_shared_mem": self.max_shared_mem, "max_num_regs": self.max_num_regs,
            "multiprocessor_count": self.num_sms, "warpSize": self.warp_size, "sm_clock_rate": self.sm_clock_khz,
            "mem_clock_rate": self.mem_clock_khz, "mem_bus_width": self.mem_bus_width,
        }  # fmt: skip


# Only the memory differs (triton.testing.get_dram_gbps: 2 x clock x bus width): 3.35 and 4.81 TB/s.
H100 = Target("NVIDIA H100 80GB HBM3", mem_clock_khz=2619000, mem_bus_width=5120)
H200 = Target("NVIDIA H200", mem_clock_khz=3201000, mem_bus_width=6016)
TARGET = H200  # the GPU tier's machine, where the thresholds were measured (docs/measurements.md)
