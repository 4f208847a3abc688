"""torch's dispatch state on the harness's thread: the same after a student call as before it.

Between them, torch's mode stacks and the thread's dispatch keys decide what every torch call on
this thread runs. State that a student call leaves changed would run inside the harness's own
torch calls after it returns (copying an output to the host, comparing inputs, timing the
baseline) and could answer them as it likes: a torch function mode left on its stack hands the
harness the right sum whenever it copies out an empty output, and autocast left on would time the
baseline in half precision. So `worker.call` takes the state before handing control over and puts
it back as soon as control returns, before the harness runs a torch op of its own; what it found
changed is raised as LeftBehind, a task's `tampering`. The same holds across an import
(worker.Worker.entry), and for the garbage collector's callbacks, which run wherever a
collection happens. Student code can still run inside the harness's own (a finalizer of an
object the harness lets go): no mode but the harness's may be on a stack as a call begins or a
task starts and ends (`check_clean`). Read and restored through torch's own functions, bound here
at import, before student code could rebind them.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

import torch

_function_len = torch._C._len_torch_function_stack
_function_at = torch._C._get_function_stack_at
_function_pop = torch._C._pop_torch_function_stack
_function_push = torch._C._push_on_torch_function_stack
_function_state = torch._C._get_torch_function_state
_set_function_state = torch._C._set_torch_function_state
_dispatch_len = torch._C._len_torch_dispatch_stack
_dispatch_at = torch._C._get_dispatch_stack_at
_dispatch_pop = torch._C._pop_torch_dispatch_stack
_dispatch_push = torch._C._push_on_torch_dispatch_stack
_included = torch._C._dispatch_tls_local_include_set
_excluded = torch._C._dispatch_tls_local_exclude_set
_include = torch._C._dispatch_tls_set_dispatch_key_included
_exclude = torch._C._dispatch_tls_set_dispatch_key_excluded
_KEYS = tuple(torch._C.DispatchKey.__members__.values())
# Read through the types' own methods, taken now: no method student code puts on a class runs here.
_raw = torch._C.DispatchKeySet.raw_repr
_has = torch._C.DispatchKeySet.has
_from_raw = torch._C.DispatchKeySet.from_raw_repr
_state_value = torch._C._TorchFunctionState.__int__
_qualname = vars(type)["__qualname__"].__get__
_ENABLED_STATE = torch._C._TorchFunctionState.ENABLED
_ENABLED = _state_value(_ENABLED_STATE)
# The collector's callbacks run at each collection, wherever it happens (in the harness's code
# too): student code may add none that outlives its call. The list itself, taken now: rebinding
# `gc.callbacks` changes nothing the collector calls.
_gc_callbacks = gc.callbacks
# The pre-dispatch modes (torch.export's) live in Python, in torch._ops; the snapshot watches these
# names (snapshot.WATCHED), so rebinding them is reported too.
_pre_dispatch_len = torch._ops._len_torch_dispatch_stack_pre_dispatch
_pre_dispatch_pop = torch._ops._pop_mode_from_pre_dispatch


class LeftBehind(Exception):
    """A student call (or import) left torch's dispatch state changed; it has been put back."""

    def __init__(self, changes: list[str], restored: bool):
        super().__init__("; ".join(changes))
        self.changes, self.restored = changes, restored


@dataclass(frozen=True, eq=False)
class State:
    """Modes are told apart by identity alone: comparing them would run their own `__eq__`."""

    functions: tuple  # the torch function modes, bottom first
    dispatches: tuple  # the dispatch modes (torch's infrastructure modes among them), bottom first
    pre_dispatch: int  # how many pre-dispatch modes
    keys: tuple[int, int]  # the thread's dispatch keys, included and excluded (raw DispatchKeySets)
    function_state: object  # torch function handling: enabled, or disabled (for subclasses, or all)
    gc_callbacks: tuple  # what the collector calls at each collection

    def same(self, other: State) -> bool:
        return (_same(self.functions, other.functions) and _same(self.dispatches, other.dispatches)
                and self.pre_dispatch == other.pre_dispatch and self.keys == other.keys
                and _state_value(self.function_state) == _state_value(other.function_state)
                and _same(self.gc_callbacks, other.gc_callbacks))  # fmt: skip


