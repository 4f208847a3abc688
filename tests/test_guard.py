"""The guard (grader/child/guard.py): what student code may not do in the child, and who may not.

It tells code objects apart by identity. A sanctioned library entry (a Triton launch, which
compiles and writes files) lets the code under it do what the guard refuses to student code.
Student code can make a code object EQUAL to a sanctioned one without touching the guard: compile
the library file's own text under its own name (allowed: an import does just that) and exec it
into a namespace the student fills. Were code objects compared by equality, that copy's frames
would pass for the sanctioned entry, and whatever its namespace calls would run unrefused.

Its hook runs nothing student code can rebind: the guard's globals, a builtin, `sys._getframe`,
`threading.get_ident`, a str subclass for a path; and student code may add no audit hook of its own.

It keeps the profiler's switches (grader/child/switches.py): every way student code could blind
torch's profiler from inside its call is refused as tampering with the student's line, while the
harness's own sessions still start and stop, no reference to what a gate stands for is left where
student code could reach it, and a student's `torch.library.custom_op` with `register_autograd`
(whose autograd kernel redispatches the op) still works, the torch ops inside it still seen; a real
child grades such a submission right. Each case runs in a process of its own (an audit hook cannot
be removed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import grade, requires_gpu
from grader.assignment.spec import REPO_ROOT

STUDENT = '''
import shutil


def direct(path):
    open(path, "w").close()


def through_the_entry(path):
    shutil.copyfile(__file__, path)


def through_an_equal_copy(path):
    namespace = {"__name__": "not_shutil"}
    exec(compile(open(shutil.__file__).read(), shutil.__file__, "exec"), namespace)
    assert namespace["copyfile"].__code__ == shutil.copyfile.__code__, "the copy is equal to the entry"
    assert namespace["copyfile"].__code__ is not shutil.copyfile.__code__
    namespace["copyfile"](__file__, path)
'''

HARNESS = '''
import json, shutil, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from grader.child import guard

root = Path(sys.argv[2])


def load():  # the boundary: student code runs below it (as submission.run_module in the child)
    import student

    return student


guard.install(root, {shutil.copyfile.__code__}, {load.__code__})
sys.path.insert(0, str(root))
student = load()

found = {}
for name in ("direct", "through_the_entry", "through_an_equal_copy"):
    try:
        getattr(student, name)(str(root / (name + ".out")))
        found[name] = "allowed"
    except PermissionError as error:
        found[name] = "refused: " + str(error)
print(json.dumps(found))
'''


def test_an_equal_copy_of_a_sanctioned_entry_is_not_sanctioned(tmp_path: Path) -> None:
    (tmp_path / "student.py").write_text(STUDENT)
    done = subprocess.run([sys.executable, "-I", "-c", HARNESS, str(REPO_ROOT), str(tmp_path)], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["direct"].startswith("refused"), found
    assert found["through_the_entry"] == "allowed", found
    assert found["through_an_equal_copy"].startswith("refused"), found
    assert "student.py, line" in found["through_an_equal_copy"], "the refusal names the student's line"
    assert not (tmp_path / "through_an_equal_copy.out").exists()


REBINDS = '''
import builtins, gc, sys, threading


def _gc_objects():
    return len(gc.get_objects())


def a_guard_global():
    import grader.child.guard as guard

    guard._asker = lambda state, frame: ("harness", "")
    guard._TAMPER_EVENTS = frozenset()
    return _gc_objects()


def an_asker_global():
    import grader.child.asker as asker

    asker._asker = lambda state, frame, imports=False: ("harness", "")
    asker._is_library = lambda state, filename: True
    asker.STUDENT = "nobody"
    return _gc_objects()


def _runs_inside_the_hook(owner, name, make):
    """Rebind owner.name with a function that asks for gc's objects if the hook ever runs it."""
    real, ran = getattr(owner, name), []

    def spy(*args, **kwargs):
        if not ran:
            ran.append(True)
            _gc_objects()
        return make(real)(*args, **kwargs)

    setattr(owner, name, spy)
    try:
        open("written.out", "w")  # refused: the hook walks the stack
    except PermissionError:
        pass
    finally:
        setattr(owner, name, real)
    return "ran inside the hook" if ran else "never ran"


