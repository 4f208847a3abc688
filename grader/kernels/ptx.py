"""What a compiled kernel is made of, read from its PTX: tensor-core instructions, the width of its
global loads, and whether a warp's shared-memory accesses conflict on banks.

PTX is the code every kernel of the course passes through on its way to the GPU (Triton writes
it, nvcc keeps it in the library), and it says these things plainly: a tensor-core product is a
`wgmma.mma_async` (Hopper), `mma.sync` or `wmma.mma` instruction; a 128-bit load is an
`ld.global.v4.f32` (or `.v4.b32`, `.v2.b64`), where a load of one float is `ld.global.f32`.

Bank conflicts need the addresses. Shared memory is 32 banks of 4-byte words: the 32 lanes of a
warp are served at once only where each bank is asked for one word (or all ask for the same
word); k different words in one bank take k turns. So each `ld.shared` / `st.shared` is followed
back through the integer arithmetic that made its address, lane by lane: `%tid.x` is the lane's
own number (a block whose rows are whole warps, as every kernel of the course launches), and
anything the same for the whole warp (`%tid.y`, `%ctaid.x`, a kernel argument, the tile's base
address) is an unknown offset that moves every lane alike and so changes no bank pattern. An
address that depends on loaded data, or that the walk cannot follow, is left unjudged. The walk
is straight through the text, ignoring branches: loops in these kernels are unrolled or advance
their addresses by amounts the same for every lane.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

WARP = 32
BANKS = 32
BANK_BYTES = 4
TENSOR_CORE = re.compile(r"^(wgmma\.mma_async|mma\.sync|wmma\.mma)\b")
_ENTRY = re.compile(r"^\s*(?:\.(?:visible|weak)\s+)*\.entry\s+([\w$.]+)", re.M)
_FUNCTION_END = re.compile(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.(?:entry|func)\b", re.M)
_BITS = {"b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16, "b32": 32, "u32": 32,
         "s32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32, "b64": 64, "u64": 64, "s64": 64, "f64": 64, "b128": 128}  # fmt: skip
_LINE = re.compile(r"^\s*\.loc\s+\d+\s+(\d+)")
# A line whose instruction (after a guard such as `@%p1` or `@!%p2`) is one `_counted` counts.
_COUNTED = re.compile(r"^[ \t]*(?:@!?%?\w+[ \t]+)?(?:wgmma\.mma_async|mma\.sync|wmma\.mma|ld\.global|cp\.async)\b.*$", re.M)


@dataclass
class SharedAccess:
    """One ld.shared / st.shared whose lanes' addresses were followed."""

    kind: str  # "load" or "store"
    width: int  # bytes per lane
    ways: int  # turns a warp's access takes: 1 is conflict-free
    stride: int | None  # bytes between neighbouring lanes' addresses, where constant
    line: int = 0  # the source line (.loc), 0 where unknown


@dataclass
class PtxFacts:
    tensor_core_ops: int = 0  # wgmma / mma / wmma instructions
    global_loads: int = 0  # load instructions from global memory (ld.global, cp.async, TMA)
    wide_loads: int = 0  # of which each lane moves 128 bits or more (cp.async of 16 bytes, TMA included)
    shared_accesses: list[SharedAccess] = field(default_factory=list)
    unfollowed_shared: int = 0  # shared accesses whose addresses could not be followed

    @property
    def worst_conflict(self) -> SharedAccess | None:
        conflicted = [a for a in self.shared_accesses if a.ways > 1]
        return max(conflicted, key=lambda a: a.ways) if conflicted else None


def entries(ptx: str) -> dict[str, str]:
    """Each kernel (`.entry`) of a PTX module, by its (mangled) name, with its body."""
    found = {}
    for match in _ENTRY.finditer(ptx):
        following = _FUNCTION_END.search(ptx, match.end())
        found[match.group(1)] = ptx[match.start() : following.start() if following else len(ptx)]
    return found


def facts(ptx: str, block_x: int | None = None, shared: bool = True) -> PtxFacts:
    """The facts of one kernel's PTX; `block_x` is the block's width in threads where known (a
    narrower block puts several values of %tid.y in one warp). `shared=False` counts instructions
    only, without following addresses (a tenth of the time: Triton lays out its own shared memory)."""
    if not shared:
        return _counted(ptx)
    found = PtxFacts()
    lanes = _Lanes(block_x)
    line = 0
    for raw in ptx.splitlines():
        located = _LINE.match(raw)
        if located:
            line = int(located.group(1)) or line  # `.loc 1 0 9`: no line of its own
            continue
        instruction = _instruction(raw)
        if instruction is None:
            continue
        opcode, operands = instruction
        _count(found, opcode, operands)
        if _is_shared_access(opcode):
            access = lanes.access(opcode, operands, line)
            if access is None:
                found.unfollowed_shared += 1
            else:
                found.shared_accesses.append(access)
        lanes.execute(opcode, operands)
    return found


