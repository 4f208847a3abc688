"""What a torch op does to data, judged by the parent from its name: the allow-list of integrity.

A part's work must be done by the student's own kernels, so every torch op its call runs must be
one that computes nothing: an allocation, a view (decided by the op's own schema: it returns an
alias of an input and writes nothing), a copy or type conversion, a read of a scalar, or a
metadata change. Anything else computes, and is `forbidden_op` unless the part's
assignment.toml allows it by name (`allowed_ops`). An op unknown to torch's registry is judged
to compute: the list is one of what is allowed, not of what is forbidden.
"""

from __future__ import annotations

import functools
import re

import torch

# Fresh memory; the first group leaves it uninitialised, the second fills it (a fused part
# counts a fill as a pass over memory).
EMPTY = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted"}
FILLED = {"zeros", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full",
          "zero_", "fill_", "scalar_tensor", "resize_"}  # fmt: skip
MOVEMENT = {"copy_", "clone", "_to_copy", "to", "_local_scalar_dense", "item", "lift_fresh_copy", "_unsafe_view",
            "_copy_from", "_copy_from_and_resize"}  # fmt: skip
METADATA = {"set_", "resize_as_", "is_nonzero", "_has_compatible_shallow_copy_type", "record_stream", "is_pinned",
            "size", "stride", "sym_size", "sym_stride", "numel", "dim", "is_contiguous"}  # fmt: skip


# What the ops a student runs without meaning to are, in the words of the code that runs them.
MEANINGS = {
    "_local_scalar_dense": "copies one value to the CPU and waits for the GPU to finish: `float(t)`, `int(t)`, "
                           "`t.item()` or `if t:` on a tensor",
    "item": "copies one value to the CPU and waits for the GPU to finish: `float(t)`, `int(t)`, `t.item()` or "
            "`if t:` on a tensor",
    "copy_": "a pass over memory: `t[...] = u` or `t.copy_(u)`",
    "_to_copy": "a pass over memory: `t.to(dtype)`, `t.float()` or `.contiguous()` of a strided tensor",
    "clone": "a pass over memory: `t.clone()` or `.contiguous()`",
    "fill_": "a pass over memory: `torch.full`, `torch.ones` or `t.fill_(v)`",
    "zero_": "a pass over memory: `torch.zeros` or `t.zero_()`",
    "add": "torch's elementwise add, a kernel of its own: `a + b`",
    "mul": "torch's elementwise multiply, a kernel of its own: `a * b`",
    "host::numpy": "a tensor's values handed to numpy on the host: `t.numpy()`, `np.asarray(t)`",
    "host::tolist": "a tensor's values made Python numbers on the host: `t.tolist()`",
    "host::to_dlpack": "a tensor's memory handed to another library through DLPack: `np.from_dlpack(t)`",
    "host::from_dlpack": "a tensor made from another library's memory through DLPack",
    "host::from_numpy": "a tensor made from a numpy array: `torch.from_numpy(a)`",
    "host::frombuffer": "a tensor made from a host buffer: `torch.frombuffer(b)`",
    "host::as_tensor": "a tensor made from a host array or list: `torch.as_tensor(a)`",
    "host::asarray": "a tensor made from a host array or list: `torch.asarray(a)`",
    "host::tensor": "a tensor made from a host array or list: `torch.tensor(a)`",
}  # fmt: skip

# Values that cross between torch and the host a few at a time (grader/child/host_reads.py's
# gateways, `host::` ops, and a read of one value, `float(t)`): a scale read or two per call is
# fine, more is the call's data worked on where the student's kernel is not.
HOST = "host::"
VALUE_READS = {"_local_scalar_dense", "item"}
VALUES_PER_CALL = 64


def moves_values(op: str) -> bool:
    """Whether an op is judged by how many values it moved between torch and the host."""
    return op.startswith(HOST) or base_name(op) in VALUE_READS


def moves_too_many(op: str, count: int, calls: int) -> bool:
    return moves_values(op) and count > VALUES_PER_CALL * max(calls, 1)


def meaning(op: str) -> str:
    return MEANINGS.get(base_name(op), "")


def base_name(op: str) -> str:
    return op.removeprefix("aten::").split(".")[0]


@functools.cache
def is_view(name: str) -> bool:
    """Whether every overload of aten::name that returns tensors returns aliases it does not write."""
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return False
    verdicts = []
    for overload in packet.overloads():
        returns = [r for r in getattr(packet, overload)._schema.returns if "Tensor" in str(r.type)]
        if returns:
            verdicts.append(all(r.alias_info is not None and not r.alias_info.is_write for r in returns))
    return bool(verdicts) and all(verdicts)


def category(op: str) -> str:
    """"allocation", "fill", "view", "movement", "metadata" or "compute"."""
    name = base_name(op)
    if name in EMPTY:
        return "allocation"
    if name in FILLED:
        return "fill"
    if name in MOVEMENT:
        return "movement"
    if name in METADATA:
        return "metadata"
    return "view" if is_view(name) else "compute"


# Ops that do no work of their own: `x.to(dtype)` runs aten::_to_copy when a copy is needed and
# nothing otherwise, `x.type_as(y)` runs aten::to. Like a view (whose schema says it returns an
# alias), such an op is judged by the ops it ran: `x.contiguous()` of a strided tensor is the
# aten::clone under it, a pass over memory, and `x.to(x.dtype)` is nothing at all.
FORWARDING = {"to", "type_as"}


def delegates(op: str) -> bool:
    """Whether an op is judged by the ops it runs rather than by itself."""
    return base_name(op) in FORWARDING or category(op) == "view"


def forbidden(op: str, allowed: tuple[str, ...]) -> bool:
    """An op the part does not allow: one that computes, unless the part names it."""
    return category(op) == "compute" and base_name(op) not in allowed


def touches_data(op: str) -> bool:
    """For a fused part: everything but fresh uninitialised memory, views and metadata is a pass
    over memory of its own (on a GPU, a kernel of torch's)."""
    return category(op) not in ("allocation", "view", "metadata")


# torch's own kernels as the GPU names them (demangled), for the witness (grader/witness/judge.py),
# which sees kernels, not ops: those of the ops that compute nothing (a copy or a conversion, a
# fill), and those of each op a part may allow by name. Anything else in a graded call is a kernel
# of torch's computing, or a library's. Names as torch 2.11 launches them on an H100.
MOVEMENT_KERNELS = re.compile(r"at::native::.*(direct_copy_kernel_cuda|copy_device_to_device|\bcopy_kernel\b|FillFunctor)")
OP_KERNELS = {"add": r"CUDAFunctor_add|AddFunctor", "add_": r"CUDAFunctor_add|AddFunctor",
              "mul": r"MulFunctor", "mul_": r"MulFunctor"}  # fmt: skip
