"""The profiler's switches, taken away before student code runs.

The grader learns which torch ops a graded call ran from torch's profiler (activity.py), which
sees each op as the dispatcher calls it (its RecordFunction callbacks). From inside its own call,
student code could blind it, and the session would still end as if nothing had happened:
- switch RecordFunction or the profiler's collection off: `_enable_record_function(False)`,
  `_toggle_collection_dynamic`, `_clear_callbacks` (and the like in SWITCHES). The harness never
  calls these once set up, so each is replaced by a refusal and no reference to it is kept.
- stop the harness's session, read the harness's mark from what stopping returns, compute
  unseen, then start a session of its own bearing the mark (LIFECYCLE): the harness starts and
  stops its sessions with these, so they are gates.
- run an op's kernel without the dispatcher's RecordFunction (DISPATCH): `OpOverload.redispatch`,
  the `_op_dk` that torch.ops gives each overload (from `torch._C._get_operation_overload`), and
  `torch.library.get_kernel(...).call_boxed`. torch's custom-op machinery does this on its own:
  an op made with `torch.library.custom_op` redispatches itself below its autograd kernel, so
  these are gates too.

A gate stands in for the function, in every namespace that held it, and holds no reference to
it: a call raises the guard's KEPT_EVENT with an empty list, and the guard's hook (the only
holder of the original: an audit hook cannot be listed or removed from Python) judges who
asked by its usual walk and puts the original in the list where `_hand_out` allows it:
- the harness (no student code and no sanctioned entry on the stack): any gate but a switch;
- anyone else: an op all of whose kernels were registered from Python (a student's custom op:
  its kernels are Python, and every op they run passes through the dispatcher and is seen), or
  an `_op_dk` to an op's composite kernel (written in other ops, each dispatched and seen).
Student code refused is recorded as tampering with its line (guard.py). The list lives only in
the gate's frame, out of student code's reach: frames and gc's walks are refused to it, and so
are audit hooks, tracing and monitoring of its own, which would be handed the list.

Three more ways around the guard are gates of the same kind, though they are not the profiler's:
- a signal handler (HANDLER): Python hands it the frame each signal interrupts, with no audit
  event on the way, and in the child that is a harness frame as often as a student's; from one,
  the worker's `send`, and every report before it is signed. Only the harness may set one.
- registering kernels (REGISTRAR): a kernel of the student's own registered for an op of torch's
  (`torch.library.Library("aten", "IMPL").impl("_to_copy", ...)`) would run inside the harness's
  torch calls after the call returns: copying an output to the host, say, which it could answer
  with the right sum. Student code may register for namespaces that no op held before it ran
  (its own custom ops), through libraries it made itself; torch's own libraries, and libraries
  for torch's namespaces, are the harness's.
- a call's data moved between torch and the host (GATEWAY, host_reads.py): handed to anyone, and
  noted by the hook, with what it moves, where student code asked.
- writing a file from C++ (WRITER, writers.py): torch.save's zip writer, torch.from_file and the
  like raise no `open` audit event; each gate raises one for its file first, which the guard judges
  as any other write, and the rule then hands the writer to anyone.
- making a module again (MAKER): `_imp.create_builtin` makes a fresh `_signal` or `_imp`, whose
  functions no gate stands for, and `_imp.create_dynamic` of an extension module of single-phase
  init (torch._C) writes that module's first namespace back into the live module, originals over
  gates. Every import of a builtin or extension module passes through these: they make any module
  but one the child had loaded before student code ran, from the caller's spec read once (a name
  read twice could change in between).
"""

from __future__ import annotations

import ctypes
import gc
import re
import sys
from functools import partial
from importlib.machinery import EXTENSION_SUFFIXES
from types import FrameType, FunctionType, ModuleType, SimpleNamespace

import torch

from grader.child import host_reads, writers
from grader.child.guard import KEPT_EVENT, realpath, sealed
from grader.child.dotted import resolve

