"""Which kernels each extern "C" launcher of a CUDA C submission launches, and with how many threads
per block: read from the source, so that both tiers can say it (the CPU tier runs no launch).

A launch is `kernel<<<grid, block>>>(...)` (or `kernel<ARGS><<<...>>>`), in the launcher itself or
in a function of the file it calls. The block is `dim3(a, b)`, a `dim3 name(a, b)` declared before
it, or an integer; a, b are integer expressions of literals and of constants the source defines
(`#define`, `constexpr int`, `const int`). What cannot be worked out so (a block size passed as an
argument, say) stays unknown: the report then gives the occupancy's bounds that do not depend on it.
This reads the source as text, not as C++: it is advice for the report, never part of a verdict.
"""

from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass
from pathlib import Path

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)\s+([^\n\\]+)$", re.M)
_CONSTANT = re.compile(r"\b(?:constexpr|const)\s+(?:static\s+)?(?:unsigned\s+|signed\s+)?(?:int|long long|long|size_t|"
                       r"unsigned|uint32_t|int32_t|int64_t)\s+(\w+)\s*=\s*([^;]+);")  # fmt: skip
_FUNCTION = re.compile(r"\b(\w+)\s*\(([^;{}()]*(?:\([^()]*\)[^;{}()]*)*)\)\s*(?:const\s*)?\{")
_LAUNCH = re.compile(r"\b(\w+)\s*(<[^;{}]*?>)?\s*<<<(.*?)>>>", re.S)
_DIM3 = re.compile(r"\bdim3\s+(\w+)\s*(?:=\s*dim3\s*)?[({]([^;]*)[)}]\s*;")
_CALL = re.compile(r"\b(\w+)\s*\(")
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
              ast.Mod: operator.mod, ast.LShift: operator.lshift, ast.RShift: operator.rshift}  # fmt: skip


@dataclass(frozen=True)
class Launch:
    kernel: str  # as the source names it, template arguments resolved where they could be ("tile<1>")
    threads: int | None  # per block, where known
    block_x: int | None  # the block's first dimension, where known
    dynamic_shared: int | None = 0  # bytes of dynamic shared memory per block (the third argument), where known


def read(folder: Path) -> dict[str, list[Launch]]:
    """Each function of the folder's CUDA sources that launches a kernel, with the launches it
    makes itself or through the functions it calls."""
    text = "\n".join(_COMMENT.sub(" ", path.read_text(errors="replace")) for pattern in ("*.cu", "*.cuh", "*.h")
                     for path in sorted(folder.glob(pattern)))  # fmt: skip
    constants = _constants(text)
    bodies = _functions(text)
    direct = {name: _launches(body, constants) for name, body in bodies.items()}
    return {name: found for name in bodies if (found := _reached(name, bodies, direct, set()))}


def _reached(name: str, bodies: dict[str, str], direct: dict[str, list[Launch]], seen: set[str]) -> list[Launch]:
    seen.add(name)
    found = list(direct.get(name, []))
    for call in _CALL.findall(bodies.get(name, "")):
        if call in bodies and call not in seen:
            found += _reached(call, bodies, direct, seen)
    return found


def _functions(text: str) -> dict[str, str]:
    """Each function defined at the top level (brace depth 0), by name, with its body."""
    bodies: dict[str, str] = {}
    depth, position = 0, 0
    while position < len(text):
        if depth == 0:
            match = _FUNCTION.match(text, position)
            if match and match.group(1) not in ("if", "for", "while", "switch", "return", "sizeof"):
                end = _closing_brace(text, match.end() - 1)
                bodies.setdefault(match.group(1), text[match.end() : end])
                position = end + 1
                continue
        depth += {"{": 1, "}": -1}.get(text[position], 0)
        position += 1
    return bodies


def _closing_brace(text: str, start: int) -> int:
    depth = 0
    for index in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return index
    return len(text)


def _constants(text: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for _ in range(3):  # constants defined from other constants, in any order
        for name, expression in _DEFINE.findall(text) + _CONSTANT.findall(text):
            value = evaluate(expression, found)
            if value is not None:
                found.setdefault(name, value)
    return found


def _launches(body: str, constants: dict[str, int]) -> list[Launch]:
    dims = {name: _split(arguments) for name, arguments in _DIM3.findall(body)}
    found = []
    for kernel, template, configuration in _LAUNCH.findall(body):
        arguments = _split(configuration)
        block = _block(arguments[1] if len(arguments) > 1 else "", dims, constants)
        threads = None if None in block else _product(block)
        shared = evaluate(arguments[2], constants) if len(arguments) > 2 else 0
        found.append(Launch(kernel + _template(template, constants), threads, block[0] if block else None, shared))
    return found


def _block(expression: str, dims: dict[str, list[str]], constants: dict[str, int]) -> list[int | None]:
    expression = expression.strip()
    match = re.fullmatch(r"dim3\s*[({](.*)[)}]", expression, re.S)
    sizes = _split(match.group(1)) if match else dims.get(expression, [expression])
    return [evaluate(size, constants) for size in sizes] if sizes else [None]


def _template(template: str, constants: dict[str, int]) -> str:
    if not template:
        return ""
    values = [evaluate(argument, constants) for argument in _split(template[1:-1])]
    shown = [str(v) if v is not None else a.strip() for v, a in zip(values, _split(template[1:-1]))]
    return f"<{', '.join(shown)}>"


def _split(text: str) -> list[str]:
    """Arguments separated by top-level commas."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, "<": 1, "[": 1, "{": 1, ")": -1, ">": -1, "]": -1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    return [p for p in parts + [current.strip()] if p]


def _product(values: list[int | None]) -> int:
    total = 1
    for value in values:
        total *= value or 1
    return total


def evaluate(expression: str, constants: dict[str, int]) -> int | None:
    """An integer C expression of literals and known constants (`(BM * BN) / (TM * TN)`), or None."""
    text = re.sub(r"\b(\d+)(?:[uU]?[lL]{0,2}|[lL]{1,2}[uU]?)\b", r"\1", expression.strip())
    text = re.sub(r"\(\s*(?:unsigned\s+)?(?:int|long long|long|size_t|unsigned)\s*\)", "", text)  # casts
    text = text.replace("/", "//")
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    return _value(tree, constants)


def _value(node: ast.AST, constants: dict[str, int]) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _value(node.operand, constants)
        return None if inner is None else -inner
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _value(node.left, constants), _value(node.right, constants)
        if left is None or right is None or (isinstance(node.op, (ast.FloorDiv, ast.Mod)) and right == 0):
            return None
        if isinstance(node.op, ast.LShift) and not 0 <= right < 64:
            return None
        return _OPERATORS[type(node.op)](left, right)
    return None
