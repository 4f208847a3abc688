"""What a compiled Triton kernel asks of an SM, and what its code is made of: registers and spills
per thread, shared memory per block, warps and pipelining stages, and the facts of its PTX
(tensor-core instructions, 128-bit loads: grader/kernels/ptx.py).

Both tiers read Triton's CompiledKernel: the CPU tier the kernel it compiled for the GPU target
(gpu_target.py; registers and spills from the cubin, as cuobjdump reads them), the GPU tier the
kernel a launch returned (hooks.py; registers and spills as the driver reported them when it
loaded the kernel). The parent turns these figures into the occupancy on the grading GPU and
into readings (grader/kernels/compiled_kernels.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

from grader.kernels import ptx
from grader.messages.reports import KernelResources

_cache: dict[str, KernelResources] = {}  # per compiled kernel (its hash): PTX read once
_ELEMENT = re.compile(r"(?:^\*|tensordesc<)(\w+)")
SIXTEEN_BIT = ("fp16", "bf16")


def of_compiled(compiled, kernel: str, file: str, registers: int | None = None,
                spills: int | None = None) -> KernelResources:  # fmt: skip
    """The resources of one compiled kernel. `registers` and `spills` (Triton's count: spilled
    bytes / 4) where the caller read them from the cubin; otherwise the driver's figures, which a
    kernel has once a launch has loaded it."""
    key = getattr(compiled, "hash", None) or str(id(compiled))
    if key not in _cache:
        _cache[key] = _read(compiled, kernel, file)
    found = KernelResources(**vars(_cache[key]))
    registers = registers if registers is not None else getattr(compiled, "n_regs", None)
    spills = spills if spills is not None else getattr(compiled, "n_spills", None)
    found.registers = registers if isinstance(registers, int) else 0
    found.spill_bytes = 4 * spills if isinstance(spills, int) else 0
    return found


def _read(compiled, kernel: str, file: str) -> KernelResources:
    metadata = getattr(compiled, "metadata", None)
    asm = getattr(compiled, "asm", None)
    text = asm.get("ptx") if isinstance(asm, dict) else None
    warps = getattr(metadata, "num_warps", 0)
    found = KernelResources(kernel, os.path.basename(file), specialization(getattr(compiled, "src", None)),
                            shared_bytes=getattr(metadata, "shared", 0), threads=32 * warps,
                            num_stages=getattr(metadata, "num_stages", 0), read=isinstance(text, str))  # fmt: skip
    found.sixteen_bit = any(t in SIXTEEN_BIT for t in element_types(getattr(compiled, "src", None)))
    if isinstance(text, str):
        facts = ptx.facts(text, shared=False)  # Triton swizzles its shared memory against conflicts itself
        found.tensor_core_ops, found.global_loads, found.wide_loads = (facts.tensor_core_ops, facts.global_loads,
                                                                       facts.wide_loads)  # fmt: skip
    return found


def element_types(source) -> list[str]:
    """The element types of the tensors a kernel was compiled for: its signature's pointers and
    tensor descriptors ("*fp16", "tensordesc<bf16[64, 64]>")."""
    signature = getattr(source, "signature", None)
    if not isinstance(signature, dict):
        return []
    found = (_ELEMENT.match(str(kind)) for kind in signature.values())
    return sorted({match.group(1) for match in found if match})


def specialization(source) -> str:
    """What the kernel was compiled for, in a few words: "fp16; BLOCK_M=64, BLOCK_N=64"."""
    names = getattr(getattr(source, "fn", None), "arg_names", None) or []
    constants = getattr(source, "constants", None) or {}
    values = []
    for path, value in constants.items():
        if isinstance(path, tuple) and path and isinstance(path[0], int) and path[0] < len(names) and len(path) == 1:
            if isinstance(value, (int, float, bool, str)):
                values.append(f"{names[path[0]]}={value}")
    types = ", ".join(element_types(source))
    return "; ".join(part for part in (types, ", ".join(values)) if part)[:300]


_TF32_DOT = re.compile(r"tt\.dot .*inputPrecision = tf32\b.*: tensor<[^>]*xf32> \* tensor<[^>]*xf32>")


def tf32_dots(ttir: str) -> int:
    """How many tl.dot ops multiply float32 operands in TF32, Triton's default on NVIDIA GPUs unless
    told `input_precision="ieee"`: TTIR writes `inputPrecision = tf32` on each (and nothing for ieee)."""
    return sum(1 for line in ttir.splitlines() if _TF32_DOT.search(line))


def cubin_registers(kernel) -> tuple[int | None, int | None]:
    """(registers per thread, spilled registers) from the cubin, as the driver reports them on load:
    cuobjdump's REG, and its STACK + LOCAL bytes / 4 (the driver's local size, which Triton divides
    by 4 into n_spills; ptxas spills registers to the stack frame). None where unknown."""
    from triton.backends.nvidia.compiler import get_ptxas

    cuobjdump = os.path.join(os.path.dirname(get_ptxas(kernel.metadata.target.arch).path), "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(kernel.asm["cubin"])
        cubin.flush()
        try:
            usage = subprocess.run([cuobjdump, "--dump-resource-usage", cubin.name], capture_output=True,
                                   text=True, timeout=60).stdout  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return None, None
    registers, stack, local = (re.search(rf"{name}:(\d+)", usage) for name in ("REG", "STACK", "LOCAL"))
    if not (registers and stack and local):
        return None, None
    return int(registers.group(1)), (int(stack.group(1)) + int(local.group(1))) // 4