def _counted(ptx: str) -> PtxFacts:
    """`facts` without shared memory: only the lines whose instruction counts are parsed (a Triton
    kernel's PTX is thousands of lines, and a correctness child reads each kernel it launched:
    parsing every line took 18 ms for the largest of the course's kernels on the 2-core machine)."""
    found = PtxFacts()
    for match in _COUNTED.finditer(ptx):
        instruction = _instruction(match.group(0))
        if instruction is not None:
            _count(found, *instruction)
    return found


def _instruction(raw: str) -> tuple[str, list[str]] | None:
    text = raw.split("//", 1)[0].strip().rstrip(";").strip()
    if not text or text.startswith((".", "{", "}", "$")) or text.endswith(":"):
        return None
    if text.startswith("@"):
        text = text.split(None, 1)[1] if " " in text else ""
    parts = text.split(None, 1)
    if not parts:
        return None
    return parts[0], _split_operands(parts[1]) if len(parts) > 1 else []


def _split_operands(text: str) -> list[str]:
    operands, depth, current = [], 0, ""
    for char in text:
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        if char == "," and depth == 0:
            operands.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        operands.append(current.strip())
    return operands


def _width(opcode: str) -> int:
    """Bytes per lane of a load or store: its element type times its vector length."""
    pieces = opcode.split(".")
    vector = next((int(p[1:]) for p in pieces if re.fullmatch(r"v[248]", p)), 1)
    bits = next((_BITS[p] for p in reversed(pieces) if p in _BITS), 32)
    return vector * bits // 8


def _count(found: PtxFacts, opcode: str, operands: list[str]) -> None:
    """Count a tensor-core instruction, or a load from global memory and whether it is wide."""
    found.tensor_core_ops += bool(TENSOR_CORE.match(opcode))
    if opcode.startswith("ld.global"):
        found.global_loads += 1
        found.wide_loads += _width(opcode) >= 16
    elif opcode.startswith("cp.async.bulk.tensor") or (opcode.startswith("cp.async.bulk") and ".global" in opcode):
        found.global_loads += 1
        found.wide_loads += 1
    elif opcode.startswith("cp.async.c") and ".global" in opcode:
        found.global_loads += 1
        found.wide_loads += len(operands) > 2 and operands[2].strip() == "16"


def _is_shared_access(opcode: str) -> bool:
    pieces = opcode.split(".")
    return pieces[0] in ("ld", "st") and any(p.startswith("shared") for p in pieces[1:3])