SWITCH, LIFECYCLE, DISPATCH, FACTORY = "switch", "lifecycle", "dispatch", "factory"
HANDLER, MAKER, REGISTRAR, LIBRARY_FACTORY, WRITER = "handler", "maker", "registrar", "library factory", "writer"
GATEWAY = "gateway"
# Switches of RecordFunction and of the profiler's collection (and the execution-trace observer,
# which writes its own file from C++, where the guard does not look), by owner. The CUDA
# profiler's start and stop exist where torch is built with CUDA; no kernel needs them.
SWITCHES = {
    "torch._C._autograd": ("_enable_record_function", "_toggle_collection_dynamic", "_clear_callbacks",
                           "_set_empty_test_observer", "_kineto_step", "_enable_profiler_legacy",
                           "_disable_profiler_legacy"),
    "torch._C._profiler": ("_add_execution_trace_observer", "_enable_execution_trace_observer",
                           "_disable_execution_trace_observer", "_remove_execution_trace_observer"),
    "torch._C._cudart": ("cudaProfilerStart", "cudaProfilerStop"),
}  # fmt: skip
LIFECYCLE_GATES = {"torch._C._autograd": ("_prepare_profiler", "_enable_profiler", "_disable_profiler")}
DISPATCH_GATES = {"torch._C._DispatchOperatorHandle": ("redispatch_boxed",),
                  "torch._C._SafeKernelFunction": ("call_boxed",)}
FACTORY_NAME = "torch._C._get_operation_overload"
HANDLER_GATES = {"_signal": ("signal",)}  # signal.signal calls this one
MAKER_GATES = {"_imp": ("create_builtin", "create_dynamic")}
LIBRARY_FACTORY_GATES = {"torch._C": ("_dispatch_library",)}  # what torch.library.Library registers through
REGISTRAR_GATES = {"torch._C._DispatchModule": ("impl", "impl_t_t", "impl_with_aoti_compile", "def_", "def_legacy",
                                                "def_name_t_t", "def_schema_t_t", "define", "fallback",
                                                "fallback_fallthrough", "register_ad_inplace_or_view_fallback")}  # fmt: skip
# Types that Python calls immutable and that hold what a gate stands for (as a staticmethod, say):
# gc finds no type that owns a dict of theirs, so they are named.
STATIC_TYPES = ("torch._C._VariableFunctionsClass", "torch._C.StorageBase", "torch._C.TensorBase")
_Registrar = getattr(torch._C, "_DispatchModule", None)
# Bound now, before student code could rebind them: how the rule reads which op a call is for.
_dump = torch._C._dispatch_dump
_Handle = torch._C._DispatchOperatorHandle
_schema_of = vars(_Handle)["schema"].__func__
_schema_name = vars(torch._C.FunctionSchema)["name"].fget
_overload_name = vars(torch._C.FunctionSchema)["overload_name"].fget
_Kernel = getattr(torch._C, "_SafeKernelFunction", None)  # torch.library.get_kernel's kernels, where torch has them
_handle_of = getattr(vars(_Kernel).get("op_handle"), "fget", None) if _Kernel is not None else None
_COMPOSITE = tuple(getattr(torch._C.DispatchKey, k) for k in ("CompositeImplicitAutograd",
                                                              "CompositeImplicitAutogradNestedTensor")
                   if hasattr(torch._C.DispatchKey, k))  # fmt: skip
_REGISTERED_AT = re.compile(r"registered at (\S*)")
_PYTHON_FILE = re.compile(r".+\.py:\d+")
_audit = sys.audit


def _refusal(name: str, why: str = "it is the grader's alone while graded code runs") -> PermissionError:
    return PermissionError(f"the grader refuses {name} in graded code: {why}")


def _gate(name):
    """A function to stand in for the one `name` stands for, holding no reference to it."""

    def gate(*args, **kwargs):
        box = []
        _audit(KEPT_EVENT, name, args, box)
        if not box:
            raise _refusal(name if isinstance(name, str) else "_op_dk")
        return box[0](*args, **kwargs)

    if isinstance(name, str):
        gate.__name__ = gate.__qualname__ = name.rpartition(".")[2]
    return gate


def _maker_gate(name: str):
    """A gate for a maker of modules: the caller's spec (any object) is read here, once, and the
    hook's rule makes the module from a spec of its own holding what was read."""

    def gate(spec, *rest):
        read = (spec.name, getattr(spec, "origin", None), getattr(spec, "loader", None),
                getattr(spec, "submodule_search_locations", None))  # fmt: skip
        box = []
        _audit(KEPT_EVENT, name, read, box)
        if not box:
            raise _refusal(name, "it would make again a module the grader had loaded")
        return box[0]()

    gate.__name__ = gate.__qualname__ = name.rpartition(".")[2]
    return gate


def _overload_factory(qualname: str, overload: str):
    """torch.ops's source of overloads, through a gate: each overload's `_op_dk` is a gate too."""
    box = []
    _audit(KEPT_EVENT, FACTORY_NAME, (), box)
    if not box:
        raise _refusal(FACTORY_NAME)
    found = box[0](qualname, overload)
    if found is None:
        return None
    op, _, tags = found
    return op, _gate((qualname, overload)), tags