def a_builtin():
    return _runs_inside_the_hook(builtins, "id", lambda real: real)


def sys_getframe():
    return _runs_inside_the_hook(sys, "_getframe", lambda real: lambda depth=0: real(depth + 1))


def threading_get_ident():
    return _runs_inside_the_hook(threading, "get_ident", lambda real: real)


def a_str_that_lies():
    class Harmless(str):
        def startswith(self, *args):
            return False

    return open(Harmless("/proc/self/status")).read()[:10]


def a_bytes_path():
    return open(b"/proc/self/status").read()[:10]


def an_audit_hook_of_its_own():
    seen = []
    sys.addaudithook(lambda event, args: seen.append(event))
    sys.audit("student.probe")
    return "the hook was added" if seen else "no hook was added"


def the_kept_event():
    sys.audit("grader.kept", "torch._C._autograd._disable_profiler", (), [])
'''

REBINDS_HARNESS = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from grader.child import guard

root = Path(sys.argv[2])


def load():
    import student

    return student


taken, _ = guard.install(root, set(), {load.__code__})
sys.path.insert(0, str(root))
student = load()
found = {}
for name in ("a_guard_global", "an_asker_global", "a_builtin", "sys_getframe", "threading_get_ident", "a_str_that_lies", "a_bytes_path",
             "an_audit_hook_of_its_own", "the_kept_event"):
    try:
        found[name] = "allowed: " + str(getattr(student, name)())
    except PermissionError as error:
        found[name] = "refused: " + str(error)
print(json.dumps({"found": found, "tampering": [r.what for r in taken() if r.kind == guard.TAMPERING]}))
"""


def _run(harness: str, student: str, root: Path, timeout: float = 60) -> dict:
    """The harness's printed result. torch's compiler cache folder exists beforehand, as in the child
    (main.py): a custom op's first call imports torch._dynamo, which looks for it."""
    (root / "student.py").write_text(student)
    (root / "inductor").mkdir()
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor")}
    done = subprocess.run([sys.executable, "-I", "-c", harness, str(REPO_ROOT), str(root)], capture_output=True,
                          text=True, timeout=timeout, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_hook_runs_nothing_student_code_can_rebind(tmp_path: Path) -> None:
    result = _run(REBINDS_HARNESS, REBINDS, tmp_path)
    found = result["found"]
    assert found["a_guard_global"].startswith("refused: the grader refuses gc.get_objects"), found
    assert found["an_asker_global"].startswith("refused: the grader refuses gc.get_objects"), found
    for name in ("a_builtin", "sys_getframe", "threading_get_ident"):
        assert found[name] == "allowed: never ran", f"{name}: student code ran inside the hook ({found[name]})"
    for name in ("a_str_that_lies", "a_bytes_path"):
        assert found[name].startswith("refused: the grader refuses reading /proc/self/status"), found[name]
    assert found["an_audit_hook_of_its_own"] == "allowed: no hook was added", found
    assert "sys.addaudithook" in result["tampering"], result["tampering"]
    assert found["the_kept_event"].startswith("refused: the grader refuses raising the grader's own audit event"), found


SWITCHES = '''
import threading

import torch
from torch.autograd import ProfilerActivity

x, y = torch.ones(3), torch.full((3,), 2.0)
CPU = torch._C.DispatchKey.CPU
ONLY_CPU = torch._C.DispatchKeySet(CPU)


def record_function_off():
    torch._C._autograd._enable_record_function(False)


def collection_paused():
    torch._C._autograd._toggle_collection_dynamic(False, {ProfilerActivity.CPU})


def callbacks_cleared():
    torch._C._autograd._clear_callbacks()


def test_observer_added():
    torch.autograd._set_empty_test_observer(True, 0.0)


def kineto_stepped():
    torch.autograd.profiler._kineto_step()


def session_stopped():
    torch.autograd._disable_profiler()


def session_started():
    torch.autograd.profiler.profile().__enter__()


def redispatched():
    return torch.ops.aten.add.Tensor.redispatch(ONLY_CPU, x, y).tolist()


