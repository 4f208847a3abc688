"""A copier's disguise of a Python file, for the similarity review's tests: every name the file
defines renamed, the top-level functions and classes in reverse order, every comment dropped and
every docstring rewritten. What it keeps is what copying keeps: the code's structure."""

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
