"""A copier's disguises of a file, for the similarity review's tests.

`disguise`: every name a Python file defines renamed, the top-level functions and classes in
reverse order, every comment dropped and every docstring rewritten. What it keeps is what copying
keeps: the code's structure. Then the two cheap disguises issue 53 measured against the review:
`pad` (a copy made larger than any cap on bytes with comments: 660 KB were never compared) and
`junk` (a statement that computes nothing after each real one: `_unused3 = 3` took a copy to 0.42
of its original, under the 0.5 threshold), each for Python and for CUDA C."""

from __future__ import annotations

import ast
import builtins

KEPT = set(dir(builtins)) | {"torch", "triton", "tl", "math", "np", "os"}  # what a copier cannot rename


def disguise(source: str) -> str:
    tree = ast.parse(source)
    defined = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
    renamed = {name: f"v{i}_{name[::-1].lower()}" for i, name in enumerate(sorted(defined - KEPT))}

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.Name:
            node.id = renamed.get(node.id, node.id)
            return node

        def visit_arg(self, node: ast.arg) -> ast.arg:
            node.arg = renamed.get(node.arg, node.arg)
            self.generic_visit(node)
            return node

        def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
            node.name = renamed.get(node.name, node.name)
            self.generic_visit(node)
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                first.value.value = "My own implementation, written from scratch."
            return node

    tree = Rename().visit(tree)
    definitions = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    tree.body = [node for node in tree.body if node not in definitions] + definitions[::-1]
    return "# my submission\n" + ast.unparse(tree) + "\n"  # unparse writes no comment


PAD_BYTES = 660_000  # issue 53's padding: past the review's old 512 KiB cap


def pad(source: str, language: str = "python") -> str:
    """The file with PAD_BYTES of comments spread between its lines."""
    lines = source.splitlines()
    comment = "# " if language == "python" else "// "
    filler = comment + "Notes on the design of this kernel, written as I went along. " * 2
    every = max(PAD_BYTES // (len(filler) + 1) // max(len(lines), 1), 1)
    padded = []
    for line in lines:
        padded.append(line)
        indent = line[: len(line) - len(line.lstrip())]
        padded += [indent + filler] * every
    return "\n".join(padded) + "\n"


def junk(source: str, language: str = "python") -> str:
    """The file with an assignment that nothing reads after each of its statements."""
    if language == "python":
        tree = ast.parse(source)
        count = 0
        for node in list(ast.walk(tree)):
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if isinstance(block, list) and block and all(isinstance(s, ast.stmt) for s in block):
                    mixed = []
                    for statement in block:
                        mixed.append(statement)
                        if not isinstance(statement, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
                            count += 1
                            mixed.append(ast.parse(f"_unused{count} = {count}").body[0])
                    setattr(node, field, mixed)
        return ast.unparse(tree) + "\n"
    out, count, depth = [], 0, 0
    for char in source:  # after each `;` that ends a statement inside a function body
        out.append(char)
        depth += char == "("
        depth -= char == ")"
        if char == ";" and depth == 0:
            count += 1
            out.append(f" int _unused{count} = {count};")
    return "".join(out)