def redispatched_boxed():
    return torch.ops.aten.mul.Tensor._handle.redispatch_boxed(ONLY_CPU, x, y).tolist()


def by_dispatch_key():
    return torch.ops.aten.add.Tensor._op_dk(CPU, x, y).tolist()


def by_dispatch_key_made_now():
    _, op_dk, _ = torch._C._get_operation_overload("aten::sub", "Tensor")
    return op_dk(CPU, x, y).tolist()


def kernel_called_directly():
    return torch.library.get_kernel("aten::add.Tensor", "CPU").call_boxed(ONLY_CPU, x, y).tolist()


def switch_in_a_thread():
    refused = []

    def clear():
        try:
            torch._C._autograd._clear_callbacks()
        except PermissionError as error:
            refused.append(str(error))

    thread = threading.Thread(target=clear)
    thread.start()
    thread.join()
    if refused:
        raise PermissionError(refused[0])


def composite_decomposed():
    return torch.ops.aten.linear.default.decompose(x.view(1, 3), y.view(1, 3)).tolist()


@torch.library.custom_op("student::twice", mutates_args=())
def twice(a: torch.Tensor) -> torch.Tensor:
    return torch.add(a, a)  # a torch op inside the custom op: dispatched, so the profiler sees it


twice.register_autograd(lambda ctx, grad: grad * 2)


def custom_op():
    plain = twice(x)  # no grad: the op's autograd kernel redispatches it below autograd
    leaf = x.clone().requires_grad_()
    with torch.enable_grad():
        (grad,) = torch.autograd.grad(twice(leaf), leaf, torch.ones(3))
    return plain.tolist(), grad.tolist()
