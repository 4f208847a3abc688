"""Whose work it was: the parent's reading of what ran during a call (a child's `Activity`).

Three witnesses report (child/activity.py, hooks.py, guard.py): the torch ops the student's code
called on any thread, the Triton launches it made, and on a GPU every kernel the GPU ran with the
torch op that launched it. The verdicts, each naming what it saw:
- `tampering`: a harness object rebound, something the guard refuses (ctypes, gc's object walks,
  subprocesses, native code...), or the profiler stopped during the call;
- `forbidden_op`: a torch op that computes and that the part does not allow (ops.py), or a GPU
  kernel that is not the student's own: not launched by an allowed op, not a Triton kernel the
  student launched (as many times as it ran), not a kernel of the student's .cu;
- `no_kernel_launched`: no kernel of the student's ran (on a GPU: the profiler saw none);
- `not_fused`: a fused part that launched more kernels, or ran a torch op that touches data;
- `forbidden_op` too, for a part that requires block pointers (`loads = "block_pointers"`): a
  kernel of the call that loads a tile through a tensor of pointers, counted in its TTIR (the
  child's `Activity.loads`, child/loads.py), or a call whose kernels load nothing through a
  block pointer or a tensor descriptor.
"""

from __future__ import annotations

import re
from collections import Counter

from grader.judging import ops
from grader.messages.reports import Activity, KernelLoads, OpCount
from grader.judging.numerics import Verdict
from grader.assignment.spec import Part


def kernel_base(name: str) -> str:
    """A kernel's name without return type, template arguments and parameters: how a demangled
    name from the profiler and one from the student's library are compared. Template arguments
    may hold parentheses (cu++filt writes `k<(int)32>`), so they go before the parameters do."""
    name = re.sub(r"^(void|static|__global__)\s+", "", name.strip())
    depth, kept = 0, []
    for char in name:
        if char in "<>":
            depth += 1 if char == "<" else -1
        elif depth == 0 and char == "(":
            break  # the parameter list
        elif depth == 0:
            kept.append(char)
    return "".join(kept).strip()


def harness_tampering(activity: Activity | None) -> Verdict | None:
    if activity is None:
        return None
    if activity.patched:
        objects = activity.patched
        names = ", ".join(objects[:6]) + (f" and {len(objects) - 6} more" if len(objects) > 6 else "")
        when = "while your file was imported" if activity.patched_at_import else "during a call"
        return Verdict("tampering", f"{names} {'was' if len(objects) == 1 else 'were'} replaced {when}: the grader's "
                       "clocks, CUDA events and functions are not yours to change", {"patched": objects})  # fmt: skip
    if activity.refused:
        return Verdict("tampering", "your code tried what graded code may not do: " + "; ".join(activity.refused[:5]),
                       {"refused": activity.refused})  # fmt: skip
    if activity.profiler_lost:
        return Verdict("tampering", "the grader's profiler was stopped or replaced during the call: the work the call "
                       "did cannot be accounted for")  # fmt: skip
    return None


def described(op: OpCount) -> str:
    """An op as a student can act on it: its name, what it is, and the line of theirs that ran it."""
    text = op.name
    if ops.meaning(op.name):
        text += f" ({ops.meaning(op.name)})"
    if ops.moves_values(op.name):
        text += f", {op.count} values"
    if op.where:
        text += f", first run from {op.where}"
    return text


def forbidden_ops(part: Part, activity: Activity, calls: int = 1) -> Verdict | None:
    """A torch op that computes and that the part does not allow, or more values moved between torch
    and the host than a call needs (ops.moves_too_many): its data worked on outside the kernel."""
    bad = [op for op in activity.ops if ops.moves_too_many(op.name, op.count, calls)
           or (not ops.moves_values(op.name) and ops.forbidden(op.name, part.allowed_ops))]  # fmt: skip
    if not bad:
        return None
    names = "; ".join(described(op) for op in bad)
    threads = " (some from a thread other than the one the grader called)" if any(op.threads > 1 for op in bad) else ""
    host = (f"; more than {ops.VALUES_PER_CALL} values a call taken to the host or brought from it is the call's data "
            "worked on where your kernel is not" if any(ops.moves_values(op.name) for op in bad) else "")  # fmt: skip
    return Verdict("forbidden_op", f"the call ran torch's {names}{threads}: computing is your kernel's job here; "
                   f"torch may only allocate, view and copy{host}", {"ops": [op.name for op in bad]})  # fmt: skip


def foreign_kernels(activity: Activity, cuda_kernels: set[str]) -> list[str]:
    """GPU kernels that no allowed op launched and that are not the student's: more runs of a
    name than the student's Triton launches of it, or a name found in no launch and no .cu."""
    own = Counter(_own_launches(activity))
    foreign = []
    for kernel in activity.kernels:
        if kernel.op:
            continue  # launched by a torch op: that op is judged (forbidden_ops)
        base = kernel_base(kernel.name)
        if base in cuda_kernels:
            continue
        if kernel.graph and base in own:
            continue  # a replay of a graph of the student's own launches (do_bench_cudagraph): not counted
        if own[base] >= kernel.count:
            own[base] -= kernel.count
            continue
        foreign.append(kernel.name)
    return foreign


def _own_launches(activity: Activity) -> dict[str, int]:
    own = Counter()
    for launch in activity.launches:
        if launch.own:
            own[launch.kernel] += launch.count
    return dict(own)


