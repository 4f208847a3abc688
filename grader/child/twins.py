"""The JITFunction that `@triton.jit` would have made without TRITON_INTERPRET=1, for each
InterpretedFunction: what the CPU tier hands Triton's compiler (gpu_target.py).

Under the interpreter every @triton.jit function, the student's helpers and half of
triton.language (tl.max, tl.cdiv, ...) included, is an InterpretedFunction, which the code
generator does not take as a callee, and the interpreter leaves parts of triton.language patched
after a launch. While compiling (`compiler_sees_twins`) the compiler sees the real language and a
twin wherever it meets an InterpretedFunction. A twin is a JITFunction of the very same Python
function, so its cache key is the one a JITFunction of that source computes on a GPU
(tests/test_precompile.py compares the two).

This module must be imported before any kernel runs (it starts remembering what the interpreter
patches), which gpu_target.py's import does.
"""

from __future__ import annotations

import contextlib
import inspect

from triton import knobs
from triton.runtime.jit import JITFunction

_twins: dict[int, JITFunction] = {}


class _Twin(JITFunction):
    """A twin: it sees twins wherever it looks names up."""

    def get_capture_scope(self):
        return {name: twin(value) for name, value in super().get_capture_scope().items()}


def twin(value):
    """The twin of an InterpretedFunction, made once; anything else as it is."""
    from triton.runtime.interpreter import InterpretedFunction

    if not isinstance(value, InterpretedFunction):
        return value
    if id(value) not in _twins:
        # Keyed by id (an InterpretedFunction's hash would hash its source); the twin keeps the
        # InterpretedFunction alive, so the id is not reused while it is remembered.
        _twins[id(value)] = _Twin(value.fn, **value.kwargs)
        _twins[id(value)].interpreted = value
    return _twins[id(value)]


def _member_function(value):
    """The free function behind a tensor method (`x.sum` forwards to `tl.sum`). Triton binds a
    JITFunction directly, but wraps anything else, an InterpretedFunction included; calling that
    wrapper would run the interpreter inside the compiler."""
    wrapper = getattr(value, "__func__", None)
    if getattr(wrapper, "__qualname__", "") != "_tensor_member_fn.<locals>.wrapper":
        return value
    return inspect.getclosurevars(wrapper).nonlocals.get("fn", value)


@contextlib.contextmanager
def compiler_sees_twins():
    """While compiling: no interpreter mode, the real triton.language, and InterpretedFunctions
    reached as attributes (tl.max, x.sum, a helper in another module) seen as their twins."""
    from triton.compiler.code_generator import BoundJITMethod, CodeGenerator, _is_triton_value
    from triton.runtime.jit import DependenciesFinder

    import triton.experimental.gluon  # noqa: F401  Triton imports it lazily; it only loads in interpreter mode

    get_attribute, record_reference = CodeGenerator.get_Attribute, DependenciesFinder.record_reference

    def get_twin_attribute(self, lhs, attr):
        value = get_attribute(self, lhs, attr)
        found = twin(_member_function(value))
        if found is value:
            return value
        return BoundJITMethod(lhs, found) if _is_triton_value(lhs) else found  # x.sum() binds x, as for a JITFunction

    CodeGenerator.get_Attribute = get_twin_attribute
    DependenciesFinder.record_reference = lambda self, val, *a, **k: record_reference(self, twin(val), *a, **k)
    try:
        with knobs.runtime.scope(), _pristine_language():
            knobs.runtime.interpret = False  # constexpr_function results stay constexprs
            yield
    finally:
        CodeGenerator.get_Attribute, DependenciesFinder.record_reference = get_attribute, record_reference


# The interpreter runs a kernel by patching triton.language (tl.load, tensor.__add__, tl.range, ...)
# with numpy versions and undoes it after the launch, but not all of it: calling a @jit function
# whose module imports triton.language.core (tl.cdiv, say) from a kernel patches that module too,
# and nothing restores it (measured: 61 names of triton.language.core stay patched after one launch).
# The compiler needs the real language, so each attribute the interpreter patches is remembered
# with its value before the first patch, and put back while compiling. Recording starts when this
# module is imported, which must happen before any kernel runs.
_MISSING = object()
_originals: dict[tuple[int, str], tuple[object, str, object]] = {}


def _remember_originals() -> None:
    from triton.runtime.interpreter import _LangPatchScope

    set_attr = _LangPatchScope.set_attr
    if getattr(set_attr, "remembers", False):
        return

    def remembering_set_attr(scope, obj, name, value):
        _originals.setdefault((id(obj), name), (obj, name, getattr(obj, name, _MISSING)))
        return set_attr(scope, obj, name, value)

    remembering_set_attr.remembers = True
    _LangPatchScope.set_attr = remembering_set_attr


@contextlib.contextmanager
def _pristine_language():
    now = [(obj, name, getattr(obj, name, _MISSING)) for obj, name, _ in _originals.values()]
    for obj, name, original in _originals.values():
        _set_or_delete(obj, name, original)
    try:
        yield
    finally:
        for obj, name, value in now:
            _set_or_delete(obj, name, value)


def _set_or_delete(obj, name: str, value) -> None:
    if value is not _MISSING:
        setattr(obj, name, value)
    elif hasattr(obj, name):
        delattr(obj, name)


if knobs.runtime.interpret:
    _remember_originals()
