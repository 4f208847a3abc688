"""A call's data taken out of torch to the host, or a host array brought into torch: counted.

The grader learns what a call computed from torch's profiler, which sees torch ops, and a copy is
an allowed op. So a submission copied its inputs to numpy, added there, brought the sum back into
a tensor and launched an empty kernel of its own: every CPU-tier point (and on a GPU the cases
passed too). The ways a tensor's values become Python's or numpy's (`Tensor.numpy`, which
`np.asarray` and `__array__` call; `Tensor.tolist`; DLPack), and the ways a host array becomes a
tensor (`torch.from_numpy`, `frombuffer`, `from_dlpack`, and `as_tensor`, `asarray` and `tensor`
of an array or a list) are gateways: each is taken away before student code runs, like the
profiler's switches (switches.take_away), and a gate stands in that asks the guard's hook for it.
The hook hands it to anyone, and where student code asked (its walk, the student's line with it)
notes the gateway and how many values it moves. The parent counts them with the call's torch ops
(`host::` ops), and more than a few values per call is forbidden_op (ops.py), as a computing op
would be. One use that alone moves more than that is refused before it moves anything (`refusal`):
the call fails with forbidden_op at once, not after a 67-million-element list has filled the
child's host memory. A value read one at a time (`float(t)`, `t.item()`, iterating a tensor) is a torch op
the profiler sees, `aten::_local_scalar_dense`, counted likewise.

A storage's values can be read item by item (`bytes(t.untyped_storage())`), where no gate can
stand (a type's slots); that is not gated: Triton's interpreter reaches every argument's storage at
each launch, inside the student's call, and a storage read so is slow (7 s for 100,003 floats on
the 2-core machine, out of the limit under the grader's monitor), and on a GPU it needs the copy to
the host that the GPU tier's witness sees.
"""

from __future__ import annotations

import numpy as np
import torch

from grader.messages.reports import OpCount
from grader.judging.ops import HOST, VALUES_PER_CALL

REFUSED_PREFIX = "the grader refuses "  # a gateway refused before it moved anything (failures.py)

# Gateways by owner; each is noted as `host::<name>`.
GATEWAYS = {
    "torch._C.TensorBase": ("numpy", "tolist"),
    "torch._C": ("_to_dlpack", "_to_dlpack_versioned", "_from_dlpack"),
    "torch": ("from_numpy", "frombuffer", "as_tensor", "asarray", "tensor"),
}  # fmt: skip
ENTRIES = ("_from_dlpack", "from_numpy", "frombuffer", "as_tensor", "asarray", "tensor")  # host to torch
_Tensor, _ndarray = torch.Tensor, np.ndarray
_numel = torch._C.TensorBase.numel  # taken now: the hook reads sizes through it
_DEPTH = 4  # how deep a nested list is counted


def names() -> frozenset:
    """The gateways' names, as the keeper knows them."""
    return frozenset(f"{owner}.{name}" for owner, found in GATEWAYS.items() for name in found)


def shown(name: str) -> str:
    """A gateway as the op the parent judges (ops.HOST): torch._C._to_dlpack_versioned is host::to_dlpack."""
    attribute = str.rpartition(name, ".")[2].strip("_")
    return HOST + attribute.removesuffix("_versioned")


def measure(name: str, args: tuple) -> int:
    """How many values a call of the gateway moves, read without running any method of an argument
    (run inside the guard's hook): a tensor's elements, an array's, a buffer's bytes, a list's
    items; 1 where the size is unknown."""
    held = args[0] if args else None
    if type(held) is _Tensor:  # a tensor's values leave torch; one made from a tensor stays there
        return 0 if str.rpartition(name, ".")[2] in ENTRIES else int(_numel(held))
    if type(held) is _ndarray:
        return int(_ndarray.size.__get__(held))
    if type(held) in (bytes, bytearray):
        return len(held)
    if type(held) in (list, tuple):
        return _items(held, _DEPTH)
    return 1


def refusal(name: str, moved: int, where: str) -> str:
    """Why one use of a gateway that alone moves more values than a call may is refused before it
    moves them ("" where it may go on): a 67-million-element tolist() filled a GPU-tier child's
    6 GiB of host memory before its reads could be counted."""
    if moved <= VALUES_PER_CALL:
        return ""
    place = f" ({where})" if where else ""
    return (f"{REFUSED_PREFIX}{shown(name)} of {moved} values in graded code{place}: computing is your kernel's job "
            f"here, and more than {VALUES_PER_CALL} values a call taken to the host or brought from it is the call's "
            "data worked on where your kernel is not")


def _items(values, depth: int) -> int:
    if depth == 0 or type(values) not in (list, tuple):
        return 1
    return sum(_items(value, depth - 1) for value in values) if values else 0


def ops(noted: list) -> list[OpCount]:
    """The guard's records of gateways' uses (NOTED), as ops: per gateway, the values it moved, and
    the student's line that first used it."""
    moved: dict[str, int] = {}
    where: dict[str, str] = {}
    for record in noted:
        name = shown(record.what)
        moved[name] = moved.get(name, 0) + record.count
        where.setdefault(name, record.where)
    return [OpCount(name, count, 1, where[name]) for name, count in sorted(moved.items())]