'''

SWITCHES_HARNESS = """
import gc, json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import torch
from grader.child import guard, switches
from grader.child.activity import Session, summarize

root = Path(sys.argv[2])
ATTACKS = ("record_function_off", "collection_paused", "callbacks_cleared", "test_observer_added", "kineto_stepped",
           "session_stopped", "session_started", "redispatched", "redispatched_boxed", "by_dispatch_key",
           "by_dispatch_key_made_now", "switch_in_a_thread")
ATTACKS += ("kernel_called_directly",) if hasattr(torch.library, "get_kernel") else ()  # where torch has it
# What the gates will stand for, held in a tuple (take_away swaps them in dicts, lists and cells):
# a switch, the session's stop, redispatch, and the `_op_dk` of each overload of aten::add.
held = (torch._C._autograd._enable_record_function, torch._C._autograd._disable_profiler,
        vars(torch._C._DispatchOperatorHandle)["redispatch_boxed"],
        *[vars(o)["_op_dk"] for o in vars(torch.ops.aten.add).values() if isinstance(o, torch._ops.OpOverload)])


def load():
    import student

    return student


def call(fn):
    return fn()


kept = switches.take_away()
left = [entry for entry in kept["left"] if not entry.startswith("a tuple: (<built-in method _enable_record_function")]
# Who else holds one now (gc's walks are the harness's before the guard is installed): the hook's
# table holds the originals it may hand out, as (kind, original) pairs.
holders = [type(h).__name__ for h in gc.get_referrers(*held)
           if h is not held and not (type(h) is tuple and len(h) == 2 and isinstance(h[0], str))]
gates = [torch._C._autograd._enable_record_function, torch.autograd._disable_profiler,
         torch._C._DispatchOperatorHandle.redispatch_boxed, torch.ops.aten.add.Tensor._op_dk]
in_gates = [g.__name__ for g in gates for value in [*(c.cell_contents for c in g.__closure__ or ()),
                                                    *g.__globals__.values()] if any(value is h for h in held)]
taken, _ = guard.install(root, set(), {load.__code__, call.__code__}, kept)
del kept
# From here on, this script's top level is the harness (the bottom of the main thread); anything it
# defines, comprehensions included, would count as student code, as `call` does.
sys.path.insert(0, str(root))
student = load()
found = {}
for name in (*ATTACKS, "composite_decomposed", "custom_op"):
    try:
        found[name] = "allowed: " + json.dumps(call(getattr(student, name)))
    except PermissionError as error:
        found[name] = "refused: " + str(error)
tampering = [f"{r.what} ({r.where})" for r in taken() if r.kind == guard.TAMPERING]
with Session(kernels=False) as session:
    call(student.custom_op)
seen = summarize(session)
print(json.dumps({"left": left, "holders": holders, "in_gates": in_gates, "found": found, "tampering": tampering,
                  "attacks": ATTACKS, "lost": seen.profiler_lost, "ops": [op.name for op in seen.ops]}))
"""


def test_the_profilers_switches_are_the_graders_alone(tmp_path: Path) -> None:
    result = _run(SWITCHES_HARNESS, SWITCHES, tmp_path, timeout=120)
    assert result["left"] == [], f"switches.take_away left these holding an original: {result['left']}"
    assert result["holders"] == [], f"an original is still held by: {result['holders']}"
    assert result["in_gates"] == [], f"a gate's closure or globals hold what it stands for: {result['in_gates']}"
    found, tampering = result["found"], "\n".join(result["tampering"])
    for attack in result["attacks"]:
        assert found[attack].startswith("refused"), f"{attack}: {found[attack]}"
    for words in ("_enable_record_function", "_toggle_collection_dynamic", "_clear_callbacks",
                  "_set_empty_test_observer", "_kineto_step", "_disable_profiler", "_prepare_profiler",
                  "redispatch_boxed of aten::add.Tensor", "redispatch_boxed of aten::mul.Tensor",
                  "_op_dk of aten::add.Tensor", "_op_dk of aten::sub.Tensor", "(student.py, line"):
        assert words in tampering, f"no tampering recorded for {words}:\n{tampering}"
    assert tampering.count("_clear_callbacks") == 2, "the student's thread is refused too"
    assert len(result["tampering"]) == len(result["attacks"]), "one refusal per attack, and nothing else"
    assert found["composite_decomposed"] == "allowed: [[6.0]]", found["composite_decomposed"]
    assert found["custom_op"] == "allowed: [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]", found["custom_op"]
    assert not result["lost"], "the harness's own session survives the gates"
    assert "aten::add" in result["ops"], f"the op inside the custom op went unseen: {result['ops']}"


CUSTOM_OP_ADD = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@torch.library.custom_op("student::add", mutates_args=())
def student_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out


@student_add.register_fake
def _(x, y):
    return torch.empty_like(x)


student_add.register_autograd(lambda ctx, grad: (grad, grad))


def add(x, y):
    plain = student_add(x, y)  # under the grader's no_grad: the autograd kernel redispatches at once
    with torch.enable_grad():
        leaf = x.detach().requires_grad_()
        out = student_add(leaf, y)  # through the autograd.Function's forward, which redispatches
        torch.autograd.grad(out, leaf, plain)  # and its backward
    return out.detach()
'''


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, requires_gpu])])
def test_a_custom_op_with_its_own_autograd_is_graded_right(tmp_path: Path, device: str) -> None:
    """The pattern a FlashAttention backward may use: a Triton kernel wrapped in
    `torch.library.custom_op` with `register_autograd`, whose autograd kernel redispatches the op
    below autograd. The gate hands a redispatch of an op of Python's making to anyone; on a GPU the
    kernel launched inside the op is still the student's own."""
    (tmp_path / "vector_add").mkdir()
    (tmp_path / "vector_add" / "vector_add.py").write_text(CUSTOM_OP_ADD)
    result = grade(tmp_path, ["vector_add"], device=device)
    scored = [t for t in result.tests if t.kind == "correctness" and t.graded]
    failed = [(t.name, t.reason, t.output[:300]) for t in scored if not t.passed]
    assert scored and not failed, failed


