"""How a compiled Triton kernel loads its tiles: through block pointers, tensor descriptors, or a
tensor of pointers, counted in its TTIR.

A part may require block pointers (`loads = "block_pointers"` in assignment.toml): the parent
judges that from these counts (integrity.required_loads). The counts come from the code
generator's TTIR, the IR that Triton 3.6 builds from the kernel's Python before any pass runs, which
it keeps beside the others as the compiled kernel's `asm["source"]`. The final TTIR
(`asm["ttir"]`) no longer shows block pointers: its first pass (RewriteTensorPointer) lowers each
one into a tensor of pointers and a mask, on every target; tensor descriptors survive there on
Hopper, but the code generator's IR holds both. What each load looks like there:

    tt.load %p {boundaryCheck = ...} : !tt.ptr<tensor<64x32xf16>>   a block pointer
    tt.descriptor_load %d[%i, %j] : !tt.tensordesc<...> -> ...       a tensor descriptor
    tt.load %p, %mask, %other : tensor<64x32x!tt.ptr<f16>>           a tensor of pointers
    tt.load %p : !tt.ptr<f32>                                        one scalar (not a tile: not counted)

Both tiers read the same text: the CPU tier from the kernel it compiles for the GPU target
(gpu_target.py), the GPU tier from the kernel a launch returned (hooks.py).
"""

from __future__ import annotations

import os
import re

from grader.messages.reports import KernelLoads

_LOAD = re.compile(r"\btt\.load\s")
_TRAILING_LOC = re.compile(r"\s+loc\((.*)\)\s*$")
_DESCRIPTOR = re.compile(r"\btt\.descriptor_(load|gather)\b")
_LOC_ALIAS = re.compile(r"^(#loc\d*)\s*=\s*loc\((.*)\)\s*$")
_FILE_LOC = re.compile(r'^"((?:[^"\\]|\\.)*)":(\d+):\d+')
_NAME_LOC = re.compile(r'^"(?:[^"\\]|\\.)*"\((.*)\)$')
_CALLSITE = re.compile(r"^callsite\((.*?) at (.*)\)$")
_cache: dict[str, KernelLoads] = {}  # GPU tier: per compiled kernel (its hash), counted once


def count(kernel: str, file: str, ttir: str | None) -> KernelLoads:
    """The loads of one kernel, from the code generator's TTIR (None: the kernel held none)."""
    found = KernelLoads(kernel, os.path.basename(file), read=bool(ttir))
    if not ttir:
        return found
    aliases = dict(m.groups() for m in map(_LOC_ALIAS.match, ttir.splitlines()) if m)
    for line in ttir.splitlines():
        if _DESCRIPTOR.search(line):
            found.descriptors += 1
            continue
        if not _LOAD.search(line):
            continue
        loc = _TRAILING_LOC.search(line)
        # The loaded type follows the last " : " (the attributes before it may hold some too).
        kind = line[: loc.start() if loc else len(line)].rsplit(" : ", 1)[-1].strip()
        if kind.startswith("!tt.ptr<tensor<"):
            found.block_pointers += 1
        elif kind.startswith("tensor<") and "!tt.ptr<" in kind:
            found.pointer_tensors += 1
            if not found.first_pointer_tensor and loc:
                found.first_pointer_tensor = _place(loc[1], aliases)
    return found


def of_compiled(compiled, kernel: str, file: str) -> KernelLoads:
    """GPU tier: the loads of a kernel that a launch returned (Triton's CompiledKernel), counted
    once per compiled kernel. Not yet run on a GPU: test_gpu_target.py feeds it a kernel compiled
    here for the same target, whose `asm` Triton fills the same way."""
    key = getattr(compiled, "hash", None) or str(id(compiled))
    if key not in _cache:
        asm = getattr(compiled, "asm", None)
        source = asm.get("source") if isinstance(asm, dict) else None
        _cache[key] = count(kernel, file, source if isinstance(source, str) else None)
    cached = _cache[key]
    return KernelLoads(**vars(cached))


def _place(loc: str, aliases: dict[str, str], depth: int = 0) -> str:
    """The file and line ("kernel.py, line 57") of a TTIR location: `#loc12`, `"file":57:20`, a
    named location `"a"(#loc12)` or an inlined call `callsite(#loc3 at #loc9)` (the callee's
    line); "" where the TTIR does not say."""
    loc = loc.strip()
    if depth > 20:
        return ""
    if loc in aliases:
        return _place(aliases[loc], aliases, depth + 1)
    if found := _FILE_LOC.match(loc):
        return f"{os.path.basename(found[1])}, line {found[2]}"
    if found := _NAME_LOC.match(loc) or _CALLSITE.match(loc):
        return _place(found[1], aliases, depth + 1)
    return ""