def take_away() -> dict:
    """Put a gate in place of every switch, lifecycle and dispatch function, wherever it is held;
    returns what the guard's hook keeps: each original the rule may hand out, the gates' code,
    the rule, and the holders it found but could not change (`left`: none on the torch we ship)."""
    taken = {}  # id of the original -> (the original, its gate, its kind, its name)
    groups = ((SWITCHES, SWITCH), (LIFECYCLE_GATES, LIFECYCLE), (DISPATCH_GATES, DISPATCH), (HANDLER_GATES, HANDLER),
              (MAKER_GATES, MAKER), (LIBRARY_FACTORY_GATES, LIBRARY_FACTORY), (REGISTRAR_GATES, REGISTRAR),
              (writers.WRITER_GATES, WRITER), (host_reads.GATEWAYS, GATEWAY))  # fmt: skip
    makers = {MAKER: _maker_gate, WRITER: writers.gate}
    for group, kind in groups:
        for owner_path, names in group.items():
            owner = resolve(owner_path, strict=False)
            for name in names:
                held = vars(owner).get(name) if owner is not None else None
                if held is not None:  # None: not in this build of torch
                    shown = f"{owner_path}.{name}"
                    gate = makers.get(kind, _gate)(shown)
                    taken[id(held)] = (held, staticmethod(gate) if type(held) is staticmethod else gate, kind, shown)
    factory = torch._C._get_operation_overload
    taken[id(factory)] = (factory, _overload_factory, FACTORY, FACTORY_NAME)
    left = _replace_everywhere(taken)
    for overload in _overloads():  # each holds its `_op_dk` alone (tests/test_guard.py)
        if type(vars(overload).get("_op_dk")) is not FunctionType:
            overload._op_dk = _gate((overload._schema.name, overload._schema.overload_name))
    table = {shown: (kind, None if kind == SWITCH else held) for held, _, kind, shown in taken.values()}
    gates = {id(c): c for c in (_gate("").__code__, _maker_gate("").__code__, _overload_factory.__code__,
                                writers.gate("").__code__)}  # fmt: skip
    kept = {"table": table, "gates": gates, "python_only": {}, "op_dk": {}, "left": left, **_loaded(),
            "namespaces": frozenset(str.partition(n, "::")[0] for n in torch._C._dispatch_get_all_op_names()),
            "made": {}}  # fmt: skip
    kept["hand_out"] = sealed(globals())["_hand_out"]
    # The gateways' uses the hook notes where student code asked, and how it counts what they move.
    kept["noted"], kept["measure"] = host_reads.names(), sealed(vars(host_reads))["measure"]
    kept["refusal"] = sealed(vars(host_reads))["refusal"]
    return kept


def _loaded() -> dict:
    """The modules loaded now, by name, and the files of the extension modules among them."""
    modules = list(sys.modules.items())
    files = [vars(m).get("__file__") for _, m in modules if isinstance(m, ModuleType)]
    extensions = {realpath(f) for f in files if type(f) is str and f.endswith(tuple(EXTENSION_SUFFIXES))}
    return {"loaded": frozenset(name for name, _ in modules), "loaded_files": frozenset(extensions)}


def _overloads() -> list:
    """Every overload torch.ops has made so far: torch.ops keeps each namespace it made, a namespace
    each packet, a packet each overload (the attribute it was first asked for)."""
    found = []
    for namespace in list(vars(torch.ops).values()):
        if isinstance(namespace, torch._ops._OpNamespace):
            for packet in list(vars(namespace).values()):
                if isinstance(packet, torch._ops.OpOverloadPacket):
                    found += [o for o in list(vars(packet).values()) if isinstance(o, torch._ops.OpOverload)]
    return found


def _class_namespaces(dicts: list) -> dict:
    """The class that owns each of `dicts` as its namespace, by the dict's id: the classes whose
    methods become gates first, then (one more walk of gc's objects) any other."""
    known = [resolve(path, strict=False) for path in (*DISPATCH_GATES, *REGISTRAR_GATES, *STATIC_TYPES)]
    owners = {id(gc.get_referents(vars(cls))[0]): cls for cls in known if cls is not None}
    modules = {id(vars(m)) for m in list(sys.modules.values()) if isinstance(m, ModuleType)}
    unknown = [d for d in dicts if id(d) not in owners and id(d) not in modules]
    if unknown:
        owners.update({id(namespace): o for o in gc.get_referrers(*unknown) if isinstance(o, type)
                       for namespace in gc.get_referents(o) if isinstance(namespace, dict)})  # fmt: skip
    return owners