def conflict_ways(addresses: list[int], width: int) -> int:
    """Turns one warp-wide access takes: the hardware serves 128 bytes a turn (32 lanes of 4 bytes,
    16 of 8, 8 of 16), and within such a phase k distinct words in one bank take k turns."""
    per_phase = max(1, min(WARP, 128 // max(width, BANK_BYTES)))
    worst = 1
    for start in range(0, len(addresses), per_phase):
        banks: dict[int, set[int]] = {}
        for address in addresses[start : start + per_phase]:
            for word in range(address // BANK_BYTES, (address + max(width, 1) - 1) // BANK_BYTES + 1):
                banks.setdefault(word % BANKS, set()).add(word)
        worst = max(worst, max((len(words) for words in banks.values()), default=1))
    return worst


class _Value:
    """An integer register across the 32 lanes of a warp: each lane's value relative to the others
    (`rel`, None where it cannot be followed), plus an offset the same for every lane, unknown when
    `offset` is True (a kernel argument, a block index, the base address of a shared array)."""

    __slots__ = ("rel", "offset")

    def __init__(self, rel: tuple[int, ...] | None, offset: bool = False):
        self.rel, self.offset = rel, offset

    @property
    def uniform(self) -> bool:
        return self.rel is not None and len(set(self.rel)) == 1

    @property
    def known_constant(self) -> int | None:
        return self.rel[0] if self.uniform and not self.offset else None


UNKNOWN = _Value(None)
UNIFORM = _Value((0,) * WARP, True)


def _constant(value: int) -> _Value:
    return _Value((value,) * WARP)


class _Lanes:
    """The registers of one kernel, lane by lane, as the walk goes."""

    def __init__(self, block_x: int | None):
        width = block_x if block_x and block_x < WARP else WARP
        self.specials = {
            "%tid.x": _Value(tuple(lane % width for lane in range(WARP))),
            "%tid.y": _Value(tuple(lane // width for lane in range(WARP)), True) if width < WARP else UNIFORM,
            "%laneid": _Value(tuple(range(WARP))),
        }
        self.registers: dict[str, _Value] = {}

    def value(self, operand: str) -> _Value:
        operand = operand.strip()
        if operand in self.registers:
            return self.registers[operand]
        if operand in self.specials:
            return self.specials[operand]
        if re.fullmatch(r"-?(0[xX][0-9a-fA-F]+|\d+)", operand):
            return _constant(int(operand, 0))
        if operand.startswith("%"):
            return UNIFORM if operand.startswith(("%ctaid", "%ntid", "%nctaid", "%tid.z")) else UNKNOWN
        return UNIFORM if re.fullmatch(r"[A-Za-z_$][\w$.]*", operand) else UNKNOWN  # a symbol: an address

    def execute(self, opcode: str, operands: list[str]) -> None:
        if not operands or not operands[0].startswith("%"):
            return
        name, args = operands[0], [self.value(o) for o in operands[1:]]
        op = opcode.split(".")[0]
        if op in ("mov", "cvt", "cvta") and len(args) == 1:
            result = args[0]
        elif op == "ld":
            result = UNIFORM if opcode.startswith("ld.param") else UNKNOWN
        elif op in ("add", "sub") and len(args) == 2:
            result = _combine(args[0], args[1], op)
        elif op == "mul" and len(args) == 2:
            result = _multiply(args[0], args[1])
        elif op == "mad" and len(args) == 3:
            result = _combine(_multiply(args[0], args[1]), args[2], "add")
        elif op == "shl" and len(args) == 2 and args[1].known_constant is not None:
            result = _multiply(args[0], _constant(2 ** args[1].known_constant))
        elif op in _EXACT and len(args) == 2:
            result = _exactly(args[0], args[1], _EXACT[op])
        else:
            result = UNKNOWN
        self.registers[name] = result

    def access(self, opcode: str, operands: list[str], line: int) -> SharedAccess | None:
        kind = "load" if opcode.startswith("ld") else "store"
        address = operands[1] if kind == "load" and len(operands) > 1 else operands[0] if operands else ""
        match = re.fullmatch(r"\[\s*([^\]+\-\s]+)\s*(?:([+-])\s*(-?\w+))?\s*\]", address.strip())
        if not match:
            return None
        base = self.value(match.group(1))
        if match.group(3):
            sign = -1 if match.group(2) == "-" else 1
            base = _combine(base, _constant(sign * int(match.group(3), 0)), "add")
        if base.rel is None:
            return None
        width = _width(opcode)
        stride = base.rel[1] - base.rel[0]
        constant_stride = all(base.rel[i + 1] - base.rel[i] == stride for i in range(WARP - 1))
        return SharedAccess(kind, width, conflict_ways(list(base.rel), width), stride if constant_stride else None, line)


def _combine(a: _Value, b: _Value, op: str) -> _Value:
    if a.rel is None or b.rel is None:
        return UNKNOWN
    sign = -1 if op == "sub" else 1
    return _Value(tuple(x + sign * y for x, y in zip(a.rel, b.rel)), a.offset or b.offset)


def _multiply(a: _Value, b: _Value) -> _Value:
    if a.rel is None or b.rel is None:
        return UNKNOWN
    if a.uniform and b.uniform:
        if a.offset or b.offset:
            return UNIFORM
        return _constant(a.rel[0] * b.rel[0])
    varying, factor = (a, b) if b.uniform else (b, a) if a.uniform else (None, None)
    if varying is None or factor.offset:
        return UNKNOWN  # lane-varying times lane-varying, or times an unknown: no pattern to follow
    return _Value(tuple(x * factor.rel[0] for x in varying.rel), varying.offset)


_EXACT = {"shr": lambda x, y: x >> y, "div": lambda x, y: x // y if y else 0, "rem": lambda x, y: x % y if y else 0,
          "and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y, "min": min, "max": max}  # fmt: skip


def _exactly(a: _Value, b: _Value, function) -> _Value:
    """An operation that needs the values themselves: computed lane by lane where no unknown offset
    is involved; the same for every lane where both operands are; otherwise not followed."""
    if a.rel is None or b.rel is None:
        return UNKNOWN
    if not (a.offset or b.offset):
        return _Value(tuple(function(x, y) for x, y in zip(a.rel, b.rel)))
    return UNIFORM if a.uniform and b.uniform else UNKNOWN