SIGNALS = '''
import _imp
import importlib.machinery
import signal
import sys

import torch

caught = []


def _handler(signum, frame):  # would be handed the frame the signal interrupts: the harness's, often
    caught.append(frame)


def _spec(name, origin=None):
    return importlib.machinery.ModuleSpec(name, None, origin=origin)


def handler_set():
    return str(signal.signal(signal.SIGALRM, _handler))


def handler_set_by__signal():
    import _signal

    return str(_signal.signal(signal.SIGUSR1, _handler))


def fresh__signal_module():
    return str(_imp.create_builtin(_spec("_signal")).signal(signal.SIGALRM, _handler))


def _signal_imported_again():
    kept = sys.modules.pop("_signal")
    try:
        import _signal

        return str(_signal.signal(signal.SIGALRM, _handler))
    finally:
        sys.modules["_signal"] = kept


def fresh__imp_module():
    return str(_imp.create_builtin(_spec("_imp")).create_builtin(_spec("_signal")))


def torch_C_made_again():  # single-phase init: its first namespace written back over the gates
    return str(_imp.create_dynamic(torch._C.__spec__))


def torch_C_under_another_name():  # the same file by another path and name
    return str(_imp.create_dynamic(_spec("elsewhere._C", torch._C.__file__.replace("/", "//"))))


class _Shifty:
    """A spec whose name reads as an unloaded module first and as `_signal` after."""

    reads = 0
    origin = loader = submodule_search_locations = None

    def __init__(self, first):
        self.first = first

    @property
    def name(self):
        _Shifty.reads += 1
        return self.first if _Shifty.reads == 1 else "_signal"


def a_name_that_changes():
    first = next(n for n in ("_tokenize", "_symtable", "xxsubtype") if n not in sys.modules)
    made = _imp.create_builtin(_Shifty(first))
    return [made.__name__ == first, hasattr(made, "signal")]


def _copy(x, **kwargs):  # would be handed every copy the harness makes of an output
    return x


def aten_kernel_registered():
    torch.library.Library("aten", "IMPL").impl("_to_copy", _copy, "CPU")
    return "registered"


def aten_kernel_through_torchs_own_library():
    from torch import _meta_registrations

    _meta_registrations._meta_lib_dont_use_me_use_register_meta.impl("_to_copy", _copy, "CPU")
    return "registered"


def aten_kernel_through_the_api():
    torch.library.register_kernel("aten::_to_copy", "cpu", _copy)
    return "registered"


def its_own_op_and_kernel():
    library = torch.library.Library("student_guard", "FRAGMENT")
    library.define("twice(Tensor x) -> Tensor")
    library.impl("twice", lambda x: x * 2, "CPU")
    return torch.ops.student_guard.twice(torch.ones(2)).tolist()


def a_torch_module_imported_lazily():  # registers for torch's own namespaces as it is imported
    import torch.distributed._functional_collectives as loaded

    return loaded.__name__


def new_modules_still_import():
    import importlib

    builtin = next(n for n in ("xxsubtype", "_symtable", "_tokenize") if n not in sys.modules)
    extension = next(n for n in ("_lsprof", "syslog", "resource", "_zoneinfo") if n not in sys.modules)
    return [importlib.import_module(builtin).__name__, importlib.import_module(extension).__name__]
'''

SIGNALS_HARNESS = """
import json, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import torch
from grader.child import guard, switches

root = Path(sys.argv[2])
ATTACKS = ("handler_set", "handler_set_by__signal", "fresh__signal_module", "_signal_imported_again",
           "fresh__imp_module", "torch_C_made_again", "torch_C_under_another_name", "aten_kernel_registered",
           "aten_kernel_through_torchs_own_library", "aten_kernel_through_the_api")
ALLOWED = ("a_name_that_changes", "new_modules_still_import", "its_own_op_and_kernel",
           "a_torch_module_imported_lazily")


def load():
    import student

    return student


def call(fn):
    return fn()


taken, _ = guard.install(root, set(), {load.__code__, call.__code__}, switches.take_away())
sys.path.insert(0, str(root))
student = load()
found = {}
for name in (*ATTACKS, *ALLOWED):
    try:
        found[name] = "allowed: " + json.dumps(call(getattr(student, name)))
    except PermissionError as error:
        found[name] = "refused: " + str(error)
tampering = [f"{r.what} ({r.where})" for r in taken() if r.kind == guard.TAMPERING]
harness_may = signal.signal(signal.SIGUSR2, signal.SIG_IGN) == signal.SIG_DFL  # the harness itself may
print(json.dumps({"found": found, "tampering": tampering, "attacks": ATTACKS, "harness_may": harness_may,
                  "handlers": [signal.getsignal(s) == signal.SIG_DFL for s in (signal.SIGALRM, signal.SIGUSR1)],
                  "copied": torch.ones(2).to(torch.float64, copy=True).tolist(),
                  "factory_gated": torch._C._get_operation_overload.__module__ == switches.__name__}))
"""


