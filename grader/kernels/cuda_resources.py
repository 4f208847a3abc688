"""What each kernel of a student's CUDA C build asks of an SM, and what its code is made of.

ptxas decides a kernel's registers, its stack frame (where registers spill) and its static shared
memory; cuobjdump reads them back from the library (`--dump-resource-usage`, the figures
`nvcc -Xptxas -v` prints while building), and its PTX (`-ptx`, which nvcc keeps in the library
beside the machine code) holds the instructions that ptx.py reads. Both work without a GPU, from
the cached library too, so both tiers say the same. Where nvcc's folder has no cuobjdump, the copy
that ships inside Triton's wheel does the same.

One measured detail (CUDA 13.0's ptxas, compared with `-Xptxas -v`): for sm_90 the resource usage
counts, in SHARED, the 1 KiB per block that the driver reserves, once the kernel uses shared
memory or a barrier at all (a kernel with `__shared__ float s[256]` shows 2048, ptxas -v 1024
bytes smem; one with only `__syncthreads()` shows 1024). The occupancy calculator adds that
reserve itself (occupancy.py), so it is taken off here.

Which kernels a part launches, and with how many threads a block, comes from its launcher's
source (cuda_launches.py); the rest is the same for every launch.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from grader.kernels import cuda_launches, ptx
from grader.messages.reports import KernelResources

RESERVED_SHARED = 1024  # counted in SHARED from sm_90 on, and added again by the occupancy calculator
_FUNCTION = re.compile(r"Function ([\w$.]+):\s*\n\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")
_ARCH = re.compile(r"arch = sm_(\d+)")


@dataclass
class CudaKernel:
    name: str  # demangled, without return type and parameters ("tile_kernel<1>")
    resources: KernelResources  # per kernel; `threads` and the shared-memory facts come with a launch
    ptx: str = ""  # its PTX, where the library holds it


@dataclass
class CudaKernels:
    """Every kernel of one build, and the launches its source makes (by launching function)."""

    kernels: list[CudaKernel] = dataclasses.field(default_factory=list)
    launches: dict[str, list[cuda_launches.Launch]] = dataclasses.field(default_factory=dict)

    def of_launcher(self, entry: str) -> list[KernelResources]:
        """The kernels `entry` launches, with the threads of its launch and the bank reading for
        that block; every kernel of the build, threads unknown, where its launches were not read."""
        launched = self.launches.get(entry, [])
        found = []
        for kernel in self.kernels:
            matching = [launch for launch in launched if _same_kernel(launch.kernel, kernel.name)]
            if launched and not matching:
                continue
            found.append(_with_launch(kernel, matching[0] if matching else None))
        return found


def read(library: Path, source: Path, compiler: str | None) -> CudaKernels:
    """The kernels of the library built from `source` (the launches read from its folder's sources)."""
    tool = cuobjdump(compiler)
    if tool is None:
        return CudaKernels()
    usage, text = _run([tool, "--dump-resource-usage", str(library)]), _run([tool, "-ptx", str(library)])
    arch = int(_ARCH.search(usage).group(1)) if _ARCH.search(usage) else 0
    bodies = ptx.entries(text)
    mangled = [m.group(1) for m in _FUNCTION.finditer(usage)]
    names = dict(zip(mangled, demangle(mangled, compiler)))
    kernels = []
    for match in _FUNCTION.finditer(usage):
        function, registers, stack, shared, local = match.group(1), *map(int, match.groups()[1:])
        own_shared = max(shared - RESERVED_SHARED, 0) if arch >= 90 else shared
        name = names.get(function, function)
        resources = KernelResources(name, source.name, registers=registers, spill_bytes=stack + local, shared_bytes=own_shared,
                                    read=function in bodies)  # fmt: skip
        kernels.append(CudaKernel(name, resources, bodies.get(function, "")))
    try:
        launches = cuda_launches.read(source.parent)
    except OSError:
        launches = {}
    return CudaKernels(kernels, launches)


def _with_launch(kernel: CudaKernel, launch: cuda_launches.Launch | None) -> KernelResources:
    found = dataclasses.replace(kernel.resources)
    if launch is not None:
        found.threads = launch.threads or 0
        found.shared_bytes += launch.dynamic_shared or 0
    if kernel.ptx:
        facts = ptx.facts(kernel.ptx, launch.block_x if launch is not None else None)
        found.tensor_core_ops, found.global_loads, found.wide_loads = (facts.tensor_core_ops, facts.global_loads,
                                                                       facts.wide_loads)  # fmt: skip
        found.shared_accesses = len(facts.shared_accesses)
        found.conflicted = sum(1 for access in facts.shared_accesses if access.ways > 1)
        worst = facts.worst_conflict
        if worst is not None:
            found.worst_ways, found.worst_kind, found.worst_line = worst.ways, worst.kind, worst.line
            found.worst_stride = worst.stride or 0
    return found


def _same_kernel(launched: str, compiled: str) -> bool:
    """Whether a launch in the source names this compiled kernel: the same base name, and the same
    template arguments where the launch's could be worked out (cu++filt writes `k<(int)1>`)."""
    from grader.judging.integrity import kernel_base  # imports torch, which building needs not

    if kernel_base(launched) != kernel_base(compiled):
        return False
    wanted, found = _template_arguments(launched), _template_arguments(compiled)
    if not wanted or not found or any(not re.fullmatch(r"-?\d+", a) for a in wanted):
        return True
    return wanted == found


def _template_arguments(name: str) -> list[str]:
    start, end = name.find("<"), name.rfind(">")
    if start < 0 or end < start:
        return []
    inner = re.sub(r"\((?:unsigned\s+)?\w+\)|\s|[uUlL]+(?=[,>]|$)", "", name[start + 1 : end])
    return [a for a in cuda_launches._split(inner)]


def cuobjdump(compiler: str | None) -> str | None:
    """cuobjdump beside nvcc, or the one in Triton's wheel."""
    if compiler:
        beside = Path(compiler).resolve().parent / "cuobjdump"
        if beside.is_file():
            return str(beside)
    spec = importlib.util.find_spec("triton")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        bundled = Path(folder) / "backends" / "nvidia" / "bin" / "cuobjdump"
        if bundled.is_file():
            return str(bundled)
    return shutil.which("cuobjdump")


def demangle(names: list[str], compiler: str | None) -> list[str]:
    """Each mangled name as the source reads it, without return type and parameters."""
    tools = [str(Path(compiler).resolve().parent / "cu++filt")] if compiler else []
    tool = next((t for t in tools if Path(t).is_file()), None) or shutil.which("cu++filt") or shutil.which("c++filt")
    if tool is None or not names:
        return list(names)
    try:
        lines = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=60).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return list(names)
    return [_without_signature(line) if line.strip() else name for line, name in zip(lines, names)]


def _without_signature(name: str) -> str:
    """`void k<(int)1>(float const*, int)` -> `k<(int)1>`: the parameters go, template arguments stay."""
    name = re.sub(r"^(void|static|__global__)\s+", "", name.strip())
    depth = 0
    for index, char in enumerate(name):
        depth += {"<": 1, ">": -1}.get(char, 0)
        if char == "(" and depth == 0:
            return name[:index].strip()
    return name


def _run(command: list[str]) -> str:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