def take() -> State:
    return State(tuple(_function_at(i) for i in range(_function_len())),
                 tuple(_dispatch_at(i) for i in range(_dispatch_len())), _pre_dispatch_len(),
                 (_raw(_included()), _raw(_excluded())), _function_state(), tuple(_gc_callbacks))  # fmt: skip


def check_clean(harness_modes: tuple[type, ...]) -> State:
    """Before the harness hands control over, and as each task begins: no mode but the harness's
    own (of exactly the types in `harness_modes`) may be on a stack; returns the state, checked.
    A mode that is got there while the harness itself ran: student code run by a finalizer, say,
    of an object the harness let go. It is taken off (the harness's own stay, in order), and
    LeftBehind raised."""
    now = take()
    strays = [m for m in now.functions + now.dispatches if type(m) not in harness_modes]
    if not strays and not now.pre_dispatch and _state_value(now.function_state) == _ENABLED:
        return now
    kept = tuple(m for m in now.dispatches if type(m) in harness_modes)
    clean = State((), kept, 0, now.keys, _ENABLED_STATE, now.gc_callbacks)
    try:
        put_back(clean)
    except LeftBehind as left:
        raise LeftBehind([f"found while the grader's own code ran: {change}" for change in left.changes],
                         left.restored) from None  # fmt: skip


def _same(now: tuple, then: tuple) -> bool:
    return len(now) == len(then) and all(a is b for a, b in zip(now, then))


def put_back(before: State) -> None:
    """Restore the state `take` returned, and raise LeftBehind naming what was changed."""
    now = take()
    if now.same(before):
        return
    changes = []
    if not _same(now.functions, before.functions):
        changes.append(_modes("torch function", now.functions, before.functions))
        while _function_len():
            _function_pop()
        for mode in before.functions:
            _function_push(mode)
    if not _same(now.dispatches, before.dispatches):
        changes.append(_modes("torch dispatch", now.dispatches, before.dispatches))
        while _dispatch_len():
            _dispatch_pop(None)
        for mode in before.dispatches:
            _dispatch_push(mode)
    if now.pre_dispatch != before.pre_dispatch:
        changes.append(f"{now.pre_dispatch - before.pre_dispatch:+d} pre-dispatch mode(s)")
        while _pre_dispatch_len() > before.pre_dispatch:
            _pre_dispatch_pop()
    if now.keys != before.keys:
        changes.append("the thread's dispatch keys (autocast, the Python dispatcher or another key switched on or off)")
        _put_keys_back(before)
    if _state_value(now.function_state) != _state_value(before.function_state):
        changes.append("torch function handling switched off")
        _set_function_state(before.function_state)
    if not _same(now.gc_callbacks, before.gc_callbacks):
        changes.append("a callback added to the garbage collector's")
        _gc_callbacks[:] = before.gc_callbacks
    raise LeftBehind(changes, take().same(before))


def _modes(kind: str, now: tuple, then: tuple) -> str:
    added = [_qualname(type(m)) for m in now if not any(m is t for t in then)]
    removed = [_qualname(type(m)) for m in then if not any(m is n for n in now)]
    words = f"the {kind} mode stack changed"
    if added:
        words += f": {', '.join(added)} left on it"
    if removed:
        words += f"{';' if added else ':'} {', '.join(removed)} (the grader's) taken off it"
    return words


def _put_keys_back(before: State) -> None:
    included, excluded = (_from_raw(raw) for raw in before.keys)
    for key in _KEYS:
        try:
            _include(key, _has(included, key))
            _exclude(key, _has(excluded, key))
        except (RuntimeError, ValueError, TypeError):  # an alias key, which no thread holds
            continue
