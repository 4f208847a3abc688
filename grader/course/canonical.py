"""A submission's code as the compiler sees it: what the similarity review compares.

A copy disguised by what changes nothing the compiler keeps must compare as the original: comments
(660 KB of them put a copy past any cap on bytes), docstrings, and statements that compute nothing
anyone reads (a junk assignment after each real statement took a copy from 0.80 to 0.42 of its
original). So, before fingerprinting:

- Python is read by its own parser (ast), which drops comments; docstrings and other constant or
  bare-name statements go, `pass` goes, so do statements after a return, raise, break or continue,
  branches on a constant condition, and assignments to names that nothing reads (their right-hand
  side stays as a statement where it calls something). Removing one such assignment can leave
  another unread, so it runs until nothing changes. What is left is written out by ast.unparse, in
  one layout.
- CUDA C is read by Pygments' lexer, as copydetect reads it: comments go, and so do empty
  statements and declarations or assignments of a variable that nothing else names (with no call
  on their right-hand side).

copydetect then renames every identifier to one letter. A file that does not parse is compared as
written (copydetect drops its comments itself).
"""

from __future__ import annotations

import ast
import re
from collections import Counter

from pygments import lexers
from pygments.token import Comment, Name, Text, Whitespace

PASSES = 8  # of pruning: junk that reads junk needs one pass per link of the chain
TERMINAL = (ast.Return, ast.Raise, ast.Continue, ast.Break)
NONEMPTY = ("body",)  # statement lists Python needs at least one statement in ("orelse" and "finalbody" may be empty)
EFFECTS = (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)
BLANK_LINES = re.compile(r"\n\s*\n")  # where comments were
KEPT_COMMENTS = (Comment.Preproc, Comment.PreprocFile)  # `#include`, `#define`: code, not prose


def python(sources: list[str]) -> list[str]:
    """Each Python file of one submission as the compiler sees it (names are read across the files)."""
    trees = []
    for text in sources:
        try:
            trees.append(ast.parse(text))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            trees.append(text)
    parsed = [tree for tree in trees if isinstance(tree, ast.Module)]
    for _ in range(PASSES):
        read = set().union(*(_names_read(tree) for tree in parsed))
        if not sum(_prune(tree, read) for tree in parsed):
            break
    return [_unparsed(tree) for tree in trees]


def _unparsed(tree: ast.Module | str) -> str:
    if isinstance(tree, str):
        return tree
    try:
        return ast.unparse(tree)
    except (RecursionError, ValueError):
        return ""


def _names_read(tree: ast.AST) -> set[str]:
    """Every name something reads: loaded or deleted names, attributes (a class's field read as
    `self.x`), and names declared global or nonlocal."""
    read = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            read.add(node.id)
        elif isinstance(node, ast.Attribute):
            read.add(node.attr)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            read.update(node.names)
    return read


def _prune(node: ast.AST, read: set[str]) -> int:
    """Prune every statement list under `node`; returns how many changes that took."""
    removed = 0
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if isinstance(block, list) and all(isinstance(s, ast.stmt) for s in block):
            kept, changes = _pruned_block(block, read)
            needed = field in NONEMPTY and not isinstance(node, ast.Module)  # a module may be empty
            setattr(node, field, kept or ([ast.Pass()] if needed else []))
            removed += changes
    for child in [*getattr(node, "handlers", []), *getattr(node, "cases", [])]:
        removed += _prune(child, read)
    return removed


def _pruned_block(block: list[ast.stmt], read: set[str]) -> tuple[list[ast.stmt], int]:
    """The block without what computes nothing, and how many changes that took."""
    if len(block) == 1 and isinstance(block[0], ast.Pass):
        return block, 0  # what an emptied body is given back: no change
    kept: list[ast.stmt] = []
    changes = 0
    for at, statement in enumerate(block):
        replacement = _simplified(statement, read)
        changes += len(replacement) != 1 or replacement[0] is not statement
        for inner in replacement:
            changes += _prune(inner, read)
        kept.extend(replacement)
        if isinstance(statement, TERMINAL):  # what follows never runs
            changes += len(block) - at - 1
            break
    return kept, changes


def _simplified(statement: ast.stmt, read: set[str]) -> list[ast.stmt]:
    """The statements that stand for `statement` once what computes nothing is left out."""
    if isinstance(statement, ast.Pass):
        return []
    if isinstance(statement, ast.Expr) and isinstance(statement.value, (ast.Constant, ast.Name)):
        return []  # a docstring, a junk literal, a bare name
    if isinstance(statement, (ast.If, ast.While)) and isinstance(statement.test, ast.Constant):
        if isinstance(statement, ast.While) and statement.test.value:
            return [statement]  # `while True:` loops
        return list(statement.body if statement.test.value else statement.orelse)
    targets = _bound(statement)
    if targets and not targets & read:
        value = getattr(statement, "value", None)
        effects = value is not None and any(isinstance(n, EFFECTS) for n in ast.walk(value))
        return [ast.Expr(value)] if effects else []
    return [statement]


def _bound(statement: ast.stmt) -> set[str]:
    """The names an assignment binds, where it binds names only (an attribute or item it sets is an effect)."""
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
        targets = [statement.target]
    else:
        return set()
    names = set()
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, (ast.Attribute, ast.Subscript)):
                return set()
            if isinstance(node, ast.Name):
                names.add(node.id)
    return names


def cuda(sources: list[str]) -> list[str]:
    """Each CUDA C file of one submission without its comments and its unused declarations."""
    lexer = lexers.get_lexer_by_name("cuda")
    files = [[(kind, value) for kind, value in lexer.get_tokens(text)
              if kind not in Comment or any(kind in kept for kept in KEPT_COMMENTS)] for text in sources]  # fmt: skip
    for _ in range(PASSES):
        names = Counter(value for tokens in files for kind, value in tokens if kind in Name)
        pruned = [_without_unused(tokens, names) for tokens in files]
        if sum(map(len, pruned)) == sum(map(len, files)):
            break
        files = pruned
    return [BLANK_LINES.sub("\n", "".join(value for _, value in tokens)) for tokens in files]


def _spacing(kind) -> bool:
    return kind in Text or kind in Whitespace


def _without_unused(tokens: list[tuple], names: Counter) -> list[tuple]:
    """Drop each statement (from after a `;`, `{` or `}` to its `;`, outside parentheses) that is
    empty or declares or assigns a variable named nowhere else, with no call in it."""
    kept: list[tuple] = []
    start, depth = 0, 0
    for at, (kind, value) in enumerate(tokens):
        if value in ("(", "["):
            depth += 1
        elif value in (")", "]"):
            depth = max(depth - 1, 0)
        if depth or value not in (";", "{", "}"):
            continue
        statement = tokens[start : at + 1]
        if value != ";" or not _unused(statement, names):
            kept.extend(statement)
        start = at + 1
    return kept + tokens[start:]


def _unused(statement: list[tuple], names: Counter) -> bool:
    words = [(kind, value) for kind, value in statement[:-1] if not _spacing(kind)]
    if not words:
        return True  # an empty statement
    if any(value == "(" for _, value in words) or any(kind in KEPT_COMMENTS for kind, _ in words):
        return False
    cut = next((i for i, (_, value) in enumerate(words) if value == "="), len(words))
    if cut == 0 or words[cut - 1][0] not in Name:
        return False
    return names[words[cut - 1][1]] == 1