def _runs(name: str, activity: Activity) -> str:
    """A foreign kernel as the verdict shows it; one that bears the name of a kernel of the
    student's says how often it ran against how often their code launched it."""
    base = kernel_base(name)
    launched = _own_launches(activity).get(base)
    if launched is None:
        return name[:120]
    eager = sum(k.count for k in activity.kernels if kernel_base(k.name) == base and not k.op and not k.graph)
    graph = sum(k.count for k in activity.kernels if kernel_base(k.name) == base and not k.op and k.graph)
    return (f"{name[:120]} (ran {eager} times outside a CUDA graph and {graph} times in one; "
            f"your code launched it {launched} times)")


def own_kernel_ran(part: Part, activity: Activity, device: str, cuda_kernels: set[str]) -> bool:
    if device != "cuda":
        return part.is_cuda or any(launch.own for launch in activity.launches)
    names = {kernel_base(k.name) for k in activity.kernels if not k.op}
    if part.is_cuda:
        return bool(names & cuda_kernels)
    return bool(names & {launch.kernel for launch in activity.launches if launch.own})


def integrity(part: Part, activity: Activity, device: str, calls: int, cuda_kernels: set[str] = frozenset(),
              witnessed: bool = False) -> Verdict | None:  # fmt: skip
    """The first integrity verdict that applies to one case's calls, or None. `witnessed`: the
    grader's witness (grader/witness) saw the GPU's kernels, and judges them; the child's profiler
    then records none, and the launches its hooks logged stand for the student's own kernels."""
    verdict = harness_tampering(activity) or forbidden_ops(part, activity, calls)
    if verdict:
        return verdict
    device = "witness" if witnessed else device
    foreign = foreign_kernels(activity, cuda_kernels) if device == "cuda" else []
    if foreign:
        shown = ", ".join(_runs(name, activity) for name in foreign[:4])
        lost = sorted({k.name[:120] for k in activity.kernels if k.unlaunched and k.name in foreign})
        unseen = (f"; no launch of {', '.join(lost[:2])} was recorded, in a second run of the case as in the first"
                  if lost else "")  # fmt: skip
        return Verdict("forbidden_op", f"the GPU ran kernels that are not yours during the call: {shown} (a library "
                       f"called directly, or a kernel launched by something other than your code){unseen}",
                       {"kernels": foreign, "launched": _own_launches(activity)})  # fmt: skip
    if not own_kernel_ran(part, activity, device, cuda_kernels):
        launched = ", ".join(sorted({launch.kernel for launch in activity.launches}))
        seen = f" (kernels launched, none defined in your files: {launched})" if launched else ""
        what = "CUDA kernel of your .cu" if part.is_cuda else "Triton kernel of yours"
        return Verdict("no_kernel_launched", f"no {what} ran during the call{seen}")
    return fusion(part, activity, calls)


def fusion(part: Part, activity: Activity, calls: int) -> Verdict | None:
    """A fused part moves its data once: every extra kernel, and every torch op that touches data,
    is another round trip through memory."""
    if part.max_kernels is None:
        return None
    per_call = sum(launch.count for launch in activity.launches) / max(calls, 1)
    touching = sorted((op for op in activity.ops if ops.touches_data(op.name)), key=lambda op: op.name)
    compute = [op.name for op in touching]
    if per_call <= part.max_kernels and not compute:
        return None
    seen = []
    if per_call > part.max_kernels:
        names = ", ".join(sorted({launch.kernel for launch in activity.launches}))
        seen.append(f"{per_call:g} kernel launches per call ({names})")
    if compute:
        seen.append("torch ops that each run a kernel of their own: " + "; ".join(map(described, touching)))
    limit = "one kernel" if part.max_kernels == 1 else f"at most {part.max_kernels} kernels"
    return Verdict("not_fused", f"this part must be {limit} and nothing else; the call ran {' and '.join(seen)}",
                   {"kernels_per_call": per_call, "compute_ops": compute})  # fmt: skip


def required_loads(part: Part, activity: Activity) -> Verdict | None:
    """A part that requires block pointers: every kernel the call launched loads its tiles through
    block pointers or tensor descriptors, as its TTIR shows, and at least one such load ran."""
    if part.loads != "block_pointers":
        return None
    wanted = (f"{part.entry} must load its input tiles through tl.make_block_ptr (or a tensor descriptor), so that "
              "the compiler sees each tile's shape and strides")  # fmt: skip
    # The counts crossed from the child: a negative one is no count at all, and proves nothing.
    unread = next((k for k in activity.loads
                   if not k.read or min(k.block_pointers, k.descriptors, k.pointer_tensors) < 0), None)
    if unread is not None:
        return Verdict("forbidden_op", f"{wanted}; {unread.kernel} ({unread.file}) was compiled without the TTIR "
                       "that shows how it loads (Triton's cache told to keep binaries only?), so it cannot be checked")
    pointers = [k for k in activity.loads if k.pointer_tensors > 0]
    if pointers:
        return Verdict("forbidden_op", f"{wanted}; {_pointer_loads(pointers[0])}",
                       {"pointer_loads": {k.kernel: k.pointer_tensors for k in pointers}})  # fmt: skip
    if not any(k.block_pointers > 0 or k.descriptors > 0 for k in activity.loads):
        kernels = ", ".join(sorted({k.kernel for k in activity.loads})) or "none seen"
        return Verdict("forbidden_op", f"{wanted}; the kernels of the call ({kernels}) load no tile through either")
    return None


def _pointer_loads(kernel: KernelLoads) -> str:
    where = f", the first at {kernel.first_pointer_tensor}" if kernel.first_pointer_tensor else ""
    count = f"{kernel.pointer_tensors} tile{'s' if kernel.pointer_tensors > 1 else ''}"
    return (f"{kernel.kernel} ({kernel.file}) loads {count} through a tensor of pointers{where} (a tt.load of a "
            "tensor of !tt.ptr in its TTIR, where a block pointer's load is a tt.load of !tt.ptr<tensor<...>>)")