def _set_on_type(cls: type, name: str, value) -> None:
    """setattr, also on a type that Python calls immutable (torch._C.TensorBase, StorageBase and
    _VariableFunctionsClass are): there the type's own namespace is written, and PyType_Modified
    tells Python, as C code that writes a type's dict must (its caches of lookups are dropped)."""
    try:
        setattr(cls, name, value)
    except TypeError:
        gc.get_referents(vars(cls))[0][name] = value
        ctypes.pythonapi.PyType_Modified(ctypes.py_object(cls))


def _replace_everywhere(taken: dict, depth: int = 0) -> list[str]:
    """Put each gate where its original is held: a module's or an instance's namespace, a class's
    (through setattr, which keeps the type's method cache right), a list, a set or a cell; a tuple
    in a list (torch.jit's (function, name) pairs) or a staticmethod in a class is made again with
    the gate, in its place. Returns the holders of any other kind, which still hold it."""
    originals = tuple(entry[0] for entry in taken.values())
    mine = {id(taken), id(originals), *(id(entry) for entry in taken.values())}
    gate_for = {key: entry[1] for key, entry in taken.items()}
    holders = [h for h in gc.get_referrers(*originals) if id(h) not in mine and not isinstance(h, FrameType)]
    classes = _class_namespaces([h for h in holders if isinstance(h, dict)])
    left = []
    remade = {}  # id of a tuple or staticmethod that holds an original -> (it, made again with the gate)
    for holder in holders:
        if depth and not (isinstance(holder, list) or id(holder) in classes):
            left.append(holder)
        elif isinstance(holder, dict):
            for key, value in list(holder.items()):
                if id(value) not in gate_for:
                    continue
                if id(holder) in classes:
                    _set_on_type(classes[id(holder)], key, gate_for[id(value)])
                else:
                    holder[key] = gate_for[id(value)]
        elif isinstance(holder, list):
            holder[:] = [gate_for.get(id(v), v) for v in holder]
        elif isinstance(holder, set):
            found = {v for v in holder if id(v) in gate_for}
            holder.difference_update(found)
            holder.update(gate_for[id(v)] for v in found)
        elif type(holder).__name__ == "cell":
            holder.cell_contents = gate_for[id(holder.cell_contents)]
        elif type(holder) in (tuple, staticmethod) and depth == 0:
            # torch.jit's list of builtins holds (function, name) pairs; a class a staticmethod.
            remade[id(holder)] = (holder, tuple(gate_for.get(id(v), v) for v in holder) if type(holder) is tuple
                                  else staticmethod(gate_for[id(holder.__func__)]))  # fmt: skip
        else:
            left.append(f"a {type(holder).__name__}: {str(holder)[:120]}")
    if remade:
        # Each made again where it is held, all in one more walk of gc's objects: a walk takes
        # 40 ms once torch is imported, and one walk per tuple (a dozen) was a fifth of a child's start.
        elsewhere = _replace_everywhere(remade, depth + 1)  # holders of any kind but a list or a class
        held = {id(r) for holder in elsewhere for r in gc.get_referents(holder)}
        left += [f"a {type(h).__name__}: {str(h)[:120]}" for h, _ in remade.values() if id(h) in held]
    return left


# --- The rule, run inside the guard's hook (over a sealed copy of this module's namespace) ---------


def _hand_out(kept: dict, name, args: tuple, harness: bool) -> tuple[object, str]:
    """(what the gate standing for `name` may call, for a caller that is or is not the harness; or
    None), and the refusal in words."""
    if type(name) is tuple:
        return _op_dk(kept, name, args, harness)
    entry = kept["table"].get(name) if type(name) is str else None
    if entry is None:
        return None, "a gate of the grader's, called for nothing it stands for"
    kind, original = entry
    if kind == MAKER:
        return _remade(kept, name, original, args)
    if kind == SWITCH:
        return None, f"{name} (a switch of the grader's profiler)"
    if kind in (FACTORY, WRITER, GATEWAY) or harness:
        return original, ""  # a writer's gate raised `open` for its file: the guard judged the write
    if kind == LIBRARY_FACTORY:
        return _library_for(kept, name, original, args)
    if kind == REGISTRAR:
        mine = len(args) > 0 and type(args[0]) is _Registrar and id(args[0]) in kept["made"]
        return (original, "") if mine else (None, f"{name} on a library of torch's (a kernel of yours for torch's op)")
    if kind == HANDLER:
        return None, f"{name} (a signal handler is handed the frame each signal interrupts, the grader's own among them)"
    if kind == LIFECYCLE:
        return None, f"{name} (the grader's profiler session is the grader's to start and stop)"
    op = _op_of(args)
    if op is not None and _python_only(kept, op):
        return original, ""
    return None, f"{name} of {op or 'an op'} (it runs torch's kernel where the grader's profiler does not see it)"