def test_signal_handlers_kernels_and_modules_made_again_are_the_graders_alone(tmp_path: Path) -> None:
    """A signal handler is handed the frame each signal interrupts, a harness frame as often as
    not, with no audit event on the way: student code may set none, through `signal`, `_signal`,
    a fresh `_signal` from `_imp` or a second import of it. Nor may it register a kernel for an
    op of torch's (it would run inside the harness's own torch calls): not through a library of
    its own for aten, torch's own library object, or torch.library's API; its own op in its own
    namespace still works, and so does a torch module that registers for torch's namespaces as
    it is imported lazily. Nor may it make again a module loaded before it ran: a fresh `_imp`,
    or torch._C, whose first namespace would come back over the profiler's gates. A spec's name
    is read once, so one that changes between reads makes the module it first named; modules not
    yet loaded import as before."""
    result = _run(SIGNALS_HARNESS, SIGNALS, tmp_path, timeout=120)
    found, tampering = result["found"], "\n".join(result["tampering"])
    for attack in result["attacks"]:
        assert found[attack].startswith("refused"), f"{attack}: {found[attack]}"
    assert len(result["tampering"]) == len(result["attacks"]), f"one refusal per attack:\n{tampering}"
    for words in ("_signal.signal (a signal handler", "_imp.create_builtin of _signal", "_imp.create_builtin of _imp",
                  "_imp.create_dynamic of torch._C", "_imp.create_dynamic of elsewhere._C", "(student.py, line",
                  "_dispatch_library for aten::", "_DispatchModule.impl on a library of torch's"):
        assert words in tampering, f"no tampering recorded for {words}:\n{tampering}"
    assert result["handlers"] == [True, True], "a student's handler was set"
    assert result["factory_gated"], "torch._C's overload factory is still a gate"
    assert found["a_name_that_changes"] == "allowed: [true, false]", found["a_name_that_changes"]
    for name in ("new_modules_still_import", "a_torch_module_imported_lazily"):
        assert found[name].startswith("allowed: "), found[name]
    assert found["its_own_op_and_kernel"] == "allowed: [2.0, 2.0]", found["its_own_op_and_kernel"]
    assert result["copied"] == [1.0, 1.0], "torch's own copy kernel still runs"
    assert result["harness_may"], "the harness sets its own handlers"


CALLOUTS = '''
import functools
import gc
import sys

import torch
import triton
import triton.language as tl

SRC = "import gc\\nFOUND = len(gc.get_objects())"


@triton.jit
def nothing(x_ptr, B: tl.constexpr):
    pass


def _launch(values):
    triton.heuristics(values)(nothing)[(1,)](torch.zeros(1))


def exec_in_a_heuristic():
    _launch({"B": functools.partial(exec, SRC)})


def a_frame_in_a_heuristic():
    _launch({"B": functools.partial(max, 0, 1, key=sys._getframe)})


def gc_in_a_kernel_body():
    @triton.jit
    def walks(x_ptr):
        gc.get_objects()

    walks[(1,)](torch.zeros(1))
'''

CALLOUTS_HARNESS = """
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import torch, triton
from triton.runtime.autotuner import Heuristics
from triton.runtime.interpreter import InterpretedFunction
from grader.child import guard

root = Path(sys.argv[2])


def load():
    import student

    return student


# Sanctioned as they once were: a heuristic's and the interpreter's run, where the student's C code ran
# as the library's. Only the frames' own code decides now.
taken, _ = guard.install(root, {Heuristics.run.__code__, InterpretedFunction.run.__code__}, {load.__code__})
sys.path.insert(0, str(root))
student = load()
found = {}
for name in ("exec_in_a_heuristic", "a_frame_in_a_heuristic", "gc_in_a_kernel_body"):
    try:
        found[name] = "allowed: " + str(getattr(student, name)())
    except Exception as error:  # the interpreter wraps what a kernel body raised
        found[name] = f"refused: {error}" if "refuses" in str(error) else f"failed: {type(error).__name__}: {error}"
print(json.dumps({"found": found, "refused": [f"{r.what} ({r.where})" for r in taken()]}))
"""


