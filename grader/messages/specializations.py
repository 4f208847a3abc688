"""A kernel's specialization as data: what the precompile pass's recording child sends back for
each launch it recorded, and what the parent hands each of its compiling children
(running/precompile.py, child/precompile.py).

A specialization is what Triton's `JITFunction.run` hands `triton.compile`: the kernel, the type
of each argument (its signature), the values of its constexprs, the attributes it specialized on
(a pointer's 16-byte divisibility) and the compile options. Every value travels as text with its
kind, since JSON tells neither a float's exact bits nor a Triton dtype; `well_formed` is the
parent's check of what a child sent, before any of it goes on to another child.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# The kinds of value a constexpr or an option may have here; a launch with any other (a function
# passed as a constexpr, a tuple) is not recorded, and compiles when the graded child launches it.
KINDS = ("int", "float", "bool", "str", "none", "dtype")
_TEXT = {
    "int": re.compile(r"-?\d{1,40}"),
    "float": re.compile(r"-?(0x[0-9a-f]\.[0-9a-f]{0,13}p[+-]\d{1,4}|inf|nan)"),  # float.hex
    "bool": re.compile(r"True|False"),
    "str": re.compile(r"[\w .,:;+\-*/()\[\]<>=]{0,200}"),
    "none": re.compile(r""),
    "dtype": re.compile(r"[a-z0-9]{2,12}"),  # fp16, bf16, int1, fp8e4nv ...
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}")
# A Triton type: "*fp16", "i32", "constexpr", "tensordesc<fp16[64, 64]>", "*k", "nvTmaDesc" ...
_TYPE = re.compile(r"[\w*<>\[\], ]{1,200}")
_ATTRIBUTE = re.compile(r"[\w.]{1,100}")  # "tt.divisibility"
MAX_PATH = 8  # an argument's path: its index, then indices into nested tuples


@dataclass
class Argument:
    name: str  # the kernel's parameter
    type: str  # its Triton type ("*fp16", "i32", "constexpr")


@dataclass
class Constant:
    path: list[int]  # which argument (and, inside a tuple, which element)
    kind: str  # one of KINDS
    text: str  # the value, written as `written` writes it


@dataclass
class Attribute:
    name: str  # "tt.divisibility"
    value: int


@dataclass
class Attributes:
    """An argument's attributes, in Triton's order; an empty list too: Triton keys a compile by
    their text, `{(3,): []}` included."""

    path: list[int]
    given: list[Attribute] = field(default_factory=list)


@dataclass
class Option:
    name: str  # num_warps, num_stages, debug, ...
    kind: str
    text: str


@dataclass
class Specialization:
    part: str  # the part whose calls launched it: its file is the one a compiling child imports
    kernel: str  # the kernel's name
    file: str  # the file it is defined in, as the children see it
    line: int  # the first line of its definition (its decorator's)
    arguments: list[Argument] = field(default_factory=list)
    constants: list[Constant] = field(default_factory=list)
    attributes: list[Attributes] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)


def written(value) -> tuple[str, str] | None:
    """(kind, text) of a constexpr's or an option's value; None for a value of no KINDS."""
    if value is None:
        return "none", ""
    kind = type(value)
    if kind is bool:
        return "bool", str(value)
    if kind is int:
        return "int", str(value)
    if kind is float:
        return "float", value.hex()
    if kind is str:
        return "str", value
    if kind.__name__ == "dtype" and kind.__module__.startswith("triton.language"):
        return "dtype", value.name
    return None


def well_formed(spec: Specialization, parts: set[str]) -> bool:
    """Whether a specialization a child sent is one the parent passes on: a part of the
    assignment, names and types of the form Triton writes, each value's text of its kind."""
    values = [(c.kind, c.text) for c in spec.constants] + [(o.kind, o.text) for o in spec.options]
    paths = [c.path for c in spec.constants] + [a.path for a in spec.attributes]
    return (spec.part in parts and _NAME.fullmatch(spec.kernel) is not None and 0 < spec.line < 10**6
            and all(_NAME.fullmatch(a.name) and _TYPE.fullmatch(a.type) for a in spec.arguments)
            and all(kind in _TEXT and _TEXT[kind].fullmatch(text) for kind, text in values)
            and all(0 < len(path) <= MAX_PATH and all(0 <= i < 10**4 for i in path) for path in paths)
            and all(_NAME.fullmatch(o.name) for o in spec.options)
            and all(_ATTRIBUTE.fullmatch(a.name) for found in spec.attributes for a in found.given))  # fmt: skip


def identity(spec: Specialization) -> tuple:
    """What makes two specializations the same compile (the part that launched it aside)."""
    return (spec.kernel, spec.file, spec.line, tuple((a.name, a.type) for a in spec.arguments),
            tuple((tuple(c.path), c.kind, c.text) for c in spec.constants),
            tuple((tuple(a.path), tuple((g.name, g.value) for g in a.given)) for a in spec.attributes),
            tuple((o.name, o.kind, o.text) for o in spec.options))  # fmt: skip