def _remade(kept: dict, name: str, make, read: tuple) -> tuple[object, str]:
    """A maker of modules, for any module but one loaded before student code ran (by its name or,
    for an extension, its file): a call that makes the module from a spec holding only what the
    gate read, each value of a plain type."""
    module, origin, loader, places = read if type(read) is tuple and len(read) == 4 else (None, None, None, None)
    if type(module) is not str or not (origin is None or type(origin) is str):
        return None, f"{name} of a module not named by a plain str"
    if module in kept["loaded"] or (origin is not None and realpath(origin) in kept["loaded_files"]):
        return None, f"{name} of {module} (a module loaded before student code ran, made again)"
    if type(places) is list:
        places = [p for p in places if type(p) is str]
    else:
        places = None
    parent = module if places is not None else str.rpartition(module, ".")[0]
    spec = SimpleNamespace(name=module, origin=origin, loader=loader, parent=parent, submodule_search_locations=places,
                           has_location=origin is not None, cached=None)  # fmt: skip
    return partial(make, spec), ""


def _library_for(kept: dict, name: str, make, args: tuple) -> tuple[object, str]:
    """A library (`_dispatch_library(kind, namespace, ...)`) for a namespace no op held before
    student code ran, noted as the student's own, so that registering through it is allowed."""
    namespace = args[1] if len(args) > 1 else None
    if type(namespace) is not str:
        return None, f"{name} for a namespace that is no plain str"
    if namespace in kept["namespaces"]:
        return None, f"{name} for {namespace}:: (your kernels for torch's ops: they would run inside the grader's calls)"
    return partial(_note_made, kept, make), ""


def _note_made(kept: dict, make, *args):
    made = make(*args)
    kept["made"][id(made)] = made  # held, so that its id names no other library later
    return made


def _op_dk(kept: dict, name: tuple, args: tuple, harness: bool) -> tuple[object, str]:
    """An overload's `_op_dk(key, ...)`: the op's kernel for one dispatch key."""
    if len(name) != 2 or type(name[0]) is not str or type(name[1]) is not str:
        return None, "_op_dk of a forged name"
    op = name[0] + "." + name[1] if name[1] else name[0]
    composite = len(args) > 0 and any(args[0] is key for key in _COMPOSITE)
    if not (harness or composite or _python_only(kept, op)):
        return None, f"_op_dk of {op} (it runs torch's kernel where the grader's profiler does not see it)"
    found = kept["op_dk"].get(name)
    if found is None:
        made = kept["table"][FACTORY_NAME][1](name[0], name[1])
        if made is None:
            return None, f"_op_dk of {op}, which does not exist"
        found = kept["op_dk"][name] = made[1]
    return found, ""


def _op_of(args: tuple) -> str | None:
    """The op a redispatch (`handle.redispatch_boxed(keyset, ...)`) or a kernel's direct call
    (`kernel.call_boxed(keyset, ...)`) is for, read through references taken at import."""
    held = args[0] if args else None
    if _handle_of is not None and type(held) is _Kernel:
        held = _handle_of(held)
    if type(held) is not _Handle:
        return None
    schema = _schema_of(held)
    name, overload = _schema_name(schema), _overload_name(schema)
    return name + "." + overload if overload else name


def _python_only(kept: dict, op: str) -> bool:
    """Whether every kernel of `op` was registered from Python: the op is of Python's own making
    (a custom op), and whatever its kernels run passes through the dispatcher, where the profiler
    sees it. torch's own ops, and those of native extensions, have kernels registered in C++."""
    known = kept["python_only"].get(op)
    if known is None:
        places = _REGISTERED_AT.findall(_dump(op))
        known = kept["python_only"][op] = bool(places) and all(_PYTHON_FILE.fullmatch(p) for p in places)
    return known