def test_a_callable_the_student_hands_the_library_is_the_students(tmp_path: Path) -> None:
    """A C callable has no frame: functools.partial(exec, SRC) as a heuristic ran SRC inside Triton's
    launch, which the guard took for library code it compiled, and SRC walked gc. Even where the
    launch is sanctioned (it was), a library frame speaks only for what its own code names: the
    exec that no frame of Heuristics.run names is the student's, and so is SRC's walk of gc; a
    frame taken by sys._getframe through max() is refused; and a kernel body that the interpreter
    execs from the student's file is the student's, never adopted."""
    result = _run(CALLOUTS_HARNESS, CALLOUTS, tmp_path, timeout=120)
    found, refused = result["found"], "\n".join(result["refused"])
    assert found["exec_in_a_heuristic"].startswith("refused: the grader refuses gc.get_objects"), found
    assert found["a_frame_in_a_heuristic"].startswith("refused: the grader refuses a frame object"), found
    assert found["gc_in_a_kernel_body"].startswith("refused: "), found  # the interpreter wraps the error
    assert "the grader refuses gc.get_objects" in found["gc_in_a_kernel_body"], found
    assert "student.py, line" in refused, f"the refusals name the student's line:\n{refused}"


WRITERS = '''
import io
import os

import numpy as np
import torch

x = torch.arange(1000.0)


def _at(name):
    return os.path.join(os.path.dirname(__file__), name)


def torch_save():
    torch.save(x, _at("save.pt"))


def torch_save_into_a_buffer():
    buffer = io.BytesIO()
    torch.save(x, buffer)
    return len(buffer.getvalue()) > 0


def from_file_shared():
    torch.from_file(_at("from_file.bin"), shared=True, size=16)


def from_file_through_the_functions_class():
    torch._C._VariableFunctions.from_file(_at("functions.bin"), True, 16)


def storage_from_file():
    torch.UntypedStorage.from_file(_at("storage.bin"), True, 16)


def base_storage_from_file():
    torch._C.StorageBase.from_file(_at("base_storage.bin"), True, 16)


def typed_storage_from_file():
    torch.FloatStorage.from_file(_at("typed_storage.bin"), True, 4)


def zip_writer_made_directly():
    torch._C.PyTorchFileWriter(_at("writer.zip"))


def script_module_saved():
    torch.jit.save(torch.jit.script(torch.nn.Identity()), _at("script.pt"))


def fifo_made():
    os.mkfifo(_at("fifo"))


def numpy_of_a_tensor():
    return float(x.numpy().sum())


def numpy_through_the_base_class():
    return float(torch._C.TensorBase.numpy(x).sum())


def tolist_and_back():
    return torch.as_tensor(x.tolist()).shape[0]


def as_tensor_of_a_list():
    return torch.as_tensor([1.0] * 1000).shape[0]


def from_numpy_through_the_functions_class():
    return torch._C._VariableFunctions.from_numpy(np.ones(500)).shape[0]


def a_scale_read():
    return x[:3].tolist()
'''

WRITERS_HARNESS = """
import io, json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import torch
from grader.child import guard, switches

root = Path(sys.argv[2])
WRITES = ("torch_save", "from_file_shared", "from_file_through_the_functions_class", "storage_from_file",
          "base_storage_from_file", "typed_storage_from_file", "zip_writer_made_directly", "script_module_saved",
          "fifo_made")
READS = ("torch_save_into_a_buffer", "numpy_of_a_tensor", "numpy_through_the_base_class", "tolist_and_back",
         "as_tensor_of_a_list", "from_numpy_through_the_functions_class", "a_scale_read")


def load():
    import student

    return student


def call(fn):
    return fn()


kept = switches.take_away()
taken, _ = guard.install(root, set(), {load.__code__, call.__code__}, kept)
del kept
sys.path.insert(0, str(root))
student = load()
found = {}
for name in WRITES + READS:
    try:
        found[name] = "allowed: " + json.dumps(call(getattr(student, name)))
    except PermissionError as error:
        found[name] = "refused: " + str(error)
records = taken()
torch.save(torch.ones(2), root / "harness.pt")  # the harness may
noted = {}
for record in records:
    if record.kind == guard.NOTED:
        noted[record.what] = noted.get(record.what, 0) + record.count
print(json.dumps({"found": found, "writes": WRITES, "noted": noted, "left": sorted(p.name for p in root.iterdir()),
                  "refused": [f"{r.what} ({r.where})" for r in records if r.kind == guard.REFUSED]}))
"""


