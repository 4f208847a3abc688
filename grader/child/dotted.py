"""The object a dotted name stands for (`torch.cuda.Event.elapsed_time`): what the boundary wraps,
the switches guard and the harness's snapshot watches are all named this way."""

from __future__ import annotations

import importlib
import sys


def resolve(path: str, strict: bool = True) -> object:
    """The object a dotted path names, from its top module down; not `strict`: None where an
    attribute is missing (a part of torch this build lacks)."""
    first, *rest = path.split(".")
    found = sys.modules.get(first) or importlib.import_module(first)
    for name in rest:
        found = getattr(found, name) if strict else getattr(found, name, None)
    return found