def test_files_written_from_cpp_and_host_reads_pass_the_guard(tmp_path: Path) -> None:
    """torch.save's zip writer, torch.from_file(shared=True) (through torch, torch._C's function
    class, and each storage class, StorageBase's own on a type Python calls immutable), TorchScript's
    save and os.mkfifo write files from C++, with no `open` audit event: student code is refused
    each, as any write, and nothing lands; a save into a Python buffer and the harness's own saves
    still work. A tensor taken to numpy or Python, or a host array brought into torch (through the
    immutable classes too), is noted with the values it moves, for the parent to count; one use that
    alone moves more than a call may (64 values) is refused before it moves them, a few values pass."""
    result = _run(WRITERS_HARNESS, WRITERS, tmp_path, timeout=120)
    found = result["found"]
    for name in result["writes"]:
        assert found[name].startswith("refused: the grader refuses writing the file"), f"{name}: {found[name]}"
    assert found["torch_save_into_a_buffer"] == "allowed: true", found
    assert sorted(result["left"]) == ["harness.pt", "inductor", "student.py"], result["left"]
    written = [words for words in result["refused"] if words.startswith("writing the file")]
    assert len(written) == len(result["writes"]), result["refused"]
    assert all("student.py, line" in words for words in written), written
    noted = result["noted"]
    assert noted.get("torch._C.TensorBase.numpy") == 2000, noted  # x.numpy() and TensorBase.numpy(x)
    assert noted.get("torch._C.TensorBase.tolist") == 1003, noted  # 1000 values (refused), then 3
    assert noted.get("torch.as_tensor") == 1000 and noted.get("torch.from_numpy") == 500, noted
    for name, gateway, moved in (("numpy_of_a_tensor", "numpy", 1000), ("numpy_through_the_base_class", "numpy", 1000),
                                 ("tolist_and_back", "tolist", 1000), ("as_tensor_of_a_list", "as_tensor", 1000),
                                 ("from_numpy_through_the_functions_class", "from_numpy", 500)):  # fmt: skip
        assert found[name].startswith(f"refused: the grader refuses host::{gateway} of {moved} values"), found[name]
        assert "student.py, line" in found[name], found[name]
    assert found["a_scale_read"] == "allowed: [0.0, 1.0, 2.0]", found


def test_library_folders_on_the_import_path_are_trusted_and_the_gradings_own_are_not(tmp_path, monkeypatch):
    """Which folders of the import path hold library code: a repository and its virtual environment
    may lie anywhere, under /tmp too (a clone there failed every unsandboxed grading while /tmp was
    distrusted by name); the grading's own folder (the student's copy, the libraries built from it)
    and a writable scratch folder never do. A folder bound read-only under the sandbox's /tmp does."""
    from grader.child import asker

    venv, grading, scratch = tmp_path / "repo" / ".venv" / "site", tmp_path / "grade-x", tmp_path / "scratch"
    student, built, dropped, bound = grading / "submission", grading / "libraries", scratch / "dropped", scratch / "bound"
    for folder in (venv, student, built, dropped, bound):
        folder.mkdir(parents=True)
    bound.chmod(0o555)
    monkeypatch.setattr(sys, "path", sys.path + [str(f) for f in (venv, student, built, dropped, bound)])
    monkeypatch.setenv("TMPDIR", str(scratch))
    try:
        trusted = asker._trusted_roots(student)
    finally:
        bound.chmod(0o755)
    assert str(venv) + os.sep in trusted
    assert not {str(f) + os.sep for f in (student, built, dropped)} & set(trusted), trusted
    if os.geteuid() != 0:  # root may write anywhere: a read-only folder is one only as a mount
        assert str(bound) + os.sep in trusted
